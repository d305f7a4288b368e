"""Linear probes: multinomial logistic regression on standardised features (docs/SCIENCE.md#probes).

The model and objective are scikit-learn's ``LogisticRegression(C=1.0)`` on
``StandardScaler``-ed features, so accuracies agree with the reference to a fraction of a pp:

    minimise  (1/N) Σ_i CE(W x̃_i + b, y_i)  +  (λ/2) ‖W‖²_F ,   λ = 1 / (C · N)

where ``x̃ = (x − mean) / std`` (population std, ddof 0), ``W [C, D]``, ``b [C]`` unpenalised.

**Noise floor.** A feature whose standard deviation is at most ``NOISE_RTOL`` (1e-5, about 100×
float32's machine epsilon) times its scale — ``max(rms of the feature, median rms of the
layer's features)`` — varies by rounding only and carries no signal: its standardised value is 0
(``std = inf``), so the probe cannot read it. ``StandardScaler`` instead divides such a feature
by its tiny std and blows rounding noise up to unit variance: after a full-rank removal
(``pca_top_k`` with k = D) the states are constant to float32 noise, and a refit probe read the
"variable" from that noise well above the majority rate. Exactly constant features behave as
in ``StandardScaler`` (they are 0 after centring). This is exactly sklearn's
``C Σ_i CE_i + ½‖W‖²`` divided by ``C·N`` (the scaled form sklearn 1.9 itself minimises:
``l2_reg_strength = 1/(C·sw_sum)`` in ``sklearn/linear_model/_logistic.py``).
With two classes sklearn fits one binomial vector ``w``; the two-row multinomial optimum has
``W₁ = −W₀ = w/2`` and penalty ``‖w‖²/4``, so for a two-class problem we use ``λ = 2/(C·N)``
and the minimisers coincide (``W₁ − W₀ = w``).

Solver: full-batch L-BFGS (``torch.optim.LBFGS``, strong-Wolfe line search; Nocedal & Wright 2006,
*Numerical Optimization*, Alg. 7.4–7.5 and 3.5–3.6) in **whitened coordinates**: a change of variables
``W = W_z · Λ_e^{-1/2} Vᵀ`` with ``V Λ Vᵀ`` the covariance of the standardised features and
``Λ_e = max(Λ, λ, 1e-10·Λ_max)`` (a floor at the penalty strength keeps the map invertible). This is
preconditioning only: the objective, its unique minimiser and the convergence test are those
of the standardised problem above. Correlated residual-stream features make the standardised
problem ill-conditioned (sklearn's lbfgs hits ``max_iter`` on such states); in whitened
coordinates the curvature is within a small factor of the identity and L-BFGS needs tens of
iterations. The large matrix products run in the features' dtype (float32 by default); the
loss, the softmax and the optimiser's state are float64.

Convergence: ``converged`` is ``max |∇| ≤ tol`` over all parameters (W and b) of the
standardised objective, the same criterion as sklearn's lbfgs ``gtol`` (default ``tol=1e-4``),
checked on a final evaluation at the returned parameters. A probe that stops at ``max_iter``
reports ``converged=False`` with its ``n_iter`` and ``grad_max``; nothing is silent.

Device-agnostic: everything runs where the input tensors are (CPU or CUDA).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "NOISE_RTOL",
    "LinearProbe",
    "ProbeReport",
    "fit_probe",
    "probe_layers",
    "split_sequences",
    "sequence_strata",
    "control_labels",
    "sklearn_probe",
]

NOISE_RTOL = 1e-5
DEFAULT_C = 1.0
DEFAULT_TOL = 1e-4
DEFAULT_MAX_ITER = 500
HISTORY_SIZE = 10


@dataclass
class LinearProbe:
    """A fitted multinomial logistic-regression probe.

    Attributes:
        W: ``[C, D]`` weights on standardised features (rows of absent classes are 0).
        b: ``[C]`` intercepts (``-inf`` for classes absent from the training labels).
        mean, std: ``[D]`` standardisation fitted on the training features.
        n_classes: C.
        classes_present: ``[C]`` bool, classes seen in the training labels.
        converged: ``max|∇| ≤ tol`` reached (see module docstring).
        n_iter: L-BFGS iterations used; ``n_evals`` function evaluations.
        grad_max: final ``max|∇|`` of the standardised objective.
        C, tol, max_iter: the settings used.
    """

    W: Tensor
    b: Tensor
    mean: Tensor
    std: Tensor
    n_classes: int
    classes_present: Tensor
    converged: bool
    n_iter: int
    n_evals: int = 0
    grad_max: float = 0.0
    C: float = DEFAULT_C
    tol: float = DEFAULT_TOL
    max_iter: int = DEFAULT_MAX_ITER

    def logits(self, X: Tensor) -> Tensor:
        """``X [..., D]`` (raw features) → logits ``[..., C]`` (float32 or X's float dtype)."""
        dt = X.dtype if X.is_floating_point() else torch.float32
        Xs = (X.to(dt) - self.mean.to(X.device, dt)) / self.std.to(X.device, dt)
        return Xs @ self.W.to(X.device, dt).T + self.b.to(X.device, dt)

    def predict(self, X: Tensor) -> Tensor:
        """``X [..., D]`` → predicted class ``[...]`` (long)."""
        return self.logits(X).argmax(-1)

    def accuracy(self, X: Tensor, y: Tensor) -> float:
        """Fraction (0..1) of ``y [...]`` predicted correctly from ``X [..., D]``."""
        y = y.to(X.device)
        return float((self.predict(X) == y).double().mean())

    def class_directions(self) -> Tensor:
        """The weight rows mapped back to raw (unstandardised) feature space, ``[C, D]``.

        ``logits = W (x − mean)/std + b = (W / std) x + const``, so row c is ``W[c] / std``:
        the direction in raw space along which class c's logit grows.
        """
        return self.W / self.std

    def raw_intercept(self) -> Tensor:
        """``[C]`` intercept in raw space: ``b − (W/std) · mean``."""
        return self.b - self.class_directions() @ self.mean

    def to(self, device: torch.device | str) -> LinearProbe:
        """A copy with every tensor on ``device``."""
        kw = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("W", "b", "mean", "std", "classes_present"):
            kw[k] = kw[k].to(device)
        return LinearProbe(**kw)


@dataclass
class ProbeReport:
    """One layer's probe result (a row of ``probe_results`` without run/length/hash).

    ``accuracy``, ``balanced_accuracy`` (mean per-class recall over the classes present in the
    test labels) and ``majority_baseline`` are fractions 0..1 on the held-out sequences;
    ``per_position`` has L entries (accuracy at position t, 0-based, None where no labelled
    token); ``n_train`` / ``n_test`` count sequences. ``control_accuracy`` is the same probe on
    the control task (:func:`control_labels`) and ``selectivity = accuracy − control_accuracy``
    (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control Tasks", EMNLP, §2–3);
    both None when no input tokens were given. ``type_accuracy``: accuracy per token type
    (``{name: acc}``), None when no token types were given.
    """

    layer: int
    accuracy: float
    majority_baseline: float
    per_position: list[float | None]
    n_train: int
    n_test: int
    converged: bool
    n_iter: int
    grad_max: float
    balanced_accuracy: float | None = None
    control_accuracy: float | None = None
    selectivity: float | None = None
    type_accuracy: dict[str, float | None] | None = None
    probe: LinearProbe | None = field(default=None, repr=False)

    def to_row(self) -> dict[str, Any]:
        """Plain dict of every field but the fitted probe object (``per_position`` copied)."""
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "probe"}
        row["per_position"] = list(self.per_position)
        row["type_accuracy"] = None if self.type_accuracy is None else dict(self.type_accuracy)
        return row


