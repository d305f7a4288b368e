"""``fit_edit`` with too few rows is a ValueError naming the minimum (not LEACE's bare
AssertionError or INLP's "0 samples"), for every method."""

from __future__ import annotations

import pytest
import torch

from science.interventions import METHODS, fit_edit


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n_rows", [0, 1])
def test_too_few_rows_name_the_minimum(method, n_rows) -> None:
    X = torch.randn(n_rows, 6)
    y = torch.zeros(n_rows, dtype=torch.long)
    with pytest.raises(ValueError, match=r"at least 2 rows") as info:
        fit_edit(method, X, y, 2, k=2)
    assert method in str(info.value) and f"got {n_rows}" in str(info.value)


@pytest.mark.parametrize("method", METHODS)
def test_two_rows_are_enough(method) -> None:
    X = torch.tensor([[1.0, 0.0, 2.0], [-1.0, 0.5, 0.0]])
    edit = fit_edit(method, X, torch.tensor([0, 1]), 2, k=1)
    assert edit.method == method
