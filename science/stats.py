"""Statistics for layerscope results (docs/SCIENCE.md#statistics). numpy/scipy only, no torch.

- :func:`t_interval` — mean and Student-t confidence interval over seeds; with ``bounds`` the
  interval is clipped to the quantity's range (:func:`clip_interval`, :data:`BOUNDS`).
- :func:`bootstrap_ci` — percentile bootstrap over items within a run (sequences, or patching
  pairs with their values resampled together; Efron & Tibshirani 1993, ch. 13): the one
  bootstrap of the project (``science.patching.recovery_ci`` is built on it).
- :func:`paired_permutation_test` — two-sided sign-flip test of paired differences (Fisher 1935;
  Good 2005, *Permutation, Parametric and Bootstrap Tests*, §3), exact when all 2ⁿ sign patterns
  fit in ``n_perm``, else Monte Carlo with the +1 correction of Phipson & Smyth 2010 ("Permutation
  p-values should never be zero").
- :func:`permutation_greater` — one-sided two-sample permutation test of ``mean(x) > mean(y)``
  (``scipy.stats.permutation_test``, independent samples), the claims' test between groups of seeds.
- :func:`wilson_interval` — Wilson (1927) score interval of a binomial share, via
  ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``.
- :func:`chance_line` — the accuracy a classifier must beat to read more than a constant guess,
  beyond sampling noise (INLP's stopping line and the refit's removal line).
- :func:`holm` — Holm 1979 step-down adjustment ("A simple sequentially rejective multiple test
  procedure", Scand. J. Statist. 6:65–70).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats as _st

__all__ = [
    "ALPHA",
    "BOUNDS",
    "bootstrap_ci",
    "bounds_for",
    "chance_line",
    "clip_interval",
    "holm",
    "paired_permutation_test",
    "permutation_greater",
    "significance_label",
    "t_interval",
    "wilson_interval",
]

ALPHA = 0.05
CHANCE_Z = 2.326  # one-sided 1 % (normal quantile): a reading within this many σ of a constant guess is noise

# The range of each bounded quantity the API and the figures put intervals on. A t-interval
# over n = 3 seeds near 1.0 easily reaches past 1.0; no value of the quantity can, so the
# interval is clipped (one place: clip_interval). Keys are metric names as stored/aggregated.
UNIT = (0.0, 1.0)
BOUNDS: dict[str, tuple[float, float]] = {
    "accuracy": UNIT,
    "balanced_accuracy": UNIT,
    "control_accuracy": UNIT,
    "heldout_acc": UNIT,
    "max_accuracy": UNIT,
    "share": UNIT,
    "auc": UNIT,
    "depth_first_95": UNIT,
}  # not patching recovery: a patch can overshoot the clean run (> 1) or worsen it (< 0); not late
# concentration either: a last block below the one before gives < 0, a layer below the floor > 1


def bounds_for(name: str | None) -> tuple[float, float] | None:
    """The range of a named quantity (:data:`BOUNDS`), or None when it is unbounded."""
    return BOUNDS.get(name) if name else None


def clip_interval(
    mean: float | None, lo: float | None, hi: float | None, bounds: tuple[float, float] | None
) -> tuple[float | None, float | None, float | None]:
    """``(mean, lo, hi)`` with ``lo``/``hi`` clipped to ``bounds = (low, high)``.

    The range is widened to the mean when the mean itself lies outside it (a quantity that is
    bounded "in practice", e.g. late concentration of a curve that dips, is never hidden).
    None bounds or a missing end → unchanged.
    """
    if bounds is None:
        return mean, lo, hi
    b_lo, b_hi = bounds
    if mean is not None and math.isfinite(mean):
        b_lo, b_hi = min(b_lo, mean), max(b_hi, mean)
    lo = None if lo is None else min(max(lo, b_lo), b_hi)
    hi = None if hi is None else min(max(hi, b_lo), b_hi)
    return mean, lo, hi


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray([np.nan if v is None else v for v in np.ravel(np.asarray(values, dtype=object))], dtype=float)
    return a[np.isfinite(a)]


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: int) -> float:
    """Student-t quantile ``t_{q, df}`` (``scipy.stats.t.ppf``), remembered: an interval over a
    few seeds asks the same few (q, df) thousands of times in one claims evaluation, and each
    scipy call costs ~0.1 ms."""
    return float(_st.t.ppf(q, df))


def t_interval(
    values: Sequence[float] | np.ndarray, confidence: float = 0.95, bounds: tuple[float, float] | None = None
) -> tuple[float | None, float | None, float | None]:
    """Mean and two-sided Student-t interval ``mean ± t_{(1+conf)/2, n−1} · s/√n`` over seeds.

    Args:
        values: ``[n]`` one number per seed (None / nan are dropped).
        confidence: coverage, e.g. 0.95.
        bounds: the quantity's range, e.g. ``(0, 1)`` for an accuracy (:data:`BOUNDS`); the
            interval is clipped to it (:func:`clip_interval`). None = unbounded.

    Returns:
        ``(mean, lo, hi)``. With n = 1 the interval is undefined: ``(mean, None, None)``; with
        n = 0 all three are None. Identical values give ``lo = hi = mean``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    a = _finite(values)
    n = a.size
    if n == 0:
        return None, None, None
    m = float(a.mean())
    if n == 1:
        return m, None, None
    sem = float(a.std(ddof=1)) / math.sqrt(n)
    if sem == 0.0:
        return m, m, m
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sem
    return clip_interval(m, m - half, m + half, bounds)


