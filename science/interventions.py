"""Interventions on one layer's states: fit an edit at L=40, apply it anywhere (docs/SCIENCE.md#interventions).

Every edit is an affine map fitted on training states ``X [N, D]`` with labels ``y [N]``:

    h' = h − ((h − c) Rᵀ) Lᵀ          (``center`` c [D], ``left`` L [D, r], ``right`` R [r, D])

except ``mean``, which returns ``c`` everywhere. ``Edit.apply`` takes ``h [..., D]`` with any
leading dims and returns the same shape, device and dtype.

Methods
-------
Each method is a registered object (``layerscope_core.registry.get_method``), the built-ins in
:mod:`science.edit_methods`, whose classes define them: ``project_out`` (the span of the probe's
centred class directions, around the mean), ``inlp`` (Ravfogel et al. 2020), ``leace``
(Belrose et al. 2023, concept-erasure), ``pca_top_k`` (a label-blind control) and ``mean``
(whole-layer mean ablation). :func:`fit_edit` checks the inputs and dispatches by lookup; a
plugin's method (entry point group ``layerscope.methods``) is fitted through the same call.
:func:`projection_edit`, :func:`probe_span` and :func:`rank_of` are the pieces they share.

``rank_removed`` is the rank of ``I − A`` where ``A`` is the linear part of the edit
(numerical rank, relative tolerance 1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from layerscope_core.registry import METHODS, get_method
from science.context import JobContext
from science.probes import LinearProbe

__all__ = [
    "METHODS",
    "DEFAULT_PCA_K",
    "FIT_TOKENS_PER_DIM",
    "Edit",
    "fit_edit",
    "inlp_budget",
    "n_fit_sequences",
    "probe_span",
    "projection_edit",
    "random_removal",
    "rank_of",
    "span_of_directions",
]

DEFAULT_PCA_K = 8
FIT_TOKENS_PER_DIM = 64  # an edit is fitted on at least 64 · d_model tokens (n_fit_sequences)
INLP_CHANCE_TOL = 0.01  # fraction (1 pp) above the held-out majority baseline
RANK_RTOL = 1e-6


@dataclass
class Edit:
    """A fitted edit. ``apply(h [..., D]) -> [..., D]``; see the module docstring.

    Attributes:
        method: the registered method's name (:data:`METHODS`, a plugin's, or ``random``).
        rank_removed: dimensions removed (0..D).
        center: ``[D]`` c (the fitted mean, or LEACE's bias).
        left, right: ``[D, r]`` and ``[r, D]``; None (both) for a constant edit such as
            ``mean``, which returns ``center`` everywhere.
        k: ``pca_top_k``'s k, else None.
        info: method details (INLP rounds and accuracies, probe convergence, ...).
    """

    method: str
    rank_removed: int
    center: Tensor
    left: Tensor | None = None
    right: Tensor | None = None
    k: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def d_model(self) -> int:
        return int(self.center.shape[-1])

    def apply(self, h: Tensor) -> Tensor:
        """Edit ``h [..., D]`` → ``[..., D]`` on h's device, in h's dtype."""
        if h.shape[-1] != self.d_model:
            raise ValueError(f"edit fitted for D={self.d_model}, got states with D={h.shape[-1]}")
        work = h.dtype if h.dtype in (torch.float32, torch.float64) else torch.float32
        c = self.center.to(h.device, work)
        if self.left is None:  # a constant edit (mean ablation)
            return c.expand(h.shape).to(h.dtype).clone()
        x = h.to(work)
        L = self.left.to(h.device, work)
        R = self.right.to(h.device, work)
        return (x - ((x - c) @ R.T) @ L.T).to(h.dtype)

    __call__ = apply

    def matrix(self) -> Tensor:
        """The linear part ``A [D, D]`` (``h' = A h + const``, acting on column vectors)."""
        D = self.d_model
        eye = torch.eye(D, dtype=torch.float64, device=self.center.device)
        if self.left is None:
            return torch.zeros_like(eye)
        return eye - self.left.double() @ self.right.double()

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "rank_removed": self.rank_removed, "k": self.k, **self.info}


def random_removal(center: Tensor, rank: int, generator: torch.Generator) -> Edit:
    """The rank-matched random control of an edit (docs/SCIENCE.md#random-removal): ``rank``
    orthonormal directions drawn uniformly (QR of a Gaussian ``[D, rank]`` matrix, Mezzadri 2007,
    "How to generate random matrices from the classical compact groups", §5) removed around
    ``center`` ``[D]`` exactly as the projection edits remove theirs. At ``rank`` = D every draw
    removes the whole space, which is mean ablation: the constant edit ``center`` is returned
    (as ``mean`` returns it; a full-rank projection would differ from it by float rounding).

    Raises:
        ValueError: ``rank`` outside 1..D.
    """
    D = int(center.shape[-1])
    if not 1 <= rank <= D:
        raise ValueError(f"rank must be in 1..{D}, got {rank}")
    if rank == D:
        return Edit(method="random", rank_removed=D, center=center.double())
    G = torch.randn(D, rank, generator=generator, dtype=torch.float64)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R)).unsqueeze(0)  # Haar-uniform: fix the signs QR leaves free
    return projection_edit("random", center.double().cpu(), Q.to(center.device))


