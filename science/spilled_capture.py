"""Every layer's states of a data set from one forward pass, each layer spilled to its own file as
the pass computes it, read back a layer (or a group of layers) at a time
(docs/SCIENCE.md#memory-bound, docs/DESIGN.md#memory-bound).

What a memory-bounded probe measurement uses when the layers do not fit the bound together:
instead of one forward pass per group of layers (the blocks up to a group's deepest layer run
again for every group), one pass writes every layer's states to disk as its block returns them
(``models_store.capture.states_through`` with a sink: one batch's layer in memory at a time), and
each group is read back from the files. The states are those of :func:`science.captured.capture`
bit for bit: the same batches of :data:`~science.captured.CAPTURE_BATCH` sequences through the
same modules, kept as float32.
"""

from __future__ import annotations

import torch

from models_store.base import LayerwiseModel
from models_store.capture import states_through
from science.captured import CAPTURE_BATCH, Captured
from science.precision import forwards
from science.spill import SpilledRows
from science.tasks.base import TaskData

__all__ = ["SpilledCapture"]


class SpilledCapture:
    """``layers``' states of ``data`` (tokens ``[n, L]``) from one forward pass per batch that
    stops after the deepest layer, each layer's ``[n·L, D]`` rows in a temporary file
    (:class:`science.spill.SpilledRows`). Close it (or use it as a context manager) to delete
    the files.

    Raises:
        ValueError: no layer, or a layer id outside -1..n_layers-1.
    """

    @torch.no_grad()
    def __init__(self, model: LayerwiseModel, data: TaskData, device: torch.device | str, layers: list[int]) -> None:
        self.data, self.layers = data, list(layers)
        self._files: dict[int, SpilledRows] = {}
        self.shape = tuple(data.tokens.shape)  # (n, L): the files hold n·L rows each
        model.eval()

        def sink(layer: int, h: torch.Tensor) -> None:  # h: (B, L, D)
            if layer not in self._files:
                self._files[layer] = SpilledRows(h.shape[-1])
            self._files[layer].append(h.reshape(-1, h.shape[-1]))

        try:
            for i in range(0, data.tokens.shape[0], CAPTURE_BATCH):
                tokens = data.tokens[i : i + CAPTURE_BATCH].to(device)
                with forwards(tokens.device):  # the forward's precision, as capture() runs it
                    states_through(model, tokens, self.layers, sink=sink)
        except BaseException:
            self.close()
            raise

    def states(self, layer: int) -> torch.Tensor:
        """``layer``'s states ``[n, L, D]`` float32, read from its file (a new tensor each call).

        Raises:
            KeyError: a layer this capture did not spill.
        """
        rows = self._files[layer].read_all()  # (n·L, D)
        return rows.view(*self.shape, rows.shape[-1])

    def group(self, layers: list[int]) -> Captured:
        """``layers``' states read back as a :class:`~science.captured.Captured` without predictions."""
        return Captured(self.data, None, {layer: self.states(layer) for layer in layers})

    def close(self) -> None:
        """Delete every layer's file."""
        for rows in self._files.values():
            rows.close()
        self._files.clear()

    def __enter__(self) -> SpilledCapture:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
