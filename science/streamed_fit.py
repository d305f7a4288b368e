"""An edit fitted on rows that do not fit the memory bound: the rows spilled to disk, the
statistics accumulated as they pass (docs/SCIENCE.md#memory-bound, docs/DESIGN.md#memory-bound).

:func:`spill_layer` runs the model over the fit set a batch at a time (the batches
``science.captured.capture`` runs: the same rows bit for bit), writes each batch's labelled rows
of one layer to a :class:`science.spill.SpilledRows` file and feeds them, a chunk at a time, to
concept-erasure's ``LeaceFitter`` (float64 running mean, covariance and cross-covariance with the
one-hot labels; its incremental ``update``, Welford's algorithm per chunk). From that one pass:

- ``leace``: the fitter's eraser, as in memory;
- ``pca_top_k``: the eigenvectors of the fitter's covariance (``sigma_xx_ / (N − 1)``);
- ``mean``: the fitter's mean; it is also the centre of every random removal;
- ``project_out`` and ``inlp``, whose L-BFGS probes read rows: a design on the file
  (:func:`science.probes.design.standardise_rows`, two more passes), whose objective reads the
  chunks once an evaluation (:mod:`science.probes.solver`); INLP's held-out rows are read from the
  same file a round.

A method streams when its class has ``fit_streamed(fit: SpilledFit, n_classes, **kw) -> Edit``
(the built-ins do); :func:`science.fit_memory.fit_need` says whether a fit streams under a bound and what it holds.
The numbers equal the in-memory fit's within float rounding, not bit for bit: sums are grouped by
chunk (tests/test_streamed_fit.py states the tolerances).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from models_store.base import LayerwiseModel
from models_store.capture import states_through
from science.bounded import state_bytes
from science.captured import CAPTURE_BATCH
from science.precision import forwards
from science.spill import SpilledRows, chunk_rows
from science.tasks.base import TaskData

__all__ = ["STREAM_SQUARES", "SpilledFit", "feed_layers", "spill_layer", "streamed_fit_bytes"]

# D × D float64 matrices a streamed fit holds at once, at most: LEACE's covariance, whitening and
# eraser factors; INLP's projection, covariance, preconditioner, its Cholesky factor and the
# identity; PCA's covariance and eigenvectors (counted generously, as one number).
STREAM_SQUARES = 12


@dataclass
class SpilledFit:
    """One layer's labelled fit rows on disk and their running statistics.

    Attributes:
        rows: ``N`` float32 rows of ``D`` (:class:`science.spill.SpilledRows`), in the fit set's order.
        y: ``[N]`` int64 labels of the rows.
        stats: concept-erasure's ``LeaceFitter`` fed every row in order (float64: ``mean_x [D]``,
            ``sigma_xx_ [D, D]`` the centred co-moment, ``n``).
    """

    rows: SpilledRows
    y: Tensor
    stats: Any

    @property
    def n(self) -> int:
        return self.rows.n

    @property
    def mean(self) -> Tensor:
        """The rows' mean ``[D]``, float64."""
        return self.stats.mean_x.clone()

    def covariance(self) -> Tensor:
        """The rows' sample covariance ``[D, D]`` (float64, ``/ (N − 1)``, symmetrised)."""
        S = self.stats.sigma_xx_
        return (S + S.T) / 2 / max(self.n - 1, 1)

    def close(self) -> None:
        """Delete the rows' file."""
        self.rows.close()


def _fitter(width: int, n_classes: int) -> Any:
    from concept_erasure import LeaceFitter

    return LeaceFitter(width, n_classes, dtype=torch.float64)


