"""How /'s runs table names a run's kind and why its training stopped: a random-init
control (docs/SCIENCE.md#controls) gets its own badge, so no one reads it as a trained model,
and the stop reason (docs/SCIENCE.md#plateau) is shown beside the trained column."""

from __future__ import annotations

from typing import Any

CONTROL_BADGE = {"init": "control: at init"}
# ``runs.stop_reason`` → the words in the table (unknown reasons are shown as stored)
STOP_REASONS = {
    "trained": "trained (criterion)",
    "plateau": "plateau",
    "budget": "budget (still improving)",
    "time_limit": "time limit",
    "rebuild_step": "rebuild step",
}
CONTROLS_FILTER = (("include", "runs and controls"), ("exclude", "hide controls"), ("only", "controls only"))


def control_badge(run: dict[str, Any]) -> str:
    """``control: at init`` for a random-init control, ``""`` for a run."""
    kind = run.get("control")
    return CONTROL_BADGE.get(kind, f"control: {kind}") if kind else ""


def stop_reason_label(run: dict[str, Any]) -> str:
    """Why training stopped, in words; ``not trained`` for a control, ``–`` when the
    run predates the record."""
    if run.get("control"):
        return "not trained"  # the control column names it
    reason = run.get("stop_reason")
    return "–" if not reason else STOP_REASONS.get(reason, str(reason))
