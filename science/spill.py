"""Rows spilled to disk: a float32 matrix ``[N, D]`` written to an unlinked temporary file and
read back a chunk at a time into two reused buffers (docs/DESIGN.md#memory-bound).

What a memory-bounded edit fit reads when its rows do not fit the bound
(:mod:`science.streamed_fit`): the rows pass through the process ``chunk_rows`` at a time, so
its resident memory holds two chunks (the one worked on, the next being read), not N rows. The
file is read with ``os.preadv`` (ordinary reads: the kernel's page cache may keep the file, but no
page of it is mapped into this process, so none counts in its resident set — a ``numpy.memmap``
would count every page it touched). The file is created by :func:`tempfile.TemporaryFile`
(already unlinked where the OS allows: nothing is left behind by a killed process) in ``TMPDIR``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

__all__ = ["CHUNK_BYTES", "RowSource", "SelectedRows", "SpilledRows", "chunk_rows"]

CHUNK_BYTES = 4 * 2**20  # one chunk of float32 rows read back at a time (4 MiB: 1,024 rows at D = 1024)


def chunk_rows(width: int) -> int:
    """Rows of ``width`` float32 numbers in one :data:`CHUNK_BYTES` chunk (at least 64)."""
    return max(64, CHUNK_BYTES // (4 * max(width, 1)))


class RowSource(Protocol):
    """``n`` rows of ``width`` features, read in order a chunk at a time."""

    @property
    def n(self) -> int: ...

    @property
    def width(self) -> int: ...

    def chunks(self) -> Iterator[Tensor]:
        """The rows in order, as float32 ``[m, width]`` chunks the caller may overwrite (each is
        refilled as later ones are read: copy one to keep it)."""
        ...

    def indexed_chunks(self) -> Iterator[tuple[Tensor, Tensor | None]]:
        """The rows in order, before any selection: ``(chunk, index)``, a float32 ``[m, width]``
        chunk as :meth:`chunks` gives it and the int64 positions of the rows taken from it (None:
        every row). What a reader that gathers as it copies takes (``chunks`` gathers for it)."""
        ...


class SpilledRows:
    """A float32 ``[n, width]`` matrix on disk, appended in order and read back in chunks of
    ``chunk_rows(width)`` rows (:class:`RowSource`). Close it (or use it as a context manager) to
    free the disk space.

    Raises:
        ValueError: :meth:`append` of rows that are not ``[m, width]``.
    """

    def __init__(self, width: int) -> None:
        self._width = int(width)
        self._n = 0
        self.chunk = chunk_rows(self._width)
        self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115  # closed by close() or __exit__: it outlives this call

    @property
    def n(self) -> int:
        return self._n

    @property
    def width(self) -> int:
        return self._width

    @property
    def nbytes(self) -> int:
        """Bytes on disk."""
        return 4 * self._n * self._width

    def append(self, rows: Tensor) -> None:
        """Write ``rows [m, width]`` (any float dtype and device; stored as float32) after the last."""
        if rows.ndim != 2 or rows.shape[1] != self._width:
            raise ValueError(f"rows must be [m, {self._width}], got shape {tuple(rows.shape)}")
        a = np.ascontiguousarray(rows.detach().to("cpu", torch.float32).numpy())
        self._file.seek(4 * self._n * self._width)
        view = a.data.cast("B")
        while view:
            written = self._file.write(view)
            view = view[written:]
        self._n += int(a.shape[0])

    def positions(self, select: Tensor) -> list[Tensor]:
        """For each chunk, the int64 positions within it of the rows ``select`` (bool ``[n]``) marks:
        what :meth:`indexed_chunks` hands out, found once for a selection that is read many times
        (a probe fit's every evaluation reads its training rows)."""
        return [select[start : start + self.chunk].nonzero().flatten() for start in range(0, self._n, self.chunk)]

    def chunks(self, positions: list[Tensor] | None = None, read_ahead: bool = True) -> Iterator[Tensor]:
        """The rows in order, ``[m, width]`` float32 chunks of two reused buffers (a chunk the caller
        may overwrite); ``positions`` (:meth:`positions`): only the rows they name (a copy per chunk);
        ``read_ahead``: as :meth:`indexed_chunks`."""
        for out, index in self.indexed_chunks(positions, read_ahead):
            # index_select gathers the same rows ~4× faster than a bool mask
            yield out if index is None else torch.index_select(out, 0, index)

    def indexed_chunks(
        self, positions: list[Tensor] | None = None, read_ahead: bool = True
    ) -> Iterator[tuple[Tensor, Tensor | None]]:
        """The file's chunks in order, each with the positions of the rows to take from it
        (``positions``, :meth:`positions`; None: every row): :meth:`RowSource.indexed_chunks`.

        With ``read_ahead`` (and more than one chunk) the next chunk is read by a reader thread into
        a second buffer while the caller works on this one (``os.preadv`` lets go of the interpreter
        lock): the file's read, ~a quarter of a streamed probe evaluation, overlaps the arithmetic
        where a core is free. Two buffers of :data:`CHUNK_BYTES` are held
        (:func:`science.streamed_fit.streamed_fit_bytes` counts both). Without it each chunk is read
        into one buffer when it is asked for (the same rows; what the benchmark compares against).

        Raises:
            OSError: the file ended early or could not be read.
            ValueError: ``positions`` were found for another number of rows than the file holds.
        """
        starts = list(range(0, self._n, self.chunk))
        if positions is not None and len(positions) != len(starts):
            raise ValueError(
                f"positions for {len(positions)} chunks, the file has {len(starts)}: rows were appended "
                "after the selection was made"
            )
        if not starts:
            return
        ahead = read_ahead and len(starts) > 1  # one chunk: no thread (its start costs more than it hides)
        bufs = [np.empty((self.chunk, self._width), dtype=np.float32) for _ in range(2 if ahead else 1)]

        def read(i: int) -> np.ndarray:
            into = bufs[i % len(bufs)][: min(self.chunk, self._n - starts[i])]
            self._read(starts[i], into)
            return into

        if not ahead:
            for i in range(len(starts)):
                yield torch.from_numpy(read(i)), None if positions is None else positions[i]
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="spilled-rows") as reader:
            pending = reader.submit(read, 0)
            for i in range(len(starts)):
                chunk = pending.result()
                if i + 1 < len(starts):  # the other buffer: the caller is done with it
                    pending = reader.submit(read, i + 1)
                yield torch.from_numpy(chunk), None if positions is None else positions[i]

    def _read(self, start: int, into: np.ndarray) -> None:
        """Fill ``into`` from row ``start`` on, with positional reads (no shared file offset: safe
        beside another thread's read)."""
        view = into.data.cast("B")
        offset = 4 * start * self._width
        while view:
            got = os.preadv(self._file.fileno(), [view], offset)
            if not got:
                raise OSError(f"spilled rows: the file ended {len(view)} bytes early")
            view, offset = view[got:], offset + got

    def read_all(self) -> Tensor:
        """Every row at once, a new float32 ``[n, width]`` tensor (what a caller holds is then n rows)."""
        out = np.empty((self._n, self._width), dtype=np.float32)
        self._read(0, out)
        return torch.from_numpy(out)

    def selected(self, mask: Tensor, read_ahead: bool = True) -> SelectedRows:
        """The rows ``mask`` (bool ``[n]``) marks, in order, as a :class:`RowSource` (``read_ahead``:
        as :meth:`indexed_chunks`)."""
        if mask.shape != (self._n,):
            raise ValueError(f"mask must be [{self._n}], got shape {tuple(mask.shape)}")
        return SelectedRows(self, mask.bool().cpu(), read_ahead)

    def close(self) -> None:
        """Delete the file."""
        self._file.close()

    def __enter__(self) -> SpilledRows:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class SelectedRows:
    """Some rows of a :class:`SpilledRows` (bool ``mask [n]``), in order: a :class:`RowSource`. The
    selection is of the rows the file holds when it is made (reading it after more rows were
    appended raises ValueError)."""

    def __init__(self, rows: SpilledRows, mask: Tensor, read_ahead: bool = True) -> None:
        self.rows, self.mask, self.read_ahead = rows, mask, read_ahead
        self._n = int(mask.sum())
        self._positions = rows.positions(mask)  # each chunk's selected rows, found once (8 bytes a row)

    @property
    def n(self) -> int:
        return self._n

    @property
    def width(self) -> int:
        return self.rows.width

    def chunks(self) -> Iterator[Tensor]:
        return self.rows.chunks(self._positions, self.read_ahead)

    def indexed_chunks(self) -> Iterator[tuple[Tensor, Tensor | None]]:
        return self.rows.indexed_chunks(self._positions, self.read_ahead)
