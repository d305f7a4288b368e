"""File-defined tasks kept by content hash in the model store, and their names.

Layout under the store folder (``LAYERSCOPE_STORE_DIR``, shared by every worker)::

    tasks/<sha256>.json         the canonical task file (``TaskFile.canonical_bytes``)
    tasks/names/<name>.json     {"sha256", "added_at", "source", "n_rows", "lengths", ...}

A name is bound to one content for good (a run's config hash names the task, so re-binding it
would make two different data sets look like one): adding another file under a taken name is
refused; adding the same content again is a no-op. Writes go to a temporary file renamed into
place, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from layerscope_core.atomic_file import write_atomic

from .file_task import FileTask, TaskFile

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class TaskStore:
    """The file tasks under ``root`` (``<store>/tasks``; created on the first ``add``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def names(self) -> dict[str, str]:
        """{name: sha256} of every added task, sorted by name."""
        folder = self.root / "names"
        if not folder.is_dir():
            return {}
        out = {}
        for p in sorted(folder.glob("*.json")):
            try:
                out[p.stem] = json.loads(p.read_text())["sha256"]
            except (OSError, ValueError, KeyError):
                continue  # a foreign or damaged file is not a task
        return out

    def info(self, name: str) -> dict:
        """The name's record (sha256, added_at, source, n_rows, lengths, vocab_size, class_names).

        Raises:
            KeyError: no task of that name.
        """
        p = self.root / "names" / f"{name}.json"
        if not _NAME_RE.match(name) or not p.is_file():
            raise KeyError(name)
        return json.loads(p.read_text())

    def add(
        self, file: TaskFile, name: str, source: str = "", builtin: tuple[str, ...] = (), plugins: tuple[str, ...] = ()
    ) -> str:
        """Store ``file`` under ``name``; returns its sha256.

        Raises:
            ValueError: a bad name (lower-case letter first, then letters, digits, ``_``; ≤ 64),
                the name of a built-in task or of a task a plugin (or ``register_task``) adds —
                a run naming it would get that task, not this file —, or a name already bound
                to other content.
        """
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"task name {name!r}: use a lower-case letter, then letters, digits or _ (64 at most)")
        if name in builtin:
            raise ValueError(f"task name {name!r} is a built-in task")
        if name in plugins:
            raise ValueError(
                f"task name {name!r} is a plugin's task here (a run naming it gets that task); choose another name"
            )
        digest = file.digest
        taken = self.names().get(name)
        if taken is not None and taken != digest:
            raise ValueError(
                f"task name {name!r} is already bound to another file (sha256 {taken[:12]}…); choose another name"
            )
        (self.root / "names").mkdir(parents=True, exist_ok=True)
        data_path = self.root / f"{digest}.json"
        if not data_path.is_file():
            write_atomic(data_path, file.canonical_bytes())
        if taken is None:
            task = FileTask(name, file)
            record = {
                "sha256": digest,
                "added_at": datetime.now(UTC).isoformat(),
                "source": source,
                "n_rows": len(file.tokens),
                "lengths": task.lengths,
                "vocab_size": task.vocab_size,
                "class_names": list(file.class_names),
            }
            write_atomic(self.root / "names" / f"{name}.json", json.dumps(record, indent=1).encode())
        return digest

    def load(self, name: str, sha256: str | None = None) -> FileTask:
        """The ``FileTask`` of ``name`` (checked against ``sha256`` when given).

        Raises:
            KeyError: no task of that name.
            ValueError: ``sha256`` differs from the stored content, or the stored file does not
                hash to its name (damaged).
        """
        digest = self.info(name)["sha256"]
        if sha256 is not None and sha256 != digest:
            raise ValueError(f"task {name!r}: the run asks for content {sha256[:12]}…, the store holds {digest[:12]}…")
        if not _SHA_RE.match(digest):
            raise ValueError(f"task {name!r}: its record names no valid sha256")
        file = TaskFile.from_json(json.loads((self.root / f"{digest}.json").read_text()))
        if file.digest != digest:
            raise ValueError(f"task {name!r}: the stored file {digest}.json is damaged (its content hashes otherwise)")
        return FileTask(name, file)
