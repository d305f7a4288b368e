"""A probe's standardised design, computed once and shared (docs/SCIENCE.md#probes).

The probe reads ``x̃ = (x − mean) / std``. Standardising is folded into the weights rather than
materialised: the objective (:mod:`science.probes.solver`) reads the rows centred once, stored
transposed (``[D, N]``, contiguous), and applies ``1/std`` (and, for INLP, a projection ``P``)
to the ``[K, D]`` weights. The transposed layout makes both products of an evaluation,
``V·Xᵀ`` (logits) and ``R·X`` (gradient), read contiguous rows: ``R·X`` on the ``[N, D]`` layout
read the states at 2–4 GB/s of this CPU's 22 (BENCHMARKS.md, "Lab scale").

One :class:`Design` serves a probe and its control-task twin (same rows, other labels), and
INLP's rounds (:func:`projected`: the same rows seen through ``P = I − QQᵀ``, with the mean and
covariance of the edited rows derived from the unedited ones, not recomputed from the rows).

Rows that do not fit memory (docs/DESIGN.md#memory-bound) stay on disk: :func:`standardise_rows`
makes a design whose ``rows`` are a :class:`science.spill.RowSource` read a chunk at a time (two
passes: the mean, then the covariance of the centred chunks) and whose ``Xt`` is empty; the
objective then reads the chunks, one pass an evaluation (:mod:`science.probes.solver`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from science.spill import RowSource

NOISE_RTOL = 1e-5
_BLOCK = 256  # rows transposed at a time: 2.3× faster than one strided pass at 16,000 × 160 (CPU)


@dataclass(frozen=True)
class Design:
    """Features ready for the probe's objective.

    Attributes:
        Xt: ``[D, N]`` the rows minus ``centre``, transposed and contiguous, in the input's float
            dtype (float32 by default).
        centre: ``[D]`` float64, what the rows were centred at (their mean).
        mean: ``[D]`` float64, the mean of the features the probe reads (``centre`` unless projected).
        cov: ``[D, D]`` float64 population covariance (ddof 0) of those features.
        std: ``[D]`` float64 standard deviation; ``inf`` where a feature varies by rounding only.
        P: ``[D, D]`` float64 projection the features are seen through (INLP), None = identity.
        rows: the rows on disk, uncentred (:func:`standardise_rows`; ``Xt`` is then ``[D, 0]``),
            None = the rows are ``Xt``.
    """

    Xt: Tensor
    centre: Tensor
    mean: Tensor
    cov: Tensor
    std: Tensor
    P: Tensor | None = None
    rows: RowSource | None = None

    @property
    def n(self) -> int:
        """N, the number of rows."""
        return int(self.Xt.shape[1]) if self.rows is None else self.rows.n

    def centred(self, X: Tensor) -> Tensor:
        """Other rows ``X [M, D]`` minus this design's ``centre``, in ``Xt``'s dtype (held-out rows)."""
        return X.to(self.Xt.dtype) - self.centre.to(self.Xt.dtype)

    def raw_weights(self, W: Tensor) -> Tensor:
        """``W [K, D]`` on standardised features → ``V [K, D]`` on the centred rows:
        ``x̃ Wᵀ = (x − centre) Vᵀ`` with ``V = (W / std) P``."""
        V = W / self.std
        return V if self.P is None else V @ self.P


def noise_floor_std(mean: Tensor, cov: Tensor) -> Tensor:
    """``[D]`` float64 std from the covariance's diagonal, ``inf`` where it is at most
    :data:`NOISE_RTOL` × ``max(rms of the feature, median rms of the layer's features)``
    (:mod:`science.probes.linear`)."""
    var = cov.diagonal().clamp_min(0.0)
    std = var.sqrt()
    rms = (var + mean * mean).sqrt()  # [D] raw root-mean-square of each feature
    scale = torch.maximum(rms, rms.median())
    return torch.where(std > NOISE_RTOL * scale, std, torch.full_like(std, math.inf))


def _nonfinite(bad: Tensor, what: str) -> ValueError:
    idx = bad.nonzero().flatten()
    return ValueError(
        f"{what} hold NaN or inf in {idx.numel()} of {bad.numel()} features (first: {idx[:5].tolist()}): "
        "a fit on them would read as chance; check the model's forward pass (a diverged run?) or the input"
    )


def require_finite(mean64: Tensor, what: str = "the states") -> None:
    """Raise where a feature's float64 mean ``mean64 [D]`` is NaN or ±inf: its rows hold a NaN or an
    inf (a float32 row's finite values cannot overflow a float64 mean), which a fit would not
    refuse — it would converge to the majority class and read as "not decodable".

    Raises:
        ValueError: naming how many features, the first few, and ``what``.
    """
    bad = ~torch.isfinite(mean64)
    if bool(bad.any()):
        raise _nonfinite(bad, what)


def check_finite(X: Tensor, what: str = "the states") -> None:
    """The same test on ``X [..., D]`` itself: one read, a block of rows at a time (no copy of X).

    Raises:
        ValueError: as :func:`require_finite`.
    """
    D = int(X.shape[-1])
    bad = torch.zeros(D, dtype=torch.bool, device=X.device)
    per_row = max(1, X[0].numel() // D) if X.shape[0] else 1  # rows of D in one step along dim 0
    step = max(1, _BLOCK // per_row)
    for i in range(0, int(X.shape[0]), step):
        bad |= ~torch.isfinite(X[i : i + step]).reshape(-1, D).all(0)
    if bool(bad.any()):
        raise _nonfinite(bad, what)


COVARIANCE_COPIES = 3  # D × D float64 matrices a fit holds at once: the covariance, its whitening factor, a product
ALWAYS_FITS = 2**28  # bytes of them not worth reading /proc/meminfo for (D ≤ 3,344): every fit's check stays free


def _available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (None where there is none: not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_width(D: int, what: str = "the states") -> None:
    """Refuse a width whose ``D × D`` float64 matrices (:data:`COVARIANCE_COPIES` of them) would not fit
    this machine's available memory, before any is allocated: a notebook's accidental 65,536-wide
    states would otherwise swap the machine or die in the allocator.

    Raises:
        ValueError: naming the width, the GiB needed and available.
    """
    need = COVARIANCE_COPIES * 8 * D * D
    if need <= ALWAYS_FITS:
        return
    available = _available_bytes()
    if available is not None and need > available:
        raise ValueError(
            f"{what} are {D} wide: a probe or edit fit holds {COVARIANCE_COPIES} {D} × {D} float64 matrices "
            f"({need / 2**30:.1f} GiB), over the {available / 2**30:.1f} GiB available here; reduce the width "
            "(a slice of the features, or a PCA) or use a machine with more memory"
        )


def standardise(X: Tensor) -> Design:
    """The design of ``X [N, D]`` (float32/64): one pass for the mean, one transposed centred copy,
    one ``[D, N]·[N, D]`` product for the covariance.

    Raises:
        ValueError: a feature holds NaN or inf (:func:`require_finite`).
    """
    N, D = X.shape
    check_width(D)
    mean64 = X.mean(0, dtype=torch.float64)
    require_finite(mean64)
    Xt = torch.empty(D, N, dtype=X.dtype, device=X.device)
    m = mean64.to(X.dtype).unsqueeze(1)
    for i in range(0, N, _BLOCK):  # centred and transposed in one pass, a cache-sized block at a time
        torch.sub(X[i : i + _BLOCK].T, m, out=Xt[:, i : i + _BLOCK])
    cov = (Xt @ Xt.T).double() / N
    return Design(Xt=Xt, centre=mean64, mean=mean64, cov=cov, std=noise_floor_std(mean64, cov))


def projected(base: Design, P: Tensor, mean: Tensor, cov: Tensor) -> Design:
    """``base``'s rows seen through the projection ``P [D, D]``: the features
    ``x − (x − μ) Q Qᵀ`` of INLP (``P = I − QQᵀ``), whose ``mean`` ``[D]`` and ``cov`` ``[D, D]``
    (``P C P``) the caller keeps up to date; no row is read."""
    return Design(
        Xt=base.Xt, centre=base.centre, mean=mean, cov=cov, std=noise_floor_std(mean, cov), P=P, rows=base.rows
    )


def standardise_rows(rows: RowSource) -> Design:
    """The design of rows on disk (``rows``: ``n`` float32 rows of ``width``, read a chunk at a
    time): the mean (float64 sums of the chunks), then the population covariance from the
    centred chunks (each chunk's float32 product added in float64). The same statistics as
    :func:`standardise` within float rounding (the sums are grouped by chunk);
    tests/test_streamed_fit.py holds them to it.

    Raises:
        ValueError: no rows; a feature holds NaN or inf (:func:`require_finite`).
    """
    N, D = rows.n, rows.width
    if N == 0:
        raise ValueError("cannot standardise 0 rows")
    check_width(D)
    total = torch.zeros(D, dtype=torch.float64)
    for chunk in rows.chunks():
        total += chunk.sum(0, dtype=torch.float64)
    mean64 = total / N
    require_finite(mean64)
    m = mean64.to(torch.float32)
    cov = torch.zeros(D, D, dtype=torch.float64)
    for chunk in rows.chunks():
        chunk.sub_(m)
        cov += (chunk.T @ chunk).double()
    cov /= N
    empty = torch.empty(D, 0, dtype=torch.float32)
    return Design(Xt=empty, centre=mean64, mean=mean64, cov=cov, std=noise_floor_std(mean64, cov), rows=rows)