def _check_xy(X: Tensor, y: Tensor, n_classes: int) -> tuple[Tensor, Tensor]:
    if X.ndim != 2:
        raise ValueError(f"X must be [N, D], got shape {tuple(X.shape)}")
    y = y.reshape(-1).to(X.device).long()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
    if X.shape[0] == 0:
        raise ValueError("cannot fit a probe on 0 samples")
    if n_classes < 1:
        raise ValueError(f"n_classes must be ≥ 1, got {n_classes}")
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1}, got {int(y.min())}..{int(y.max())}")
    if not X.is_floating_point() or X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()  # half-precision sums over N tokens are too coarse for the gradient test
    return X, y


def fit_probe(
    X: Tensor,
    y: Tensor,
    n_classes: int,
    *,
    C: float = DEFAULT_C,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    history_size: int = HISTORY_SIZE,
    precondition: bool = True,
) -> LinearProbe:
    """Fit a multinomial logistic-regression probe on standardised ``X``.

    Args:
        X: ``[N, D]`` raw features (float32/64; half precision and integers are cast to float32).
        y: ``[N]`` labels in ``0..n_classes-1``.
        n_classes: C; classes absent from ``y`` get a zero weight row and ``b = -inf``.
        C: inverse L2 strength, sklearn's meaning (``λ = 1/(C·N)``, doubled for 2 classes).
        tol: convergence tolerance on ``max|∇|`` (sklearn's lbfgs ``gtol``).
        max_iter: L-BFGS iteration budget.
        history_size: L-BFGS memory (sklearn/scipy default 10).
        precondition: optimise in whitened coordinates (default; see module docstring).
            ``False`` runs plain L-BFGS on the standardised problem (for comparison).

    Returns:
        A :class:`LinearProbe`; check ``.converged`` (never silently unconverged).

    Raises:
        ValueError: on shape mismatch, empty data, labels outside ``0..n_classes-1``.
    """
    X, y = _check_xy(X, y, n_classes)
    if C <= 0:
        raise ValueError(f"C must be > 0, got {C}")
    if max_iter < 0:
        raise ValueError(f"max_iter must be ≥ 0, got {max_iter}")
    dev, dt = X.device, X.dtype
    N, D = X.shape

    # Standardisation (StandardScaler: ddof 0), with the noise floor of the module docstring:
    # features that vary by rounding only get std = inf, i.e. standardised value 0.
    mean64 = X.mean(0, dtype=torch.float64)
    Xc = X - mean64.to(dt)
    cov = (Xc.T @ Xc).double() / N  # [D, D]
    var = cov.diagonal().clamp_min(0.0)
    std = var.sqrt()
    rms = (var + mean64 * mean64).sqrt()  # [D] raw root-mean-square of each feature
    scale = torch.maximum(rms, rms.median())
    std64 = torch.where(std > NOISE_RTOL * scale, std, torch.full_like(std, math.inf))
    Xs = Xc / std64.to(dt)  # [N, D]
    del Xc

    counts = torch.bincount(y, minlength=n_classes)
    present = counts > 0
    cls = present.nonzero().flatten()  # [K]
    K = int(cls.numel())
    W_full = torch.zeros(n_classes, D, dtype=torch.float64, device=dev)
    b_full = torch.full((n_classes,), -math.inf, dtype=torch.float64, device=dev)

    def _finish(W: Tensor, b: Tensor, converged: bool, n_iter: int, n_evals: int, gmax: float) -> LinearProbe:
        W_full[cls] = W
        b_full[cls] = b
        return LinearProbe(
            W=W_full.to(dt),
            b=b_full.to(dt),
            mean=mean64.to(dt),
            std=std64.to(dt),
            n_classes=n_classes,
            classes_present=present,
            converged=converged,
            n_iter=n_iter,
            n_evals=n_evals,
            grad_max=gmax,
            C=C,
            tol=tol,
            max_iter=max_iter,
        )

    if K == 1:  # one class seen: the probe predicts it; nothing to optimise
        return _finish(
            torch.zeros(1, D, dtype=torch.float64, device=dev),
            torch.zeros(1, dtype=torch.float64, device=dev),
            True,
            0,
            0,
            0.0,
        )

    remap = torch.full((n_classes,), -1, dtype=torch.long, device=dev)
    remap[cls] = torch.arange(K, device=dev)
    yk = remap[y]  # [N] in 0..K-1
    lam = (2.0 if K == 2 else 1.0) / (C * N)

    # Preconditioner: covariance of standardised features, eigenvalues floored at λ.
    corr = torch.nan_to_num(cov / torch.outer(std64, std64), nan=0.0)
    if precondition:
        evals, evecs = torch.linalg.eigh(corr)
        floor = max(lam, 1e-10 * float(evals.max().clamp_min(1e-30)))
        lam_e = evals.clamp_min(floor)
        M = (evecs * lam_e.rsqrt()).T  # [D, D]: W = W_z @ M
    else:
        M = torch.eye(D, dtype=torch.float64, device=dev)
    MT = M.T.contiguous()

    prior = counts[cls].double() / N
    theta = torch.zeros(K * D + K, dtype=torch.float64, device=dev)
    theta[K * D :] = prior.log() - prior.log().mean()
    theta.requires_grad_(True)
    Y = torch.zeros(N, K, dtype=torch.float64, device=dev)
    Y[torch.arange(N, device=dev), yk] = 1.0  # one-hot targets [N, K]
    last: dict[str, float] = {}

    def evaluate(th: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        Wz = th[: K * D].view(K, D)
        b = th[K * D :]
        W = Wz @ M  # [K, D] float64
        logits = (Xs @ W.to(dt).T).double().add_(b)  # [N, K]
        lse = torch.logsumexp(logits, 1, keepdim=True)  # [N, 1]
        logits.sub_(lse)  # log-probabilities
        loss = -(logits * Y).sum() / N + 0.5 * lam * (W * W).sum()
        R = logits.exp_().sub_(Y).div_(N)  # residuals P − Y, scaled: [N, K]
        g_std = (R.to(dt).T @ Xs).double() + lam * W  # [K, D]
        g_b = R.sum(0)
        return loss, g_std, g_b, W

    # The objective is handed to L-BFGS multiplied by F = 1/tol: torch's LBFGS drops curvature
    # pairs with yᵀs ≤ 1e-10, which an unscaled objective reaches near a tight optimum.
    F = 1.0 / tol if tol > 0 else 1e8

    class _Converged(Exception):
        """Raised by the closure at the first evaluated point that meets the criterion."""

    def closure() -> Tensor:
        with torch.no_grad():
            loss, g_std, g_b, _ = evaluate(theta)
            theta.grad = torch.cat([(g_std @ MT).reshape(-1), g_b]) * F
            last["gmax"] = max(float(g_std.abs().max()), float(g_b.abs().max()))
            last["evals"] = last.get("evals", 0) + 1
        if last["gmax"] <= tol:
            raise _Converged
        return loss * F

    # Stopping: torch's gradient test is off (tolerance_grad=0; it would test the whitened
    # gradient, not the standardised one). The closure raises _Converged at the first
    # evaluated point — an iterate or a line-search trial point, where LBFGS leaves the
    # parameters when the closure raises — whose standardised gradient meets the criterion.
    # torch's stall tests (tolerance_change) end a step() early; one restart is tried.
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=max(max_iter, 1),
        history_size=history_size,
        tolerance_grad=0.0,
        tolerance_change=1e-14,
        line_search_fn="strong_wolfe",
    )
    converged = False
    early_stops = 0
    try:
        closure()
        while True:
            done = int(opt.state[theta].get("n_iter", 0))
            if done >= max_iter or early_stops >= 2:
                break
            group = opt.param_groups[0]
            group["max_iter"] = max_iter - done
            group["max_eval"] = int((max_iter - done) * 1.25) + 25
            opt.step(closure)
            ran = int(opt.state[theta].get("n_iter", 0)) - done
            early_stops = early_stops + 1 if ran < max_iter - done else early_stops
    except _Converged:
        converged = True
    n_iter = int(opt.state[theta].get("n_iter", 0)) if opt.state else 0
    with torch.no_grad():
        th = theta.detach()
        W = th[: K * D].view(K, D) @ M
        b = th[K * D :]
    return _finish(W, b, converged, n_iter, int(last["evals"]), last["gmax"])


