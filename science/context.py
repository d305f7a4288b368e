"""Progress and cancellation for long work.

Science functions take an optional ``ctx``; the job runner passes one that heartbeats,
writes progress to the ``jobs`` table and raises :class:`JobCancelled` when a cancel was
requested. :class:`JobContext` prints a progress bar on the console (tqdm); :class:`SilentContext`,
the default when ``ctx`` is None, prints nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

from tqdm.auto import tqdm


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.check_cancelled` between steps and layers."""


class Context(Protocol):
    """What work calls on its ``ctx``: a :class:`JobContext`, or a :class:`SubContext` slice of one."""

    def progress(self, fraction: float, message: str = "") -> None: ...

    def log(self, line: str) -> None: ...

    def check_cancelled(self) -> None: ...

    def attach_run(self, run_id: int) -> None: ...

    def storing(self) -> contextlib.AbstractContextManager[None]: ...

    def sub(self, start: float, end: float) -> SubContext: ...


class JobContext:
    """Console progress: one tqdm bar over fractions 0..1."""

    def __init__(self, description: str = "layerscope", enabled: bool = True) -> None:
        self._bar = tqdm(total=1000, desc=description, disable=not enabled, leave=False)
        self.message = ""

    def progress(self, fraction: float, message: str = "") -> None:
        """Report ``fraction`` (0..1) of this piece of work done, with a short message."""
        value = int(max(0.0, min(1.0, fraction)) * 1000)
        self._bar.n = value
        if message:
            self.message = message
            self._bar.set_postfix_str(message, refresh=False)
        self._bar.refresh()

    def log(self, line: str) -> None:
        """A line for the job's log tail."""
        self._bar.write(line)

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if a cancel was requested (never, on the console)."""

    def attach_run(self, run_id: int) -> None:
        """Name the stored run this work is about, once its row exists (the job runner records
        it on the job at once, so a job measuring a run links to it before it ends)."""

    @contextlib.contextmanager
    def storing(self) -> Iterator[None]:
        """Around each write of results: the job runner's raises :class:`JobCancelled` before
        anything is written when a cancel was requested, and refuses cancels (409) until the
        write is done, so a cancel answered 200 is never followed by stored results."""
        yield

    def sub(self, start: float, end: float) -> SubContext:
        """A view mapping 0..1 onto ``start..end`` of this context."""
        return SubContext(self, start, end)

    def close(self) -> None:
        self._bar.close()


class SubContext:
    """A slice of a parent context's progress range."""

    def __init__(self, parent: Context, start: float, end: float) -> None:
        self.parent, self.start, self.end = parent, start, end

    def progress(self, fraction: float, message: str = "") -> None:
        self.parent.progress(self.start + (self.end - self.start) * fraction, message)

    def log(self, line: str) -> None:
        self.parent.log(line)

    def check_cancelled(self) -> None:
        self.parent.check_cancelled()

    def attach_run(self, run_id: int) -> None:
        self.parent.attach_run(run_id)

    def storing(self) -> contextlib.AbstractContextManager[None]:
        return self.parent.storing()

    def sub(self, start: float, end: float) -> SubContext:
        return SubContext(self, start, end)


class SilentContext(JobContext):
    """No output at all (tests, notebooks)."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
