"""A user's task file read for ``layerscope task add`` and ``POST /api/tasks``, naming every bad
row even when some lines are not JSON.

``science.tasks.file_task.parse_task_file`` names every line that is not JSON, but then stops:
the rows the other lines make are not checked, so a file with one broken line and eight bad rows
was reported as one problem. Here the broken lines are read as a valid placeholder row (keeping
every other row's number) and the file is checked again; the report holds both, in line order
(the first 20 shown, then how many more: ``TaskFileError``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from science.tasks.file_task import MAX_MEMORY_BYTES, TaskFile, TaskFileError, parse_task_file

_NOT_JSON = re.compile(r"line (\d+): not JSON")
_ROW = re.compile(r"row (\d+): (.*)", re.S)
# a row every check passes (one token, not probed): it stands for a line that is not JSON
_PLACEHOLDER = b'{"tokens": [0], "labels": [null]}'


def parse_naming_every_bad_row(
    path: str | Path, tokenizer: Any = None, data: bytes | None = None, max_memory_bytes: int = MAX_MEMORY_BYTES
) -> TaskFile:
    """``parse_task_file(path, tokenizer, data, max_memory_bytes)``; when lines are not JSON, the error names the bad
    rows of the other lines too (``row 5 (line 6): …`` where a blank line shifts the two).

    Raises:
        TaskFileError (a ValueError): every problem found, in line order.
    """
    try:
        return parse_task_file(path, tokenizer=tokenizer, data=data, max_memory_bytes=max_memory_bytes)
    except TaskFileError as e:
        bad_lines = [int(m.group(1)) for m in map(_NOT_JSON.match, e.errors) if m]
        if not bad_lines or len(bad_lines) != len(e.errors):
            raise
        first = e
    # lines as parse_task_file reads them (split at b"\n"; its size limit held, so it fits in memory)
    lines = (Path(path).read_bytes() if data is None else data).removeprefix(b"\xef\xbb\xbf").split(b"\n")
    for n in bad_lines:
        lines[n - 1] = _PLACEHOLDER
    line_of_row = [i for i, line in enumerate(lines, start=1) if line.strip()]
    found: list[tuple[int, str]] = [(n, msg) for n, msg in zip(bad_lines, first.errors, strict=True)]
    try:
        parse_task_file(path, tokenizer=tokenizer, data=b"\n".join(lines), max_memory_bytes=max_memory_bytes)
    except TaskFileError as again:
        for m in filter(None, map(_ROW.match, again.errors)):  # file-level problems may be the placeholders'
            row = int(m.group(1))
            line = line_of_row[row - 1]
            found.append(
                (line, f"row {row}: {m.group(2)}" if row == line else f"row {row} (line {line}): {m.group(2)}")
            )
    found.sort(key=lambda t: t[0])
    raise TaskFileError(str(path), [msg for _, msg in found]) from None
