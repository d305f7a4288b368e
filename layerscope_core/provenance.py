"""Which code made a result: package versions and the git commit of the checkout it ran from.

Stored with every run (``runs.made_with``) and in every bundle manifest, so a study made in parts
— a GPU lease, then a CPU, then another machine — says which code made each run.
"""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

VERSION_KEYS = ("layerscope", "git_commit", "git_dirty", "python", "torch", "transformers")


def package_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``; None when it is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The commit checked out where this package's code runs from; None outside a git checkout
    (an installed wheel) or without git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).resolve().parent
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def git_dirty(cwd: Path | None = None) -> bool | None:
    """Whether tracked code (``*.py``, ``pyproject.toml``) of the checkout at ``cwd`` (default: this
    package's) differs from its commit (then the commit alone does not say which code ran); None
    outside a git checkout or without git."""
    try:
        # code only (a regenerated docs/RESULTS.md or bundle changes no result); no index lock taken
        out = subprocess.run(
            [
                "git",
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ":/*.py",
                ":/pyproject.toml",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=cwd or Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


@lru_cache(maxsize=1)
def code_versions() -> dict[str, str | bool | None]:
    """``{layerscope, git_commit, git_dirty, python, torch, transformers}`` of this process, read once: the
    code a process runs is the code it started with."""
    return {
        "layerscope": package_version("layerscope"),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "transformers": package_version("transformers"),
    }


def commit_label(versions: dict | None, length: int | None = None) -> str:
    """``versions``' git commit (its first ``length`` characters), ``+dirty`` when the tree had
    uncommitted changes; ``""`` when no commit was recorded."""
    commit = ((versions or {}).get("git_commit") or "")[:length]
    return f"{commit}+dirty" if commit and (versions or {}).get("git_dirty") else commit
