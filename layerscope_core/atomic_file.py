"""Files written whole or not at all: a kill or a full disk mid-write leaves the old file (or
none), never half of a new one, for every reader that resumes from what is on disk (training
states, measurement pieces, task files, notes)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "write_atomic"]


def _process_umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# read once: mkstemp makes its file 0600, and a bundle or task file others must read would keep that
_NEW_FILE_MODE = 0o666 & ~_process_umask()


@contextmanager
def atomic_file(path: Path | str) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into: a hidden temporary file beside it,
    flushed to disk (fsync) and renamed onto ``path`` (``os.replace``, atomic on POSIX) when the
    block ends without an error; on any error (a kill's KeyboardInterrupt included) the temporary
    file is removed and ``path`` is left as it was. The parent folder must exist. The new file has
    the old one's permissions, or a new file's under the process's umask (not mkstemp's 0600).

    Raises:
        OSError: the folder cannot be written (disk full, permissions), re-raised after clean-up.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, path.stat().st_mode & 0o7777 if path.exists() else _NEW_FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path | str, data: bytes | Callable[[BinaryIO], object]) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_file`): bytes, or a function
    that writes into the file (a copy streamed from elsewhere, never held whole)."""
    with atomic_file(path) as fh:
        if isinstance(data, bytes | bytearray | memoryview):
            fh.write(data)
        else:
            data(fh)
