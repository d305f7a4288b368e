"""Which runs are *measured*: every one of the three measurement kinds (probe, intervention
and patching results) is stored for them. A run's ``status`` says how far its job got; it is not
this (an imported run can be 'complete' with no rows, a 'trained' one can be untrained), so
counts shown to users read the rows themselves."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import InterventionResult, PatchingResult, ProbeResult

MEASUREMENT_TABLES = (ProbeResult, InterventionResult, PatchingResult)


def measured_run_ids(session: Session, run_ids: Iterable[int], kinds: int = len(MEASUREMENT_TABLES)) -> set[int]:
    """The ids among ``run_ids`` with at least one row in each of the first ``kinds`` measurement
    tables (probe, intervention, patching): 3 = measured, 1 = has probe results."""
    ids = set(run_ids)
    for model in MEASUREMENT_TABLES[:kinds]:
        if not ids:
            break
        ids &= set(session.execute(select(model.run_id).where(model.run_id.in_(ids)).distinct()).scalars())
    return ids
