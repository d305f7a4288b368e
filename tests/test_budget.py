"""science.budget: a run's step budget, defined once and importable without torch (the dashboard uses it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from science import budget, training

CASES = [
    # steps, seconds, stopped_early, max_steps, max_seconds, expected budget
    (500, 20.0, False, 10_000, 75.0, 500),
    (500, 20.0, True, 10_000, 75.0, 1875),  # 500 × 75 / 20
    (500, 20.0, True, 1_000, 75.0, 1000),  # capped at max_steps
    (500, 0.0, True, 10_000, 75.0, 10_000),  # no recorded time: max_steps
    (500, 20.0, True, 10_000, None, 10_000),  # no wall-clock cap: max_steps
    (500, 200.0, True, 10_000, 75.0, 500),  # never below the steps it took
]


@pytest.mark.parametrize("case", CASES)
def test_step_budget_values(case: tuple) -> None:
    *args, expected = case
    assert budget.step_budget(*args) == expected


def test_recorded_step_budget() -> None:
    first = {"steps": 500, "train_seconds": 20.0, "stopped_early": True}
    cfg = {"max_steps": 10_000, "max_seconds": 75.0}
    assert budget.recorded_step_budget({**first, "step_budget": 900}, cfg) == 900
    assert budget.recorded_step_budget(first, cfg) == 1875
    assert budget.recorded_step_budget({**first, "train_seconds": None}, cfg) == 10_000


def test_one_definition() -> None:
    """The training loop keeps no copy of its own (it once held a verbatim twin kept equal by a test)."""
    assert not hasattr(training, "step_budget")
    assert not hasattr(training, "recorded_step_budget")


def test_budget_imports_no_torch() -> None:
    code = "import sys, science.budget; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
