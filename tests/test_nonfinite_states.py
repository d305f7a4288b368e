"""States holding NaN or inf, and labels outside the classes, are refused with a ValueError that
says so — by every edit method, a probe, ``probe_layers`` (naming the layer) and a design of rows
on disk — instead of a raw library error or a fit that converges to the majority class and reads
as "not decodable" (what every probe and INLP returned on such states before)."""

from __future__ import annotations

import pytest
import torch

from layerscope_core.registry import METHODS
from science.interventions import fit_edit
from science.probes import fit_probe
from science.probes.design import standardise_rows
from science.probes.layerwise import probe_layers
from science.spill import SpilledRows


def _states(n: int = 400, d: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (n,), generator=g)
    return torch.randn(n, d, generator=g) + y[:, None].float(), y


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_every_edit_method_refuses_nonfinite_states(method, bad) -> None:
    X, y = _states()
    X[17, 5] = bad
    with pytest.raises(
        ValueError, match=rf"{method}: the states X hold NaN or inf in 1 of 12 features \(first: \[5\]\)"
    ):
        fit_edit(method, X, y, 2)


@pytest.mark.parametrize("labels", ["above", "negative"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_edit_method_refuses_labels_outside_the_classes(method, labels) -> None:
    X, y = _states()
    y = y + 2 if labels == "above" else y - 1
    with pytest.raises(ValueError, match="labels must lie in 0..1, got"):
        fit_edit(method, X, y, 2)


def test_a_probe_and_probe_layers_refuse_them() -> None:
    X, y = _states()
    X[3, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf in 1 of 12 features"):
        fit_probe(X, y, 2)
    H = torch.randn(30, 8, 6)
    H[2, 7, 4] = float("inf")
    with pytest.raises(ValueError, match=r"layer 3: the states hold NaN or inf in 1 of 6 features \(first: \[4\]\)"):
        probe_layers({1: torch.randn(30, 8, 6), 3: H}, torch.randint(0, 2, (30, 8)), 2)


def test_rows_on_disk_are_checked_too() -> None:
    X, _ = _states(64, 6)
    X[10, 2] = float("nan")
    with SpilledRows(6) as rows:
        rows.append(X)
        with pytest.raises(ValueError, match="NaN or inf in 1 of 6 features"):
            standardise_rows(rows)


@pytest.mark.parametrize("max_rounds", [-1, -3, True, 2.5])
def test_inlp_refuses_a_negative_or_fractional_round_budget(max_rounds) -> None:
    X, y = _states()
    with pytest.raises(ValueError, match="inlp: max_rounds must be a whole number ≥ 0"):
        fit_edit("inlp", X, y, 2, max_rounds=max_rounds)
    assert fit_edit("inlp", X, y, 2, max_rounds=0).info["n_rounds"] == 0  # the first probe only


def test_finite_states_are_fitted_as_before() -> None:
    X, y = _states()
    assert fit_probe(X, y, 2).accuracy(X, y) > 0.8
