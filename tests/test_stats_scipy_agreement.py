"""science.stats.paired_permutation_test against scipy.stats.permutation_test (one
permutation-test style). In the exact case (every sign pattern enumerated) the two give the same
p-value; in the Monte Carlo case they draw different sign patterns from the same seed, so a switch
to scipy would change every stored intervention p-value (n ≥ 14 sequences at n_perm 10,000) —
why stats.py keeps its own sampler."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from science.stats import paired_permutation_test


def scipy_sign_flip(a: np.ndarray, b: np.ndarray, n_perm: int, seed: int) -> float:
    d = np.asarray(a, float) - np.asarray(b, float)
    return float(
        st.permutation_test(
            (d,),
            lambda x, axis: np.abs(x.mean(axis)),
            permutation_type="samples",
            alternative="greater",
            n_resamples=n_perm,
            rng=np.random.default_rng(seed),
        ).pvalue
    )


@pytest.mark.parametrize("n", [3, 6, 9, 13])
def test_exact_case_equals_scipy(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.normal(size=n)
    b = a + rng.normal(0.4, 1.0, size=n)
    assert paired_permutation_test(a, b, n_perm=10_000) == pytest.approx(scipy_sign_flip(a, b, 10_000, 0), abs=1e-12)


def test_monte_carlo_case_draws_other_patterns_than_scipy() -> None:
    rng = np.random.default_rng(160)
    a = rng.normal(size=160)
    b = a + rng.normal(0.2, 1.0, size=160)
    ours, theirs = paired_permutation_test(a, b, n_perm=10_000), scipy_sign_flip(a, b, 10_000, 0)
    assert ours != theirs  # same test, other draws: the stored numbers would move
    assert abs(ours - theirs) < 0.01  # but both estimate one p-value
