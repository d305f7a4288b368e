"""The probe: multinomial logistic regression on standardised features (docs/SCIENCE.md#probes).

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

The solver (full-batch L-BFGS in whitened coordinates) and its convergence test are
:mod:`science.probes.solver`'s. Device-agnostic: everything runs where the input tensors are
(CPU or CUDA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from science.probes.design import NOISE_RTOL, Design, standardise
from science.probes.solver import DEFAULT_TOL, HISTORY_SIZE, SolverResult, minimise, whitening

__all__ = ["NOISE_RTOL", "LinearProbe", "fit_design", "fit_probe", "standardised"]
DEFAULT_C = 1.0
DEFAULT_MAX_ITER = 500


@dataclass
class LinearProbe:
    """A fitted multinomial logistic-regression probe.

    Attributes:
        W: ``[C, D]`` weights on standardised features (rows of absent classes are 0).
        b: ``[C]`` intercepts (``-inf`` for classes absent from the training labels).
        mean, std: ``[D]`` standardisation fitted on the training features.
        n_classes: C.
        classes_present: ``[C]`` bool, classes seen in the training labels.
        converged: ``max|∇| ≤ tol`` reached (see :mod:`science.probes.solver`).
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


def _check_labels(y: Tensor, n_rows: int, n_classes: int, device: torch.device) -> Tensor:
    y = y.reshape(-1).to(device).long()
    if y.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {y.shape[0]} labels")
    if n_rows == 0:
        raise ValueError("cannot fit a probe on 0 samples")
    if n_classes < 1:
        raise ValueError(f"n_classes must be ≥ 1, got {n_classes}")
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1}, got {int(y.min())}..{int(y.max())}")
    return y


def _features(X: Tensor) -> Tensor:
    """``X`` checked to be ``[N, D]``; half precision and integers as float32."""
    if X.ndim != 2:
        raise ValueError(f"X must be [N, D], got shape {tuple(X.shape)}")
    if not X.is_floating_point() or X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()  # half-precision sums over N tokens are too coarse for the gradient test
    return X


def standardised(X: Tensor) -> Design:
    """The :class:`~science.probes.design.Design` :func:`fit_probe` fits on ``X [N, D]`` (half
    precision and integers cast to float32): compute it once to fit a probe and its control-task
    twin on the same rows with :func:`fit_design`.

    Raises:
        ValueError: ``X`` is not ``[N, D]``.
    """
    return standardise(_features(X))


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
        precondition: optimise in whitened coordinates (default; :mod:`science.probes.solver`).
            ``False`` runs plain L-BFGS on the standardised problem (for comparison).

    Returns:
        A :class:`LinearProbe`; check ``.converged`` (never silently unconverged).

    Raises:
        ValueError: on shape mismatch, empty data, labels outside ``0..n_classes-1``.
    """
    X = _features(X)
    y = _check_labels(y, X.shape[0], n_classes, X.device)
    return fit_design(
        standardise(X),
        y,
        n_classes,
        C=C,
        tol=tol,
        max_iter=max_iter,
        history_size=history_size,
        precondition=precondition,
    )


def fit_design(
    d: Design,
    y: Tensor,
    n_classes: int,
    *,
    C: float = DEFAULT_C,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    history_size: int = HISTORY_SIZE,
    precondition: bool = True,
    init: LinearProbe | None = None,
) -> LinearProbe:
    """:func:`fit_probe` on a design computed once (:func:`standardised`, or INLP's
    :func:`science.probes.design.projected`); ``y [N]`` labels of its rows. ``init``: a probe
    whose solution, mapped onto this design's features, starts the solver (INLP's previous
    round) instead of ``W = 0`` and the log prior; the minimiser is the same.

    Raises:
        ValueError: as :func:`fit_probe`.
    """
    y = _check_labels(y, d.n, n_classes, d.Xt.device)
    if C <= 0:
        raise ValueError(f"C must be > 0, got {C}")
    if max_iter < 0:
        raise ValueError(f"max_iter must be ≥ 0, got {max_iter}")
    dev, dt = d.Xt.device, d.Xt.dtype
    N, D = d.n, int(d.Xt.shape[0])
    counts = torch.bincount(y, minlength=n_classes)
    present = counts > 0
    cls = present.nonzero().flatten()  # [K]
    K = int(cls.numel())
    W_full = torch.zeros(n_classes, D, dtype=torch.float64, device=dev)
    b_full = torch.full((n_classes,), -math.inf, dtype=torch.float64, device=dev)
    if K == 1:  # one class seen: the probe predicts it; nothing to optimise
        fit = SolverResult(
            W=torch.zeros(1, D, dtype=torch.float64, device=dev), b=torch.zeros(1, dtype=torch.float64, device=dev)
        )
    else:
        remap = torch.full((n_classes,), -1, dtype=torch.long, device=dev)
        remap[cls] = torch.arange(K, device=dev)
        lam = (2.0 if K == 2 else 1.0) / (C * N)
        M = whitening(d.cov, d.std, lam) if precondition else torch.eye(D, dtype=torch.float64, device=dev)
        start = None if init is None else _warm_start(init, d, cls)
        fit = minimise(
            d, remap[y], counts[cls], lam, M, tol=tol, max_iter=max_iter, history_size=history_size, init=start
        )
    W_full[cls] = fit.W
    b_full[cls] = fit.b
    return LinearProbe(
        W=W_full.to(dt),
        b=b_full.to(dt),
        mean=d.mean.to(dt),
        std=d.std.to(dt),
        n_classes=n_classes,
        classes_present=present,
        converged=fit.converged,
        n_iter=fit.n_iter,
        n_evals=fit.n_evals,
        grad_max=fit.grad_max,
        C=C,
        tol=tol,
        max_iter=max_iter,
    )


def _warm_start(p: LinearProbe, d: Design, cls: Tensor) -> tuple[Tensor, Tensor] | None:
    """``p``'s solution on ``d``'s standardised features ``(W [K, D], b [K])``, float64: the same
    raw-space weights seen through ``d``'s projection and rescaled by its std; None when ``p``
    lacks one of the classes present."""
    if not bool(p.classes_present.to(cls.device)[cls].all()):
        return None
    V = p.class_directions().double()[cls].nan_to_num(0.0)  # raw-space weights [K, D]
    Vp = V if d.P is None else V @ d.P
    W = (Vp * d.std).nan_to_num(0.0, posinf=0.0, neginf=0.0)  # inf std: the feature is not read
    if float(Vp.norm()) <= 1e-8 * float(V.norm()):  # INLP removed all of it: only the intercepts carry over
        W = torch.zeros_like(W)
    return W, p.b.double()[cls]