def split_sequences(
    n: int, test_frac: float = 0.2, seed: int = 0, strata: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Seeded split of ``n`` sequence indices → ``(train_idx, test_idx)`` (CPU long tensors, sorted).

    ``n_test = round(n · test_frac)``, at least 1 and at most ``n − 1`` when ``n ≥ 2``. With
    ``strata [n]`` (one integer per sequence, e.g. :func:`sequence_strata`) the split is
    stratified (``sklearn.model_selection.StratifiedShuffleSplit``): each stratum is split in
    the same proportion. Strata with a single sequence are pooled (a one-member stratum cannot
    be split); if that pool is itself a single sequence it joins the largest stratum.

    Raises:
        ValueError: ``n < 2``, ``test_frac`` outside (0, 1), ``strata`` not of length n.
    """
    if n < 2:
        raise ValueError(f"need at least 2 sequences to split, got {n}")
    if not 0.0 < test_frac < 1.0:
        raise ValueError(f"test_frac must be in (0, 1), got {test_frac}")
    n_test = min(max(1, round(n * test_frac)), n - 1)
    if strata is not None:
        st = torch.as_tensor(strata).reshape(-1).cpu().long()
        if st.numel() != n:
            raise ValueError(f"strata has {st.numel()} entries for {n} sequences")
        st = _pool_small_strata(st)
        n_groups = int(st.unique().numel())
        if 1 < n_groups <= min(n_test, n - n_test):
            from sklearn.model_selection import StratifiedShuffleSplit

            sss = StratifiedShuffleSplit(n_splits=1, test_size=n_test, random_state=seed)
            tr, te = next(sss.split(torch.zeros(n, 1).numpy(), st.numpy()))
            return torch.as_tensor(tr).sort().values, torch.as_tensor(te).sort().values
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g)
    return perm[n_test:].sort().values, perm[:n_test].sort().values


def _pool_small_strata(st: Tensor) -> Tensor:
    values, counts = st.unique(return_counts=True)
    small = values[counts < 2]
    if small.numel() == 0:
        return st
    out = st.clone()
    pool = int(values.max()) + 1
    out[torch.isin(st, small)] = pool
    if int((out == pool).sum()) < 2:
        big = values[counts.argmax()]
        out[out == pool] = big
    return out


def sequence_strata(labels: Tensor, n_classes: int, n_bins: int = 4, max_strata: int | None = None) -> Tensor:
    """One stratum per sequence from its label mix: ``[n, L]`` labels (< 0 ignored) → ``[n]``.

    The stratum is (most frequent label, share of that label binned into ``n_bins`` equal bins),
    so sequences that are nearly all one class and mixed sequences fall in different strata.
    With more than ``max_strata`` distinct strata, the most frequent label alone.
    """
    lab = labels.reshape(labels.shape[0], -1).cpu().long()
    valid = lab >= 0
    counts = torch.nn.functional.one_hot(lab.clamp_min(0), n_classes) * valid[..., None]  # [n, L, C]
    counts = counts.sum(1)  # [n, C]
    top = counts.argmax(1)
    share = counts.max(1).values.double() / valid.sum(1).clamp_min(1)
    b = (share * n_bins).floor().clamp_max(n_bins - 1).long()
    st = top * n_bins + b
    if max_strata is not None and int(st.unique().numel()) > max_strata:
        return top
    return st


CONTROL_BUCKET = 5  # positions per bucket of the control task (docs/SCIENCE.md#selectivity)


def control_labels(
    tokens: Tensor, labels: Tensor, n_classes: int, seed: int = 0, bucket: int | None = CONTROL_BUCKET
) -> Tensor:
    """The control task: one fixed random label per (input-token type, position bucket), drawn from
    the empirical label distribution; unlabelled positions (< 0) stay unlabelled.

    Hewitt & Liang (2019, "Designing and Interpreting Probes with Control Tasks", EMNLP, §2)
    give each token *type* a random label. With the formal tasks' 2–6 types (and even with
    code_depth's hundreds) that label is read off the token itself at every layer (control
    accuracy 0.90–1.00), so selectivity says nothing. Crossing the type with the position bucket
    ``t // bucket`` makes a label that no function of the token alone predicts, nor one of the
    position alone; a probe reads it only from states that keep both, in a form a linear map
    can separate: what "selectivity" then measures (docs/SCIENCE.md#selectivity).

    Args:
        tokens: ``[n, L]`` input token ids (≥ 0).
        labels: ``[n, L]`` the real labels (for the label distribution and the mask).
        bucket: positions per bucket (≥ 1); None = Hewitt & Liang's per-type control.

    Returns:
        ``[n, L]`` control labels on ``labels``' device.

    Raises:
        ValueError: shapes differ, or ``bucket`` < 1.
    """
    if tokens.shape != labels.shape:
        raise ValueError(f"tokens {tuple(tokens.shape)} and labels {tuple(labels.shape)} differ in shape")
    if bucket is not None and bucket < 1:
        raise ValueError(f"bucket must be >= 1 positions, got {bucket}")
    tok = tokens.cpu().long().clamp_min(0)
    lab = labels.cpu().long()
    valid = lab >= 0
    dist = torch.bincount(lab[valid], minlength=n_classes).double()
    g = torch.Generator().manual_seed(seed)
    n_types = int(tok.max()) + 1 if tok.numel() else 1
    n_buckets = 1 if bucket is None else -(-tok.shape[-1] // bucket)
    table = torch.multinomial(dist.clamp_min(0) + (dist.sum() == 0), n_types * n_buckets, replacement=True, generator=g)
    pos_bucket = torch.zeros_like(tok) if bucket is None else (torch.arange(tok.shape[-1]) // bucket).expand_as(tok)
    ctrl = torch.where(valid, table[tok * n_buckets + pos_bucket], torch.full_like(lab, -100))
    return ctrl.to(labels.device)


def type_accuracies(correct: Tensor, mask: Tensor, types: Tensor, names: tuple[str, ...]) -> dict[str, float | None]:
    """Accuracy per token type: ``{name: share of correct labelled test positions of that type}``
    (None for a type absent from the test positions). ``correct``, ``mask``, ``types``: ``[n, L]``."""
    out: dict[str, float | None] = {}
    for i, name in enumerate(names):
        m = mask & (types == i)
        out[name] = float((correct & m).sum()) / int(m.sum()) if int(m.sum()) else None
    return out


def _score(probe: LinearProbe, H: Tensor, y: Tensor, n_classes: int) -> tuple[Tensor, Tensor, float, float | None]:
    """(correct [n, L] bool, mask [n, L], accuracy, balanced accuracy) on labelled positions."""
    pred = probe.predict(H)
    m = y >= 0
    correct = (pred == y) & m
    acc = float(correct.sum()) / max(int(m.sum()), 1)
    recalls = []
    for c in range(n_classes):
        mc = (y == c) & m
        if int(mc.sum()) > 0:
            recalls.append(float((correct & mc).sum()) / int(mc.sum()))
    return correct, m, acc, (sum(recalls) / len(recalls)) if recalls else None


def probe_layers(
    states: dict[int, Tensor],
    labels: Tensor,
    n_classes: int,
    seed: int = 0,
    test_frac: float = 0.2,
    *,
    tokens: Tensor | None = None,
    token_types: Tensor | None = None,
    type_names: tuple[str, ...] = (),
    ctx: Any = None,
    keep_probes: bool = True,
    **fit_kwargs: Any,
) -> dict[int, ProbeReport]:
    """Probe every layer of one run at one length.

    Args:
        states: ``{layer: [n, L, D]}`` frozen states (layer −1 = emb); all on one device.
        labels: ``[n, L]`` labels in ``0..n_classes-1``; entries < 0 are ignored (unlabelled).
        n_classes: C.
        seed, test_frac: the split, 80/20 **by sequence**, stratified by each sequence's label mix
            (:func:`sequence_strata`, :func:`split_sequences`), the same sequences for every layer.
        tokens: ``[n, L]`` input tokens; when given, each layer also gets a probe on the control
            task (:func:`control_labels`, same settings, same split) and its selectivity.
        token_types, type_names: ``[n, L]`` token type ids and their names; when given, each
            report carries the probe's test accuracy per token type (:func:`type_accuracies`).
        ctx: optional ``JobContext`` (progress per layer, cancel checks).
        keep_probes: attach the fitted :class:`LinearProbe` to each report.
        **fit_kwargs: passed to :func:`fit_probe` (C, tol, max_iter, ...).

    Returns:
        ``{layer: ProbeReport}``: test accuracy and balanced accuracy on every labelled position
        of the held-out sequences, the majority baseline (most frequent training class, scored
        on the test positions), per-position test accuracy (L values), n_train/n_test
        sequences, convergence, and (with ``tokens``) control accuracy and selectivity. Layers
        are fitted one after another: each fit's cost is two ``[N, D] × [D, C]`` products per
        evaluation, so stacking layers into one block-diagonal problem would save only Python
        overhead while tying every layer to one line search and one iteration count.
    """
    if not states:
        raise ValueError("states is empty")
    n, L = labels.shape
    n_test = min(max(1, round(n * test_frac)), n - 1) if n >= 2 else 1
    strata = sequence_strata(labels, n_classes, max_strata=min(n_test, n - n_test))
    train_idx, test_idx = split_sequences(n, test_frac, seed, strata=strata)
    ctrl = control_labels(tokens, labels, n_classes, seed) if tokens is not None else None
    out: dict[int, ProbeReport] = {}
    layers = sorted(states)
    for i, layer in enumerate(layers):
        if ctx is not None:
            ctx.check_cancelled()
        H = states[layer]
        if H.shape[:2] != (n, L):
            raise ValueError(f"layer {layer}: states {tuple(H.shape)} do not match labels {(n, L)}")
        dev = H.device
        lab = labels.to(dev)
        tr, te = train_idx.to(dev), test_idx.to(dev)
        ytr, yte = lab[tr], lab[te]  # [n_tr, L], [n_te, L]
        mtr = ytr >= 0
        Xtr = H[tr][mtr]  # [N_train_tokens, D]
        probe = fit_probe(Xtr, ytr[mtr], n_classes, **fit_kwargs)
        correct, mte, acc, bal = _score(probe, H[te], yte, n_classes)
        majority = int(torch.bincount(ytr[mtr], minlength=n_classes).argmax())
        maj = float(((yte == majority) & mte).sum()) / max(int(mte.sum()), 1)
        pos_n = mte.sum(0)
        pos_acc = correct.sum(0).double() / pos_n.clamp_min(1)
        per_pos = [float(a) if int(c) > 0 else None for a, c in zip(pos_acc.tolist(), pos_n.tolist())]
        by_type = None
        if token_types is not None:
            by_type = type_accuracies(correct, mte, token_types.to(dev)[te], type_names)
        control = None
        if ctrl is not None:
            c_lab = ctrl.to(dev)
            ctr, cte = c_lab[tr], c_lab[te]
            cm = ctr >= 0
            c_probe = fit_probe(H[tr][cm], ctr[cm], n_classes, **fit_kwargs)
            control = _score(c_probe, H[te], cte, n_classes)[2]
        out[layer] = ProbeReport(
            layer=layer,
            accuracy=acc,
            majority_baseline=maj,
            per_position=per_pos,
            n_train=int(tr.numel()),
            n_test=int(te.numel()),
            converged=probe.converged,
            n_iter=probe.n_iter,
            grad_max=probe.grad_max,
            balanced_accuracy=bal,
            control_accuracy=control,
            selectivity=None if control is None else acc - control,
            type_accuracy=by_type,
            probe=probe if keep_probes else None,
        )
        if ctx is not None:
            ctx.progress((i + 1) / len(layers), f"probe layer {layer}: {acc:.3f}")
    return out


def sklearn_probe(
    X_train: Any,
    y_train: Any,
    X_test: Any = None,
    y_test: Any = None,
    *,
    C: float = DEFAULT_C,
    max_iter: int = 100,
    tol: float = DEFAULT_TOL,
) -> dict[str, Any]:
    """Reference: ``StandardScaler`` + ``LogisticRegression(C, lbfgs, max_iter, tol)``.

    Args:
        X_train ``[N, D]``, y_train ``[N]`` (tensors or arrays); optional test set.

    Returns:
        ``{"model", "scaler", "accuracy" (test, or None), "converged", "n_iter"}``.
        ``converged`` is False when sklearn's ``n_iter_`` reached ``max_iter`` or it raised a
        ``ConvergenceWarning`` (sklearn itself only warns).
    """
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    def _np(a: Any) -> np.ndarray:
        return a.detach().cpu().numpy() if isinstance(a, Tensor) else np.asarray(a)

    Xtr, ytr = _np(X_train), _np(y_train).reshape(-1)
    scaler = StandardScaler().fit(Xtr)
    model = LogisticRegression(C=C, max_iter=max_iter, tol=tol, solver="lbfgs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(scaler.transform(Xtr), ytr)
    n_iter = int(np.max(model.n_iter_))
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    acc = None
    if X_test is not None and y_test is not None:
        acc = float(model.score(scaler.transform(_np(X_test)), _np(y_test).reshape(-1)))
    return {
        "model": model,
        "scaler": scaler,
        "accuracy": acc,
        "converged": (n_iter < max_iter) and not warned,
        "n_iter": n_iter,
    }
