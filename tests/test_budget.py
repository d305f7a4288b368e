"""science.budget (torch-free, for the dashboard) gives the step budgets science.training gives."""

from __future__ import annotations

import pytest

from science import budget, training

CASES = [
    # steps, seconds, stopped_early, max_steps, max_seconds
    (500, 20.0, False, 10_000, 75.0),
    (500, 20.0, True, 10_000, 75.0),  # 500 × 75 / 20 = 1875
    (500, 20.0, True, 1_000, 75.0),  # capped at max_steps
    (500, 0.0, True, 10_000, 75.0),  # no recorded time: max_steps
    (500, 20.0, True, 10_000, None),  # no wall-clock cap: max_steps
    (500, 200.0, True, 10_000, 75.0),  # never below the steps it took
]


@pytest.mark.parametrize("case", CASES)
def test_step_budget_matches_training(case: tuple) -> None:
    assert budget.step_budget(*case) == training.step_budget(*case)


def test_step_budget_values() -> None:
    assert [budget.step_budget(*c) for c in CASES] == [500, 1875, 1000, 10_000, 10_000, 500]


def test_recorded_step_budget_matches_training() -> None:
    first = {"steps": 500, "train_seconds": 20.0, "stopped_early": True}
    cfg = {"max_steps": 10_000, "max_seconds": 75.0}
    for rec in (first, {**first, "step_budget": 900}, {**first, "train_seconds": None}):
        assert budget.recorded_step_budget(rec, cfg) == training.recorded_step_budget(rec, cfg)
    assert budget.recorded_step_budget({**first, "step_budget": 900}, cfg) == 900
    assert budget.recorded_step_budget(first, cfg) == 1875
