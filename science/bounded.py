"""A measurement's memory bound (docs/SCIENCE.md#memory-bound): what it holds beyond the model's
weights is at most ``LAYERSCOPE_MEASURE_MEMORY_GB`` GiB (2^30 bytes).

A capture is split into groups of layers whose states fit the bound together
(:meth:`MemoryBound.groups`). :class:`Streamed` is a capture that holds one group at a time, each
group one forward pass over the data (stopped after the group's deepest layer where no
predictions are read); the probes instead write every layer to disk in one pass and read the
groups back (:mod:`science.spilled_capture`: measured cheaper, BENCHMARKS.md#memory-bound).
Every layer's numbers are those of the capture of every layer at once, bit for bit: the same
modules on the same batches, and every probe and edit reads one layer.

An edit's fit set that cannot fit with its copies is not held: its rows are streamed from disk
(:mod:`science.streamed_fit`). A measurement whose smallest piece (one layer's states, or one
edit's fit at its largest fit size, streamed where it must be) cannot fit is refused before it starts, by :class:`MeasureMemoryError`, one line naming the
setting and what it would need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from models_store.base import LayerwiseModel
from models_store.capture import hidden_state
from science.captured import Captured, capture
from science.tasks.base import TaskData

__all__ = ["GIB", "MEMORY_SETTING", "FIT_COPIES", "MeasureMemoryError", "MemoryBound", "Streamed", "state_bytes"]

GIB = 2**30
MEMORY_SETTING = "LAYERSCOPE_MEASURE_MEMORY_GB"
# An edit's fit on X [N, D] float32 holds X's layer states, the labelled rows copied out of them
# and (LEACE, INLP's projections) a float64 copy: about 4 × the states' bytes at once (measured
# with tests/test_memory_bound.py's RSS probe; the fit-size rule's largest fit set is counted so).
FIT_COPIES = 4


class MeasureMemoryError(ValueError):
    """A measurement that cannot fit its memory bound; the message is one line. ``need``: the
    bytes the refused piece holds at once; ``what``: that piece."""

    def __init__(self, message: str, need: int = 0, what: str = "") -> None:
        super().__init__(message)
        self.need, self.what = need, what


def gib_up(n: float) -> str:
    """``n`` bytes in GiB, rounded **up** at three significant digits (a bound set to it holds
    ``n``): 0.0583 GiB → "0.0584", 1.5 GiB → "1.5"."""
    x = n / GIB
    if x <= 0:
        return "0"
    digits = 2 - math.floor(math.log10(x))
    up = math.ceil(round(x * 10**digits, 9))  # round first: 2.5e-6 · 10⁸ is 250.00000000000003 in floats
    text = f"{up / 10**digits:.{max(digits, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def refuse_over(check: Callable[[MemoryBound], None], bound: MemoryBound) -> None:
    """Run ``check(bound)`` (a measurement's memory checks, each raising
    :class:`MeasureMemoryError` on its first piece over the bound); when it refuses, raise one
    error naming that piece and the smallest bound under which **every** piece fits (the check
    run again at each refused piece's need until none is refused), so that setting it is enough."""
    try:
        check(bound)
        return
    except MeasureMemoryError as first:
        need, refused = first.need, first
    while True:  # each pass raises the bound to a refused piece's need: at most one pass a piece
        try:
            check(MemoryBound(need))
            break
        except MeasureMemoryError as exc:
            if exc.need <= need:  # not a piece's need (a check that refuses at any bound): as it is
                raise
            need = exc.need
    raise MeasureMemoryError(
        f"{refused.what} needs {_gib(refused.need)} at once, over {MEMORY_SETTING}={(bound.limit or 0) / GIB:.3g}; "
        f"set {MEMORY_SETTING} to at least {gib_up(need)} (every part of what this job measures fits there) "
        "or measure fewer or shorter sequences",
        need=need,
        what=refused.what,
    )


def state_bytes(n: int, length: int, d_model: int) -> int:
    """Bytes of one layer's float32 states of ``n`` sequences of ``length`` positions ``[n, L, D]``."""
    return 4 * n * length * d_model


def _gib(n: float) -> str:
    return f"{gib_up(n)} GiB"


@dataclass(frozen=True)
class MemoryBound:
    """At most ``limit`` bytes of states held at once (None: unbounded, every layer in one pass)."""

    limit: int | None = None

    @classmethod
    def of_gib(cls, gib: float | None) -> MemoryBound:
        """The bound of a ``LAYERSCOPE_MEASURE_MEMORY_GB`` value (None or ≤ 0: unbounded): the nearest
        whole byte, at least one (a positive setting is a bound, and is said back as it was set)."""
        return cls(None if gib is None or gib <= 0 else max(1, round(gib * GIB)))

    def require(self, need: int, what: str) -> None:
        """Raise :class:`MeasureMemoryError` when ``need`` bytes held at once (``what``) are over the bound."""
        if self.limit is not None and need > self.limit:
            raise MeasureMemoryError(
                f"{what} needs {_gib(need)} at once, over {MEMORY_SETTING}={self.limit / GIB:.3g}; "
                f"set {MEMORY_SETTING} to at least {gib_up(need)} or measure fewer or shorter sequences",
                need=need,
                what=what,
            )

    def groups(self, layers: list[int], per_layer: int, what: str, working: int = 0) -> list[list[int]]:
        """``layers`` in order, cut into groups whose states (``per_layer`` bytes each) fit the bound
        beside ``working`` bytes that the work on one layer needs meanwhile (one group when
        unbounded). Raises :class:`MeasureMemoryError` when one layer and its work do not fit."""
        self.require(per_layer + working, f"{what} (one layer's states and its work)")
        if self.limit is None or not layers:
            return [list(layers)]
        size = max(1, (self.limit - working) // max(per_layer, 1))
        return [list(layers[i : i + size]) for i in range(0, len(layers), size)]


def _hidden_bytes(output: object) -> int:
    h = hidden_state(output)
    return h.numel() * h.element_size()


class _GroupStates(Mapping[int, torch.Tensor]):
    """``{layer: [n, L, D]}`` of a :class:`Streamed`: reading a layer captures its group."""

    def __init__(self, owner: Streamed) -> None:
        self._owner = owner

    def __getitem__(self, layer: int) -> torch.Tensor:
        return self._owner.load(layer).states[layer]

    def __iter__(self) -> Iterator[int]:
        return (layer for group in self._owner.groups for layer in group)

    def __len__(self) -> int:
        return sum(len(g) for g in self._owner.groups)


class Streamed:
    """A capture of ``data`` that holds one group of layers' states at a time (as :class:`Captured`:
    ``data``, ``preds`` [n, L], ``states`` {layer: [n, L, D]}); reading a layer of another group
    drops the held one and runs the model again for the new one. With ``keep_outputs`` each layer
    also keeps its hook module's output per batch, the stored input of an edited forward pass
    (:meth:`start`). With ``preds=False`` (fit sets: states only) each pass stops after its
    group's deepest layer (``capture(preds=False)``), so a group of early layers costs only their
    blocks.

    Raises:
        ValueError: ``keep_outputs`` without ``preds``.
    """

    def __init__(
        self,
        model: LayerwiseModel,
        data: TaskData,
        device: torch.device | str,
        groups: list[list[int]],
        keep_outputs: bool = False,
        preds: bool = True,
    ) -> None:
        if keep_outputs and not preds:
            raise ValueError("a Streamed capture that keeps outputs reads its predictions too")
        self.model, self.data, self.device, self.groups, self.keep = model, data, device, groups, keep_outputs
        self.with_preds = preds  # False: each pass stops after its group's deepest layer, no predictions
        self._index: int | None = None
        self._held: Captured | None = None
        self._preds: torch.Tensor | None = None
        self.passes = 0  # forward passes over the data so far (one per group loaded)

    @property
    def states(self) -> _GroupStates:
        """``{layer: [n, L, D]}``: reading a layer captures its group (a view made per access, so
        that no reference cycle keeps a dropped capture's states alive until a garbage collection)."""
        return _GroupStates(self)

    def load(self, layer: int) -> Captured:
        """The capture of the group holding ``layer`` (run now unless it is the one held)."""
        index = next((i for i, g in enumerate(self.groups) if layer in g), None)
        if index is None:
            raise KeyError(layer)
        if index != self._index:
            self._held = None  # dropped before the next group is captured
            group = self.groups[index]
            self._held = capture(
                self.model, self.data, self.device, layers=group, keep_outputs=self.keep, preds=self.with_preds
            )
            self._index, self.passes = index, self.passes + 1
            if self._preds is None:
                self._preds = self._held.preds
        assert self._held is not None
        return self._held

    @property
    def preds(self) -> torch.Tensor:
        """Argmax predictions [n, L] (the same in every pass).

        Raises:
            ValueError: a capture made without predictions (``preds=False``).
        """
        if not self.with_preds:
            raise ValueError("this capture was made without predictions (preds=False)")
        if self._preds is None:
            self.load(self.groups[0][0])
        assert self._preds is not None
        return self._preds

    def start(self, layer: int) -> list[dict[int, object]] | None:
        """Per batch, ``{layer: its hook module's output}``: where an edited forward pass starts
        (``predictions(start=(layer, …))``); None without ``keep_outputs``."""
        if not self.keep:
            return None
        return [{layer: batch[layer]} for batch in self.load(layer).outputs or []]

    def held_bytes(self) -> int:
        """Bytes of the held group's states and kept outputs (0 when none is held)."""
        if self._held is None:
            return 0
        kept = [o for batch in self._held.outputs or [] for o in batch.values()]
        outputs = sum(_hidden_bytes(o) for o in kept)
        return sum(t.numel() * t.element_size() for t in self._held.states.values()) + outputs

    def release(self) -> None:
        """Drop the held group."""
        self._held, self._index = None, None
