"""A child process's output read as it comes, so a test waits for the line that says the child is
ready (uvicorn's "Uvicorn running on …") instead of polling it with sleeps."""

from __future__ import annotations

import threading
from typing import IO

import pytest


class OutputLines:
    """Reads ``stream`` (a child's stdout or stderr pipe) line by line in a thread.

    :meth:`wait_for` blocks on a condition the reader notifies at every line and at the end of the
    output (the child exited): no polling, and a child that dies is reported at once with what it
    printed."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            for raw in iter(stream.readline, b""):
                with self._changed:
                    self._lines.append(raw.decode(errors="replace"))
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def _find(self, text: str) -> str | None:
        return next((line for line in self._lines if text in line), None)

    def wait_for(self, text: str, hang_guard_s: float) -> str:
        """The first line holding ``text``. Fails the test, with the output so far, when the output
        ends without one (the child exited) or after ``hang_guard_s`` seconds (a hang guard, never a
        timing assertion)."""
        with self._changed:
            self._changed.wait_for(lambda: self._find(text) is not None or self._ended, timeout=hang_guard_s)
            line = self._find(text)
            if line is None:
                why = "the output ended" if self._ended else f"nothing in {hang_guard_s:g} s"
                pytest.fail(f"no line with {text!r} ({why}):\n{''.join(self._lines)[-4000:]}")
            return line

    def text(self, hang_guard_s: float = 60.0) -> str:
        """Everything the child printed, once its output has ended (call after it exited)."""
        self._reader.join(hang_guard_s)
        with self._changed:
            return "".join(self._lines)