def inlp_budget(d_model: int, n_classes: int) -> int:
    """INLP's default round budget: ⌈d_model / max(C − 1, 1)⌉, the rounds needed to remove the
    whole space when each round removes rank C − 1."""
    if d_model < 1 or n_classes < 1:
        raise ValueError(f"d_model and n_classes must be ≥ 1, got {d_model}, {n_classes}")
    return -(-d_model // max(n_classes - 1, 1))


def n_fit_sequences(d_model: int, length: int, n_sequences: int) -> int:
    """Sequences to fit an edit on: at least ``n_sequences`` and enough that the fitting set has
    ``FIT_TOKENS_PER_DIM · d_model`` tokens, i.e. ``max(n_sequences, ⌈64 · d_model / length⌉)``.

    Why: LEACE and the probes behind project_out/INLP estimate a d_model × d_model covariance;
    with 64 sequences × 40 tokens at d_model = 160 (16 tokens per dimension) LEACE's refit probe
    still read the variable at 0.64 against a majority of 0.44, with 256 sequences (64 per
    dimension) it read 0.44.
    """
    if d_model < 1 or length < 1 or n_sequences < 1:
        raise ValueError(f"d_model, length and n_sequences must be ≥ 1, got {d_model}, {length}, {n_sequences}")
    return max(n_sequences, -(-FIT_TOKENS_PER_DIM * d_model // length))


def span_of_directions(dirs: Tensor, exclude: Tensor | None = None, rtol: float = RANK_RTOL) -> Tensor:
    """Orthonormal basis ``[D, r]`` of the span of the rows of ``dirs [m, D]``.

    Components inside ``exclude [D, q]`` (orthonormal columns) are removed first, so the result
    is orthogonal to it. Singular values below ``rtol · s_max`` count as zero.
    """
    A = dirs.double()
    if exclude is not None and exclude.numel():
        E = exclude.double()
        A = A - (A @ E) @ E.T
    if A.numel() == 0:
        return torch.zeros(dirs.shape[-1], 0, dtype=torch.float64, device=dirs.device)
    _, s, Vh = torch.linalg.svd(A, full_matrices=False)
    ref = float(dirs.double().norm(dim=-1).max()) if dirs.numel() else 0.0
    keep = s > rtol * max(ref, 1e-300)
    return Vh[keep].T.contiguous()


def probe_span(probe: LinearProbe, exclude: Tensor | None = None) -> Tensor:
    """Orthonormal basis ``[D, r]`` (float64) of the span of ``probe``'s centred class directions
    (the classes present; r ≤ C−1), orthogonal to ``exclude [D, q]`` (see :func:`span_of_directions`)."""
    dirs = probe.class_directions().double()[probe.classes_present.to(probe.W.device)]
    dirs = dirs - dirs.mean(0, keepdim=True)  # softmax shift invariance: rank ≤ C−1
    return span_of_directions(dirs, exclude)


def projection_edit(method: str, mu: Tensor, Q: Tensor, **kw: Any) -> Edit:
    """The edit removing the span of ``Q [D, r]`` (orthonormal columns) around ``mu [D]``:
    ``h' = h − (h − μ) Q Qᵀ``; ``kw`` are further :class:`Edit` fields (``k``, ``info``)."""
    return Edit(method=method, rank_removed=int(Q.shape[1]), center=mu, left=Q, right=Q.T.contiguous(), **kw)


def rank_of(M: Tensor) -> int:
    """Numerical rank of ``M`` (singular values above ``RANK_RTOL`` · the largest)."""
    if M.numel() == 0:
        return 0
    s = torch.linalg.svdvals(M.double())
    return int((s > RANK_RTOL * max(float(s.max()), 1e-300)).sum()) if s.numel() else 0


def fit_edit(
    method: str,
    X: Tensor,
    y: Tensor,
    n_classes: int,
    k: int | None = None,
    seed: int = 0,
    probe: LinearProbe | None = None,
    *,
    max_rounds: int | None = None,
    chance_tol: float = INLP_CHANCE_TOL,
    probe_kwargs: dict[str, Any] | None = None,
    ctx: JobContext | None = None,
) -> Edit:
    """Fit an edit of ``method`` on states ``X [N, D]`` with labels ``y [N]``.

    Every keyword below is passed to the method's ``fit`` (:mod:`science.edit_methods`); each
    method reads the ones it needs.

    Args:
        method: a registered method (``layerscope_core.registry.method_names()``: the built-in
            :data:`METHODS`, then plugins').
        X: ``[N, D]`` states (one layer, all positions flattened), typically at L=40.
        y: ``[N]`` labels in ``0..n_classes-1``.
        n_classes: C.
        k: ``pca_top_k`` only (default :data:`DEFAULT_PCA_K`, capped at D); ignored by the
            other methods (``Edit.k`` is None for them).
        seed: INLP's held-out row split.
        probe: a probe already fitted on these states (``project_out`` and INLP's first
            round reuse it instead of refitting).
        max_rounds, chance_tol: INLP's stopping rule (:class:`science.edit_methods.Inlp`);
            ``max_rounds=None`` → :func:`inlp_budget` (D, classes present).
        probe_kwargs: passed to :func:`science.probes.fit_probe` for the probes fitted here.
        ctx: a job context whose ``check_cancelled`` INLP calls before each round (one INLP
            fit is ~80 probe fits, ~40 s at d_model 160 on one CPU core: a cancel lands
            between rounds, not after the whole fit).

    Raises:
        JobCancelled: from ``ctx.check_cancelled`` (INLP only).
        ValueError: unknown method; ``k`` not an int in 1..D for ``pca_top_k``; shapes; fewer
            than 2 rows.
    """
    fit = get_method(method).fit  # a built-in (science.edit_methods), a plugin's, or a ValueError
    if X.ndim != 2:
        raise ValueError(f"X must be [N, D], got shape {tuple(X.shape)}")
    min_rows = 2  # a covariance (LEACE, PCA) and INLP's train/held-out split both need two rows
    if X.shape[0] < min_rows:
        raise ValueError(f"{method}: fitting an edit needs at least {min_rows} rows of X (states), got {X.shape[0]}")
    if not X.is_floating_point():
        X = X.float()
    y = y.reshape(-1).to(X.device).long()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
    return fit(
        X,
        y,
        n_classes,
        k=k,
        seed=seed,
        probe=probe,
        max_rounds=max_rounds,
        chance_tol=chance_tol,
        probe_kwargs=probe_kwargs,
        ctx=ctx,
    )
