"""What a stored run was measured at, read from the results tables (no torch: the API's submit
checks read it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult, Run


def _rows_by_settings(s: Any, run_id: int) -> dict[str, dict[int | None, int]]:
    """Per results table with rows of run ``run_id``: how many point to each settings row (None:
    stored before schema 0003)."""
    out: dict[str, dict[int | None, int]] = {}
    for model in (ProbeResult, InterventionResult, PatchingResult):
        q = select(model.settings_id, func.count()).where(model.run_id == run_id).group_by(model.settings_id)
        if counts := {i: int(n) for i, n in s.execute(q).all()}:
            out[model.__tablename__] = counts
    return out


def _settings_ids(per_table: dict[str, dict[int | None, int]]) -> list[int]:
    return sorted({i for counts in per_table.values() for i in counts if i is not None})


def eval_lengths_in(s: Any, run_id: int) -> list[int]:
    """The eval lengths run ``run_id`` was measured at, read in session ``s``: the union of the
    ``eval_lengths`` of the settings rows its results point to; for results stored before schema
    0003 (no settings row), the keys of its ``behaviour`` (the suite writes them for exactly its
    eval lengths); [] when neither is there. What a probe or intervene job without eval lengths
    measures again (and its memory check reads)."""
    ids = _settings_ids(_rows_by_settings(s, run_id))
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
    per_table = _rows_by_settings(s, run_id)
    ids = _settings_ids(per_table)
    q = select(MeasureSettings.id, MeasureSettings.params).where(MeasureSettings.id.in_(ids))
    params = dict(s.execute(q).all()) if ids else {}
    out: dict[str, dict[str, int]] = {}
    for table, counts in per_table.items():
        for settings_id, n in counts.items():
            precision = str((params.get(settings_id) or {}).get("precision", "fp32"))
            out.setdefault(table, {})[precision] = out.get(table, {}).get(precision, 0) + n
    return out
