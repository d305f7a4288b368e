"""What a stored run was measured at, read from the results tables (no torch: the API's submit
checks read it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult, Run


def eval_lengths_in(s: Any, run_id: int) -> list[int]:
    """The eval lengths run ``run_id`` was measured at, read in session ``s``: the union of the
    ``eval_lengths`` of the settings rows its results point to; for results stored before schema
    0003 (no settings row), the keys of its ``behaviour`` (the suite writes them for exactly its
    eval lengths); [] when neither is there. What a probe or intervene job without eval lengths
    measures again (and its memory check reads)."""
    ids: set[int] = set()
    for model in (ProbeResult, InterventionResult, PatchingResult):
        ids |= {
            i
            for i in s.execute(
                select(model.settings_id).where(model.run_id == run_id, model.settings_id.is_not(None)).distinct()
            ).scalars()
            if i is not None  # the WHERE's already
        }
    lengths: set[int] = set()
    if ids:
        for got in s.execute(select(MeasureSettings.eval_lengths).where(MeasureSettings.id.in_(ids))).scalars():
            lengths |= {int(x) for x in got or []}
    if not lengths:
        run = s.get(Run, run_id)
        keys = list((run.behaviour or {}).keys()) if run is not None else []
        lengths = {int(k) for k in keys if str(k).isdigit()}
    return sorted(lengths)


def precisions_in(s: Any, run_id: int) -> dict[str, dict[str, int]]:
    """How many of run ``run_id``'s result rows were measured at each forward precision, per table
    (``{"patching_results": {"fp32": 455, "bf16": 65}}``; tables without rows left out): a re-measure
    at another precision replaces only the rows it measures again (docs/SCIENCE.md#precision).
    Rows without a settings row (before schema 0003) and settings without ``precision`` (it is
    stored only when bf16) are fp32."""
    out: dict[str, dict[str, int]] = {}
    for model in (ProbeResult, InterventionResult, PatchingResult):
        per_settings = s.execute(
            select(model.settings_id, func.count()).where(model.run_id == run_id).group_by(model.settings_id)
        ).all()
        ids = [i for i, _ in per_settings if i is not None]
        params = (
            dict(s.execute(select(MeasureSettings.id, MeasureSettings.params).where(MeasureSettings.id.in_(ids))).all())
            if ids
            else {}
        )
        counts: dict[str, int] = {}
        for settings_id, n in per_settings:
            precision = str((params.get(settings_id) or {}).get("precision", "fp32"))
            counts[precision] = counts.get(precision, 0) + int(n)
        if counts:
            out[model.__tablename__] = counts
    return out
