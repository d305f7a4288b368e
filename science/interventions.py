"""Interventions on one layer's states: fit an edit at L=40, apply it anywhere (docs/SCIENCE.md#interventions).

Every edit is an affine map fitted on training states ``X [N, D]`` with labels ``y [N]``:

    h' = h − ((h − c) Rᵀ) Lᵀ          (``center`` c [D], ``left`` L [D, r], ``right`` R [r, D])

except ``mean``, which returns ``c`` everywhere. ``Edit.apply`` takes ``h [..., D]`` with any
leading dims and returns the same shape, device and dtype.

Methods
-------
``project_out``
    Orthogonal projection (Euclidean, raw feature space) onto the complement of the span of
    the probe's class directions ``W/std`` (:meth:`LinearProbe.class_directions`). The softmax
    is invariant to adding one vector to every row, so only the row *differences* matter: the
    rows are centred (their mean removed) before an SVD, giving rank ≤ C−1 (1 for a binary
    probe). The projection is applied **around the fitted mean** μ: ``h' = h − (h−μ) Q Qᵀ``,
    so the component along the removed span is set to the data mean rather than to 0 — the
    edited states stay near the distribution the next layer saw; a refit probe (which has an
    intercept) is unaffected by this choice. With ``probe=None`` a probe is fitted on X.
``inlp``
    Iterative Nullspace Projection (Ravfogel et al. 2020, "Null It Out", ACL, §3 / Alg. 1):
    fit a probe, add its class directions to the removed span, project, refit, … until the
    refit probe's accuracy on a held-out 20% of the rows is ≤ majority + ``chance_tol`` or
    ``max_rounds`` is reached; the final edit is one orthogonal projection onto the complement
    of the union of all removed directions (their §3.2 intersection of nullspaces), applied
    around the mean as above. The default budget is :func:`inlp_budget` of the classes *present*
    in ``y`` — ⌈D / (present − 1)⌉ rounds, enough to remove the whole space, where the probe's
    noise floor leaves nothing to read (a budget from all C classes stopped code_depth, whose
    windows hold 4–5 of its 11 depths, at rank ≈ 0.4·D) — so INLP reaches its tolerance unless a
    smaller budget is asked for.
    ``info["reached_chance"]`` (stored as ``inlp_converged``), ``info["n_rounds"]`` (projection
    rounds used, stored as ``inlp_rounds``) and the per-round accuracies are kept.
``leace``
    LEACE (Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed form", §3–4),
    concept-erasure's ``LeaceFitter`` with its defaults (affine, shrinkage, trace
    constraint) on ``one_hot(y, C)``, fitted in float64. After it no linear classifier
    beats a constant one on the fitting data.
``pca_top_k``
    Remove the top-k principal directions of the centred states (eigenvectors of the
    covariance), around the mean; default ``k = 8`` (capped at D). Not label-aware: a
    control for how much damage removing *any* k high-variance directions does.
``mean``
    Whole-layer mean ablation: every state replaced by the fitted mean μ (a ceiling; rank D).

``rank_removed`` is the rank of ``I − A`` where ``A`` is the linear part of the edit
(numerical rank, relative tolerance 1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from layerscope_core.registry import METHODS
from science.context import JobContext
from science.probes import LinearProbe, fit_probe

__all__ = [
    "METHODS",
    "DEFAULT_PCA_K",
    "FIT_TOKENS_PER_DIM",
    "Edit",
    "fit_edit",
    "inlp_budget",
    "n_fit_sequences",
    "random_removal",
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
        method: one of :data:`METHODS`.
        rank_removed: dimensions removed (0..D).
        center: ``[D]`` c (the fitted mean, or LEACE's bias).
        left, right: ``[D, r]`` and ``[r, D]``; None for ``mean``.
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
        if self.method == "mean":
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
        if self.method == "mean":
            return torch.zeros_like(eye)
        return eye - self.left.double() @ self.right.double()

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "rank_removed": self.rank_removed, "k": self.k, **self.info}


def random_removal(center: Tensor, rank: int, generator: torch.Generator) -> Edit:
    """The rank-matched random control of an edit (docs/SCIENCE.md#random-removal): ``rank``
    orthonormal directions drawn uniformly (QR of a Gaussian ``[D, rank]`` matrix, Mezzadri 2007,
    "How to generate random matrices from the classical compact groups", §5) removed around
    ``center`` ``[D]`` exactly as the projection edits remove theirs.

    Raises:
        ValueError: ``rank`` outside 1..D.
    """
    D = int(center.shape[-1])
    if not 1 <= rank <= D:
        raise ValueError(f"rank must be in 1..{D}, got {rank}")
    G = torch.randn(D, rank, generator=generator, dtype=torch.float64)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R)).unsqueeze(0)  # Haar-uniform: fix the signs QR leaves free
    return _projection_edit("random", center.double().cpu(), Q.to(center.device))


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


def _probe_span(probe: LinearProbe, exclude: Tensor | None = None) -> Tensor:
    dirs = probe.class_directions().double()[probe.classes_present.to(probe.W.device)]
    dirs = dirs - dirs.mean(0, keepdim=True)  # softmax shift invariance: rank ≤ C−1
    return span_of_directions(dirs, exclude)


def _projection_edit(method: str, mu: Tensor, Q: Tensor, **kw: Any) -> Edit:
    return Edit(method=method, rank_removed=int(Q.shape[1]), center=mu, left=Q, right=Q.T.contiguous(), **kw)


def _rank_of(M: Tensor) -> int:
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

    Args:
        method: one of :data:`METHODS`.
        X: ``[N, D]`` states (one layer, all positions flattened), typically at L=40.
        y: ``[N]`` labels in ``0..n_classes-1``.
        n_classes: C.
        k: ``pca_top_k`` only (default :data:`DEFAULT_PCA_K`, capped at D); ignored by the
            other methods (``Edit.k`` is None for them).
        seed: INLP's held-out row split.
        probe: a probe already fitted on these states (``project_out`` and INLP's first
            round reuse it instead of refitting).
        max_rounds, chance_tol: INLP's stopping rule (see module docstring); ``max_rounds=None``
            → :func:`inlp_budget` (D, C).
        probe_kwargs: passed to :func:`fit_probe` for the probes fitted here.
        ctx: a job context whose ``check_cancelled`` INLP calls before each round (one INLP
            fit is ~80 probe fits, ~40 s at d_model 160 on one CPU core: a cancel lands
            between rounds, not after the whole fit).

    Raises:
        JobCancelled: from ``ctx.check_cancelled`` (INLP only).
        ValueError: unknown method; ``k`` not an int in 1..D for ``pca_top_k``; shapes; fewer
            than 2 rows.
    """
    if method not in METHODS:  # a registered object of a plugin (entry points layerscope.methods), or unknown
        from layerscope_core.plugins import method_names, plugin_methods

        plugin = plugin_methods().get(method)
        if plugin is None:
            raise ValueError(f"unknown intervention method {method!r}; expected one of {method_names()}")
        return plugin.fit(
            X,
            y.reshape(-1).to(X.device).long(),
            n_classes,
            k=k,
            seed=seed,
            probe=probe,
            max_rounds=max_rounds,
            chance_tol=chance_tol,
            probe_kwargs=probe_kwargs,
        )
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
    N, D = X.shape
    pk = dict(probe_kwargs or {})
    mu = X.mean(0, dtype=torch.float64)

    if method == "pca_top_k":
        kk = DEFAULT_PCA_K if k is None else k
        if isinstance(kk, bool) or not isinstance(kk, int) or kk < 1 or kk > D:
            raise ValueError(f"pca_top_k: k must be an int in 1..{D}, got {k!r}")
        Xc = X - mu.to(X.dtype)
        cov = (Xc.T @ Xc).double() / max(N - 1, 1)
        evals, evecs = torch.linalg.eigh(cov)  # ascending
        Q = evecs[:, -kk:].flip(-1).contiguous()
        frac = float(evals[-kk:].sum() / evals.clamp_min(0).sum().clamp_min(1e-300))
        return _projection_edit(method, mu, Q, k=kk, info={"variance_removed": frac})

    if method == "mean":
        return Edit(method="mean", rank_removed=D, center=mu)

    if method == "leace":
        from concept_erasure import LeaceFitter

        Z = torch.nn.functional.one_hot(y, n_classes).double()
        eraser = LeaceFitter.fit(X.double(), Z).eraser
        left, right = eraser.proj_left.contiguous(), eraser.proj_right.contiguous()
        center = eraser.bias if eraser.bias is not None else torch.zeros(D, dtype=torch.float64, device=X.device)
        return Edit(method="leace", rank_removed=_rank_of(left @ right), center=center, left=left, right=right)

    if method == "project_out":
        if probe is None:
            probe = fit_probe(X, y, n_classes, **pk)
        Q = _probe_span(probe)
        return _projection_edit(method, mu, Q, info={"probe_converged": probe.converged, "probe_n_iter": probe.n_iter})

    # inlp
    if max_rounds is None:  # from the classes present: each round removes rank ≤ (present − 1)
        max_rounds = inlp_budget(D, int(torch.unique(y).numel()))
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(N, generator=g).to(X.device)
    n_dev = max(1, N // 5)
    dev_idx, tr_idx = perm[:n_dev], perm[n_dev:]
    ytr, ydev = y[tr_idx], y[dev_idx]
    majority = int(torch.bincount(ytr, minlength=n_classes).argmax())
    maj_dev = float((ydev == majority).double().mean())
    Q = torch.zeros(D, 0, dtype=torch.float64, device=X.device)
    rounds: list[dict[str, Any]] = []
    reached = False
    mu_x = mu.to(X.dtype)
    for r in range(max_rounds + 1):
        if ctx is not None:
            ctx.check_cancelled()
        Xe = X if Q.shape[1] == 0 else X - ((X - mu_x) @ Q.to(X.dtype)) @ Q.T.to(X.dtype)
        if r == 0 and probe is not None:
            p = probe
        else:
            p = fit_probe(Xe[tr_idx], ytr, n_classes, **pk)
        acc = p.accuracy(Xe[dev_idx], ydev)
        rounds.append({"rank": int(Q.shape[1]), "dev_accuracy": acc, "converged": p.converged})
        if acc <= maj_dev + chance_tol:
            reached = True
            break
        if r == max_rounds:
            break
        new = _probe_span(p, exclude=Q)
        if new.shape[1] == 0:
            break
        Q = torch.cat([Q, new], dim=1)
        # re-orthonormalise (guards against drift over many rounds)
        Q = torch.linalg.qr(Q).Q
    return _projection_edit(
        "inlp",
        mu,
        Q,
        info={
            "rounds": rounds,
            "reached_chance": reached,
            "n_rounds": len(rounds) - 1,  # projections made
            "max_rounds": max_rounds,
            "dev_majority": maj_dev,
        },
    )
