"""The reference the probe is held against: scikit-learn's ``StandardScaler`` +
``LogisticRegression`` (tests and ``benchmarks/bench_probes.py`` compare
:func:`science.probes.fit_probe` with it; docs/SCIENCE.md#probes)."""

from __future__ import annotations

import warnings
from typing import Any

from torch import Tensor

from science.probes.linear import DEFAULT_C
from science.probes.solver import DEFAULT_TOL


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
