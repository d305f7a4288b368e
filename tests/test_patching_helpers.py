"""Activation patching uses the project's one position patch (``models_store.capture.patch_positions``,
with its shape check) and the one bootstrap (``science.stats.bootstrap_ci``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models_store.capture import patch_positions
from science import patching
from science.stats import bootstrap_ci


def test_patching_has_no_copies_of_the_shared_helpers():
    assert patching.patch_positions is patch_positions
    assert patching.bootstrap_ci is bootstrap_ci
    assert not hasattr(patching, "_positions_fn")


def test_patch_positions_checks_the_shape():
    fn = patch_positions(torch.zeros(2, 5, 3), [1])
    assert fn(torch.ones(2, 5, 3))[:, 1].abs().sum() == 0
    with pytest.raises(ValueError, match="shape"):
        fn(torch.ones(2, 6, 3))


def test_recovery_ci_is_bootstrap_ci_of_the_ratio_of_means():
    rng = np.random.default_rng(1)
    ld_clean, ld_corr = 3 + rng.normal(size=32), -3 + rng.normal(size=32)
    ld_p = ld_corr + 0.7 * (ld_clean - ld_corr)
    rec, lo, hi = patching.recovery_ci(ld_p, ld_clean, ld_corr, seed=4, n_boot=300)
    paired = np.stack([ld_p, ld_clean, ld_corr], axis=1)
    ratio = lambda r: (r[:, :, 0].mean(1) - r[:, :, 2].mean(1)) / (r[:, :, 1].mean(1) - r[:, :, 2].mean(1))  # noqa: E731
    assert (lo, hi) == pytest.approx(bootstrap_ci(paired, n_boot=300, seed=4, statistic=ratio))
    assert lo < rec < hi


def test_bootstrap_ci_paired_edge_cases():
    assert bootstrap_ci(np.ones((1, 3)), statistic=lambda r: r[:, :, 0].mean(1)) == (None, None)
    zero_gap = np.ones((8, 2))  # every resample's denominator is 0: no finite resample
    assert bootstrap_ci(zero_gap, statistic=lambda r: r[:, :, 0].mean(1) / (r[:, :, 1] - 1).mean(1)) == (None, None)
    with pytest.raises(ValueError):
        bootstrap_ci(np.ones((4, 2)))  # paired values need a statistic
