"""Whether an edit fit streams from disk under the memory bound, and what it holds
(docs/SCIENCE.md#memory-bound): the methods' side (:func:`streams`, read from each method's class)
beside :mod:`science.streamed_fit`'s byte counts. Apart from both so that the methods, which
stream through :mod:`science.streamed_fit`, are not imported by it."""

from __future__ import annotations

from collections.abc import Iterable

from science.bounded import MemoryBound, state_bytes
from science.methods import fit_copies, get_method
from science.streamed_fit import streamed_fit_bytes


def streams(method: str) -> bool:
    """Whether ``method``'s class fits from rows on disk (has ``fit_streamed``)."""
    return callable(getattr(get_method(method), "fit_streamed", None))


def fit_need(
    bound: MemoryBound, n_sequences: int, length: int, width: int, methods: Iterable[str], beside: int = 0
) -> tuple[int, bool]:
    """(bytes held at once, whether it streams) for fitting ``methods`` on ``n_sequences`` ×
    ``length`` rows of ``width`` beside ``beside`` other bytes: in memory (the states and the fit's
    copies, the most any of ``methods`` makes: ``science.methods.fit_copies``) where that fits
    ``bound`` or some method cannot stream (:func:`streams`), else streamed from disk
    (:func:`streamed_fit_bytes`)."""
    methods = list(methods)
    held = int(fit_copies(methods) * state_bytes(n_sequences, length, width)) + beside
    if bound.limit is None or held <= bound.limit or not all(streams(m) for m in methods):
        return held, False
    return streamed_fit_bytes(n_sequences, length, width) + beside, True
