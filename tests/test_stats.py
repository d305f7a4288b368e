"""Statistics against independent references (scipy, hand-computed Holm, null calibration)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from science.stats import bootstrap_ci, holm, paired_permutation_test, significance_label, t_interval


def test_t_interval_matches_textbook_formula():
    v = [0.71, 0.74, 0.69]
    m, lo, hi = t_interval(v)
    half = 4.302652729911275 * np.std(v, ddof=1) / np.sqrt(3)  # t_{0.975, 2}
    assert m == pytest.approx(np.mean(v)) and lo == pytest.approx(m - half) and hi == pytest.approx(m + half)


def test_t_interval_degenerate_cases():
    assert t_interval([0.5]) == (0.5, None, None)
    assert t_interval([]) == (None, None, None)
    assert t_interval([0.3, 0.3, None, float("nan")]) == (0.3, 0.3, 0.3)


def test_bootstrap_ci_covers_mean_and_matches_normal_width():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, size=400)
    lo, hi = bootstrap_ci(x, n_boot=2000, seed=1)
    assert lo < x.mean() < hi
    assert (hi - lo) == pytest.approx(2 * 1.96 * x.std(ddof=1) / 20, rel=0.15)
    assert bootstrap_ci(x, 500, seed=3) == bootstrap_ci(x, 500, seed=3)
    assert bootstrap_ci([1.0]) == (None, None)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)


@pytest.mark.parametrize("seed", range(4))
def test_exact_permutation_equals_scipy_exact(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=9), rng.normal(size=9) + 0.3
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=np.inf,
    ).pvalue
    assert paired_permutation_test(a, b, n_perm=10_000) == pytest.approx(ref)


def test_permutation_p_values_uniform_under_null():
    rng = np.random.default_rng(123)
    ps = []
    for i in range(200):
        a = rng.normal(size=30)
        b = rng.normal(size=30)
        ps.append(paired_permutation_test(a, b, n_perm=400, seed=i))
    ps = np.array(ps)
    assert ps.min() > 0
    assert stats.kstest(ps, "uniform").pvalue > 0.01


def test_permutation_small_under_planted_effect():
    rng = np.random.default_rng(7)
    base = rng.normal(size=60)
    p = paired_permutation_test(base + 0.8 + 0.5 * rng.normal(size=60), base, n_perm=2000, seed=0)
    assert p == pytest.approx(1 / 2001)  # nothing as extreme: the +1 floor
    assert paired_permutation_test([1, 2, 3], [1, 2, 3]) == 1.0


def test_permutation_errors():
    with pytest.raises(ValueError):
        paired_permutation_test([1, 2], [1])
    with pytest.raises(ValueError):
        paired_permutation_test([], [])


def test_holm_hand_computed_example():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → max-monotone 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1, None kept and not counted in m
    assert holm([0.6, None, 0.5]) == [pytest.approx(1.0), None, pytest.approx(1.0)]
    assert holm([]) == []


def test_holm_monotone_and_dominates_raw():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=25) ** 3
    adj = np.array(holm(p))
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= -1e-15)
    assert np.all(adj >= p) and np.all(adj <= 1.0)
    assert np.all(adj <= np.minimum(1, p * len(p)) + 1e-15)  # never worse than Bonferroni


def test_significance_label():
    assert significance_label(0.2) == "n.s." and significance_label(None) == "n.s."
    assert significance_label(0.001).startswith("p=")


def test_wilson_interval():
    from science.stats import wilson_interval

    share, lo, hi = wilson_interval(3, 3)
    assert share == 1.0 and hi == pytest.approx(1.0) and lo == pytest.approx(0.4385, abs=1e-3)
    share, lo, hi = wilson_interval(0, 40)
    assert share == 0.0 and lo == pytest.approx(0.0, abs=1e-12) and hi < 0.10
    share, lo, hi = wilson_interval(5, 10)
    assert lo < 0.5 < hi and lo == pytest.approx(1 - hi)  # symmetric at one half
    assert wilson_interval(0, 0) == (None, None, None)
    with pytest.raises(ValueError, match="k must be"):
        wilson_interval(4, 3)


def test_t_interval_clipped_to_the_quantity_range() -> None:
    from science.stats import BOUNDS, bounds_for, clip_interval, t_interval

    vals = [1.0, 0.76, 1.0]  # accuracies: the plain interval reaches above 1.0
    m, lo, hi = t_interval(vals)
    assert hi > 1.0
    mc, loc, hic = t_interval(vals, bounds=bounds_for("accuracy"))
    assert mc == m and hic == 1.0 and loc == max(lo, 0.0)
    _m0, lo0, hi0 = t_interval([0.0, 0.02, 0.30], bounds=(0.0, 1.0))
    assert lo0 == 0.0 and 0.0 < hi0 < 1.0
    assert bounds_for("auc") == (0.0, 1.0) and bounds_for("delta_pp") is None
    # late concentration is not bounded: a last block below the one before gives < 0
    assert bounds_for("late_concentration") is None
    assert "accuracy" in BOUNDS
    # a mean outside the range (a quantity bounded "in practice") is never hidden by the clip
    assert clip_interval(-0.2, -0.9, 0.4, (0.0, 1.0)) == (-0.2, -0.2, 0.4)
    assert clip_interval(0.5, None, None, (0.0, 1.0)) == (0.5, None, None)
    assert clip_interval(0.5, -3.0, 3.0, None) == (0.5, -3.0, 3.0)


def test_figure_side_interval_uses_the_same_clip() -> None:
    from dashboard.figures.behaviour import behaviour_rows
    from dashboard.figures.common import t_interval as fig_t

    assert fig_t([1.0, 0.76, 1.0])[2] == 1.0
    assert fig_t([0.0, 0.02, 0.3])[1] == 0.0
    assert fig_t([0.4]) == (0.4, 0.4, 0.4)
    runs = [
        {"task": "s3", "family": "lstm", "seed": s, "trained": True, "behaviour": {"40": {"token_acc": v}}}
        for s, v in enumerate((0.02, 0.0, 0.31))
    ]
    rows = behaviour_rows(runs)
    assert rows and all(r["lo"] >= 0.0 and r["hi"] <= 1.0 for r in rows)


def test_permutation_greater_keeps_the_claims_p_values():
    """The claims' two-sample test moved from science/claims into science.stats: its p-values on
    fixed data are the ones the claims computed before the move (exact and Monte Carlo)."""
    from science.stats import permutation_greater

    # exact: 20 splits of 6 values into 3 + 3, only the observed one has a mean gap ≥ 3
    assert permutation_greater([3, 4, 5], [1, 2, 0]) == {"diff": 3.0, "p": 0.05, "n_x": 3, "n_y": 3}
    assert permutation_greater([0.3, None, 0.5, 0.45], [0.1, 0.2])["p"] == pytest.approx(0.1)  # 1 of 10 splits
    rng = np.random.default_rng(5)
    x, y = list(rng.normal(0.3, 1, 12)), list(rng.normal(0, 1, 11))  # C(23, 12) > 10,000: Monte Carlo
    assert permutation_greater(x, y)["p"] == 0.0867913208679132
    assert permutation_greater([1], [2, 3]) is None and permutation_greater([1, None], [2, 3]) is None