def stream_rows(rows: Tensor, y: Tensor, n_classes: int, fit: SpilledFit | None = None) -> SpilledFit:
    """Append ``rows [m, D]`` with labels ``y [m]`` to ``fit`` (a new one when None): written to its
    file and fed to its statistics a chunk at a time. Returns the fit."""
    if fit is None:
        fit = SpilledFit(
            SpilledRows(int(rows.shape[1])), torch.zeros(0, dtype=torch.long), _fitter(rows.shape[1], n_classes)
        )
    fit.rows.append(rows)
    y = y.reshape(-1).long().cpu()
    step = chunk_rows(fit.rows.width)
    for i in range(0, rows.shape[0], step):
        x = rows[i : i + step].double()
        fit.stats.update(x, torch.nn.functional.one_hot(y[i : i + step], n_classes).double())
    fit.y = torch.cat([fit.y, y])
    return fit


@torch.no_grad()
def feed_layers(
    model: LayerwiseModel,
    data: TaskData,
    device: torch.device | str,
    layers: list[int],
    feed: Callable[[int, Tensor, Tensor], None],
) -> None:
    """Run the model over ``data`` (``[n, L]`` tokens) :data:`CAPTURE_BATCH` sequences a forward
    pass, as ``capture`` runs them, each pass stopping after the deepest of ``layers``, and hand
    each layer's labelled rows (labels ≥ 0; ``[m, D]`` float32 on the CPU, as ``capture`` keeps
    them) with their labels ``[m]`` to ``feed(layer, rows, y)``. Holds one batch's states of
    ``layers`` at a time."""
    model.eval()
    for i in range(0, data.tokens.shape[0], CAPTURE_BATCH):
        tokens = data.tokens[i : i + CAPTURE_BATCH].to(device)
        y = data.labels[i : i + CAPTURE_BATCH].reshape(-1)
        keep = y >= 0  # a file task's null labels are not fitted
        sink = partial(_hand_over, feed, y[keep], keep)  # each layer as its block returns it
        with forwards(tokens.device):  # the forward's precision, as capture() runs it (science.precision)
            states_through(model, tokens, layers, sink=sink)  # the pass stops after the deepest layer


def _hand_over(feed: Callable[[int, Tensor, Tensor], None], y: Tensor, keep: Tensor, layer: int, h: Tensor) -> None:
    """``feed`` a batch's labelled rows of ``layer`` (``h: (B, L, D)``, as its block returns it)."""
    rows = h.float().cpu().reshape(-1, h.shape[-1])  # as capture() keeps them
    feed(layer, rows[keep], y)


def spill_layer(
    model: LayerwiseModel, data: TaskData, device: torch.device | str, layer: int, n_classes: int
) -> SpilledFit:
    """``layer``'s states of ``data`` (:func:`feed_layers`), their labelled rows spilled to disk
    with their statistics. Holds one batch's states at a time. Close the result to delete its file.

    Raises:
        ValueError: ``data`` has no labelled token.
    """
    fits: list[SpilledFit] = []

    def spill(_: int, rows: Tensor, y: Tensor) -> None:
        fit = stream_rows(rows, y, n_classes, fits[0] if fits else None)
        fits[:] = [fit]

    try:
        feed_layers(model, data, device, [layer], spill)
    except BaseException:
        for fit in fits:
            fit.close()
        raise
    if not fits or fits[0].n < 2:
        for fit in fits:
            fit.close()
        raise ValueError(f"fitting an edit needs at least 2 labelled rows, got {fits[0].n if fits else 0}")
    return fits[0]


def streamed_fit_bytes(n_sequences: int, length: int, width: int) -> int:
    """Bytes a streamed fit of ``n_sequences`` × ``length`` rows of ``width`` holds at once: one
    capture batch's layer states and their labelled copy, the chunks read back (the buffer, a
    selected copy, the float64 copies LeaceFitter's update makes, the next chunk's buffer: 9 chunks'
    bytes), the :data:`STREAM_SQUARES` ``[D, D]`` float64 matrices, and per row (34 bytes): the labels,
    INLP's split (a permutation and the held-out and training labels), the selected rows' positions
    and two masks."""
    batch = state_bytes(min(CAPTURE_BATCH, n_sequences), length, width)
    chunk = 4 * min(chunk_rows(width), n_sequences * length) * width
    return 2 * batch + 9 * chunk + STREAM_SQUARES * 8 * width * width + 34 * n_sequences * length
