"""Interventions on one layer's states: fit an edit at L=40, apply it anywhere (docs/SCIENCE.md#interventions).

Every edit is an affine map fitted on training states ``X [N, D]`` with labels ``y [N]``
(:class:`science.edits.Edit`, re-exported here):

    h' = h − ((h − c) Rᵀ) Lᵀ          (``center`` c [D], ``left`` L [D, r], ``right`` R [r, D])

except ``mean``, which returns ``c`` everywhere. ``Edit.apply`` takes ``h [..., D]`` with any
leading dims and returns the same shape, device and dtype.

Methods
-------
Each method is an object looked up by name (:func:`science.methods.get_method`): the built-ins
are the classes of :mod:`science.edit_methods`, which define them — ``project_out`` (the span of
the probe's centred class directions, around the mean), ``inlp`` (Ravfogel et al. 2020),
``leace`` (Belrose et al. 2023, concept-erasure), ``pca_top_k`` (a label-blind control) and
``mean`` (whole-layer mean ablation). :func:`fit_edit` checks the inputs and dispatches by that
lookup; a plugin's method (entry point group ``layerscope.methods``) or a
``register_method``'d one is fitted through the same call. :func:`projection_edit`,
:func:`probe_span` and :func:`rank_of` (:mod:`science.edits`) are the pieces they share.

``rank_removed`` is the rank of ``I − A`` where ``A`` is the linear part of the edit
(numerical rank, relative tolerance 1e-6).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from layerscope_core.registry import METHODS
from science.context import Context
from science.edit_methods import DEFAULT_PCA_K, INLP_CHANCE_TOL, inlp_budget
from science.edits import RANK_RTOL, Edit, probe_span, projection_edit, rank_of, span_of_directions
from science.methods import get_method
from science.probes import LinearProbe
from science.probes.design import check_finite, check_width

__all__ = [
    "METHODS",
    "DEFAULT_PCA_K",
    "FIT_TOKENS_PER_DIM",
    "INLP_CHANCE_TOL",
    "RANK_RTOL",
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

FIT_TOKENS_PER_DIM = 64  # an edit is fitted on at least 64 · d_model tokens (n_fit_sequences)


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


def fit_edit(
    method: str,
    X: Tensor,
    y: Tensor,
    n_classes: int,
    *,
    seed: int = 0,
    probe: LinearProbe | None = None,
    probe_kwargs: dict[str, Any] | None = None,
    ctx: Context | None = None,
    **params: Any,
) -> Edit:
    """Fit an edit of ``method`` on states ``X [N, D]`` with labels ``y [N]``.

    The method's ``fit`` (:mod:`science.edit_methods` for the built-ins) receives ``seed``,
    ``probe``, ``probe_kwargs`` and ``ctx`` (each method reads the ones it needs), then
    ``params`` as given: the keywords of its fit (its declared ``params``, e.g. ``pca_top_k``'s
    ``k``, ``inlp``'s ``max_rounds``, or ``chance_tol``); one it does not take is ignored. Missing
    ones take the fit's defaults. The measurement resolves and checks them against the method's
    declaration first (:func:`science.methods.method_settings`); here they pass unchecked.

    Args:
        method: a registered method (``layerscope_core.registry.method_names()``: the built-in
            :data:`METHODS`, then plugins' and ``register_method``'s).
        X: ``[N, D]`` states (one layer, all positions flattened), typically at L=40.
        y: ``[N]`` labels in ``0..n_classes-1``.
        n_classes: C.
        seed: INLP's held-out row split (and any method's own randomness).
        probe: a probe already fitted on these states (``project_out`` and INLP's first
            round reuse it instead of refitting).
        probe_kwargs: passed to :func:`science.probes.fit_probe` for the probes fitted here.
        ctx: a job context whose ``check_cancelled`` INLP calls before each round (one INLP
            fit is ~80 probe fits, ~40 s at d_model 160 on one CPU core: a cancel lands
            between rounds, not after the whole fit).
        params: the method's parameters by keyword (``k`` for ``pca_top_k``: default
            :data:`DEFAULT_PCA_K`; ``max_rounds`` / ``chance_tol`` for INLP:
            :class:`science.edit_methods.Inlp`).

    Raises:
        JobCancelled: from ``ctx.check_cancelled`` (INLP only).
        ValueError: unknown method; a value the method refuses (``k`` not an int in 1..D for
            ``pca_top_k``, INLP's ``max_rounds`` < 0); shapes; fewer than 2 rows; labels outside
            ``0..n_classes-1``; NaN or inf in ``X`` (:func:`science.probes.design.check_finite`).
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
    if int(y.min()) < 0 or int(y.max()) >= n_classes:  # every method: LEACE's one-hot would fail raw
        raise ValueError(f"labels must lie in 0..{n_classes - 1}, got {int(y.min())}..{int(y.max())}")
    check_width(int(X.shape[1]), f"{method}: the states X")
    check_finite(X, f"{method}: the states X")
    return fit(X, y, n_classes, seed=seed, probe=probe, probe_kwargs=probe_kwargs, ctx=ctx, **params)
