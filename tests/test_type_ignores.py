"""Every ``# type: ignore`` in the repository's Python names its error code and says why it is
there (``# type: ignore[code]  # reason``): mypy (``make lint``) reports the ones that no longer
suppress anything and the ones without a code; the reason is for the reader."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", "build", "dist"}
IGNORE = re.compile(r"type:\s*ignore")
WITH_REASON = re.compile(r"^#\s*type: ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]  # \S")


def ignore_comments(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each comment holding ``type: ignore`` (strings and docstrings are not comments)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT and IGNORE.search(t.string)]


def python_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(ROOT).parts)]


def test_the_rule_tells_a_reasoned_ignore_from_a_bare_one() -> None:
    source = (
        "a = f()  # type: ignore[arg-type]  # the library's stub is narrower than its code\n"
        "b = g()  # type: ignore[arg-type]\n"
        "c = h()  # type: ignore\n"
        'd = "# type: ignore"\n'
    )
    found = ignore_comments(source)
    assert [line for line, _ in found] == [1, 2, 3]  # the string on line 4 is no comment
    assert [bool(WITH_REASON.match(c)) for _, c in found] == [True, False, False]


def test_every_type_ignore_names_its_code_and_reason() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for path in python_files()
        for line, comment in ignore_comments(path.read_text(encoding="utf-8"))
        if not WITH_REASON.match(comment)
    ]
    assert not bare, "a type: ignore without its code and reason (# type: ignore[code]  # why):\n" + "\n".join(bare)
