"""A run's step budget (docs/SCIENCE.md#training), pure arithmetic on its record: no torch, so the
dashboard process can say what budget a rebuilt run had without importing the training loop."""

from __future__ import annotations

from typing import Any


def step_budget(steps: int, seconds: float, stopped_early: bool, max_steps: int, max_seconds: float | None) -> int:
    """The steps a run's budget gave it on the machine that made it: its recorded ``steps`` when
    the budget stopped it (the wall-clock cap or ``max_steps``); when it stopped early at the
    criterion, the steps its cap would have allowed at its recorded rate,
    ``steps × max_seconds / seconds`` (``max_steps`` without a cap), at most ``max_steps``."""
    if not stopped_early:
        return steps
    if max_seconds is None or seconds <= 0:
        return max_steps
    return max(steps, min(max_steps, int(steps * max_seconds / seconds)))


def recorded_step_budget(first: dict[str, Any], train_config: dict[str, Any]) -> int:
    """The step budget of a rebuilt run (``made_with["rebuilt_from"]`` = ``first``): the one it
    records, else (rebuilt by code that did not record it) :func:`step_budget` of its first
    record and its ``train_config``."""
    if first.get("step_budget") is not None:
        return int(first["step_budget"])
    return step_budget(
        int(first["steps"]),
        float(first.get("train_seconds") or 0.0),
        bool(first.get("stopped_early")),
        int(train_config.get("max_steps") or first["steps"]),
        train_config.get("max_seconds"),
    )