def chance_line(best_guess: float, n: int, tol: float, z: float = CHANCE_Z) -> float:
    """The accuracy at or under which a classifier reads nothing a constant guess does not:
    ``best_guess + max(tol, z·√(best_guess(1 − best_guess)/n))``.

    Args:
        best_guess: the best constant guess's accuracy on the scored rows (their largest class
            share), 0..1.
        n: the scored rows (tokens).
        tol: the least margin above ``best_guess``, 0..1 (a floor where n is large).
        z: the one-sided normal quantile (:data:`CHANCE_Z`: a one-sided binomial test at 1 %,
            normal approximation). Tokens of one sequence are not independent, so the binomial σ
            is a lower bound on the noise: the line errs toward reading a variable as present.

    Returns:
        the line, 0..1 + margin (docs/SCIENCE.md#inlp-chance-line, #removal-line).

    Raises:
        ValueError: ``n`` < 1 or ``best_guess`` outside 0..1.
    """
    if n < 1:
        raise ValueError(f"chance_line needs at least one scored row, got n = {n}")
    if not 0.0 <= best_guess <= 1.0:
        raise ValueError(f"best_guess must be in 0..1, got {best_guess}")
    return best_guess + max(tol, z * math.sqrt(best_guess * (1.0 - best_guess) / n))


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Share ``k/n`` and its Wilson score interval (Wilson 1927, JASA 22:209–212).

    Args:
        k: successes, 0..n.
        n: trials (runs); 0 → ``(None, None, None)``.

    Returns:
        ``(share, lo, hi)`` as fractions 0..1.

    Raises:
        ValueError: ``k`` outside 0..n.
    """
    if n == 0:
        return None, None, None
    if not 0 <= k <= n:
        raise ValueError(f"k must be in 0..{n}, got {k}")
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return k / n, float(ci.low), float(ci.high)


def bootstrap_ci(
    per_item_values: Sequence[float] | np.ndarray,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI over items (sequences, or patching pairs) (docs/SCIENCE.md#statistics).

    Items are drawn with replacement ``n_boot`` times (``rng.integers(0, n, (n_boot, n))``); the
    CI is the ``(1 ± confidence) / 2`` percentiles of the statistic over the resamples.

    Args:
        per_item_values: ``[n]`` one value per item (None / nan dropped), or ``[n, k]``: k paired
            values per item, resampled together (rows with a non-finite value dropped).
        n_boot: resamples.
        seed: ``numpy.random.default_rng`` seed.
        confidence: the CI's coverage.
        statistic: maps the resampled values ``[n_boot, n]`` (or ``[n_boot, n, k]``) to
            ``[n_boot]``; default the mean over items (1-D values only). Resamples whose
            statistic is not finite (a ratio whose denominator is 0) are skipped.

    Returns:
        ``(lo, hi)``; ``(None, None)`` when fewer than 2 items or no finite resample; ``(v, v)``
        for the mean of values that are all equal.
    """
    raw = np.asarray(per_item_values, dtype=object)
    if raw.ndim == 2:
        a = np.asarray(np.where(raw == None, np.nan, raw), dtype=float)  # noqa: E711 (elementwise)
        a = a[np.isfinite(a).all(axis=1)]
    elif raw.ndim <= 1:
        a = _finite(per_item_values)
    else:
        raise ValueError(f"per_item_values must be [n] or [n, k], got {raw.ndim} dimensions")
    if statistic is None:
        if a.ndim != 1:
            raise ValueError("paired values [n, k] need a statistic")
        statistic = _mean_over_items
    n = a.shape[0]
    if n < 2:
        return None, None
    if statistic is _mean_over_items and np.all(a == a[0]):
        return float(a[0]), float(a[0])
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = np.asarray(statistic(a[idx]), dtype=float)
    boots = boots[np.isfinite(boots)]
    if boots.size == 0:
        return None, None
    lo, hi = np.percentile(boots, [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(lo), float(hi)


def _mean_over_items(resamples: np.ndarray) -> np.ndarray:
    return resamples.mean(axis=1)


def paired_permutation_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_perm: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided paired sign-flip permutation test of ``mean(a − b) = 0``.

    Under H0 each paired difference ``d_i = a_i − b_i`` is symmetric about 0, so flipping signs
    gives the null distribution of ``T = |mean(d)|``.

    Args:
        a, b: ``[n]`` paired values (e.g. per-sequence accuracy before / after an edit).
        n_perm: random sign patterns; when ``2ⁿ ≤ n_perm`` all patterns are enumerated (exact).
        seed: ``numpy.random.default_rng`` seed for the Monte Carlo case.

    Returns:
        p in (0, 1]: exact ``#{|T*| ≥ |T|} / 2ⁿ`` (the identity pattern counts), or Monte Carlo
        ``(1 + #{|T*| ≥ |T|}) / (1 + n_perm)``. All differences zero → 1.0.

    Raises:
        ValueError: different lengths or n = 0.
    """
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples need equal lengths, got {x.size} and {y.size}")
    if x.size == 0:
        raise ValueError("paired_permutation_test needs at least one pair")
    if n_perm < 1:
        raise ValueError(f"n_perm must be ≥ 1, got {n_perm}")
    d = x - y
    n = d.size
    t_obs = abs(d.mean())
    if np.all(d == 0):
        return 1.0
    # ≥ with a relative tolerance so floating-point ties (e.g. the identity pattern) count
    thresh = t_obs - 1e-12 * max(np.abs(d).mean(), 1e-300)
    if n <= 20 and 2**n <= n_perm:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)  # [2ⁿ, n]
        t = np.abs(signs @ d) / n
        return float((t >= thresh).sum() / 2**n)
    rng = np.random.default_rng(seed)
    count = 0
    chunk = max(1, min(n_perm, 2_000_000 // max(n, 1)))
    done = 0
    while done < n_perm:
        m = min(chunk, n_perm - done)
        flips = rng.integers(0, 2, size=(m, n), dtype=np.int8) * 2 - 1
        t = np.abs(flips @ d) / n
        count += int((t >= thresh).sum())
        done += m
    return float((1 + count) / (1 + n_perm))


def permutation_greater(
    x: Sequence[float | None], y: Sequence[float | None], n_resamples: int = 10_000, seed: int = 0
) -> dict[str, Any] | None:
    """One-sided two-sample permutation test of ``mean(x) > mean(y)``: ``scipy.stats.permutation_test``
    with ``permutation_type="independent"`` (the values pooled and split again into groups of the
    same sizes), exact when every split fits in ``n_resamples``, else Monte Carlo from
    ``numpy.random.default_rng(seed)`` with scipy's +1 correction.

    The paired test (:func:`paired_permutation_test`) keeps its own sign-flip sampler: scipy's
    draws other sign patterns from the same seed, so its Monte Carlo p-values would move every
    stored intervention p-value (tests/test_stats_scipy_agreement.py); in the exact case the two agree.

    Args:
        x, y: ``[n_x]``, ``[n_y]`` values (e.g. a per-seed statistic of two groups of cells);
            None entries are dropped.
        n_resamples: splits drawn (Monte Carlo) or the cap under which all are enumerated.
        seed: the Monte Carlo generator's seed.

    Returns:
        ``{diff: mean(x) − mean(y), p, n_x, n_y}``, or None when either side has fewer than 2 values.
    """
    xa = [v for v in x if v is not None]
    ya = [v for v in y if v is not None]
    if len(xa) < 2 or len(ya) < 2:
        return None
    res = _st.permutation_test(
        (np.asarray(xa), np.asarray(ya)),
        lambda a, b, axis: a.mean(axis) - b.mean(axis),
        permutation_type="independent",
        alternative="greater",
        n_resamples=n_resamples,
        rng=np.random.default_rng(seed),
    )
    return {"diff": float(np.mean(xa) - np.mean(ya)), "p": float(res.pvalue), "n_x": len(xa), "n_y": len(ya)}


def holm(pvals: Sequence[float | None] | np.ndarray) -> list[float | None]:
    """Holm (1979) step-down adjusted p-values, in the input order.

    With the m finite p-values sorted ``p_(1) ≤ … ≤ p_(m)``:
    ``p̃_(i) = min(1, max_{j ≤ i} (m − j + 1) · p_(j))`` — monotone in i and capped at 1.
    Rejecting ``p̃ < α`` controls the family-wise error rate at α under any dependence.
    None / nan entries stay None and do not count in m.
    """
    raw = [None if (v is None or not np.isfinite(float(v))) else float(v) for v in pvals]
    finite = {i: v for i, v in enumerate(raw) if v is not None}
    m = len(finite)
    out: list[float | None] = [None] * len(raw)
    if m == 0:
        return out
    order = sorted(finite, key=finite.__getitem__)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * finite[i]))
        out[i] = running
    return out


def significance_label(p_adjusted: float | None, alpha: float = ALPHA) -> str:
    """``"n.s."`` when ``p ≥ alpha`` (or missing), else ``"p<0.05"``-style text with the value."""
    if p_adjusted is None or not np.isfinite(p_adjusted) or p_adjusted >= alpha:
        return "n.s."
    return f"p={p_adjusted:.3g}"
