"""Tidy export of anything a figure shows: CSV, JSON (records) or Parquet, via pandas."""

from __future__ import annotations

import io
import json
from enum import StrEnum
from typing import Any

import pandas as pd
from fastapi import APIRouter, Response

from backend.api import aggregate, queries
from backend.api.aggregate import ResultCache
from backend.api.deps import UNAUTHORIZED, CacheDep, ReadAuth, SessionDep
from backend.api.params import EvalLengthQ, FamilyQ, MethodQ, PretrainedQ, RunIdQ, SeedQ, SuiteQ, TaskQ
from backend.db.models import InterventionResult, PatchingResult, ProbeResult

router = APIRouter(prefix="/export", tags=["export"], dependencies=[ReadAuth], responses=UNAUTHORIZED)


class Resource(StrEnum):
    runs = "runs"
    probes = "probes"
    curves = "curves"
    interventions = "interventions"
    patching = "patching"
    profiles = "profiles"


class Format(StrEnum):
    csv = "csv"
    json = "json"
    parquet = "parquet"


MEDIA = {Format.csv: "text/csv; charset=utf-8", Format.json: "application/json",
         Format.parquet: "application/vnd.apache.parquet"}


def rows_for(resource: Resource, session: Any, flt: queries.RunFilter, eval_length: list[int] | None,
             method: list[str] | None, cache: ResultCache | None = None) -> list[dict[str, Any]]:
    if resource is Resource.runs:
        return queries.list_runs(session, flt, None)[0]
    if resource is Resource.probes:
        return queries.results_across_runs(session, ProbeResult, flt, eval_length)
    if resource is Resource.interventions:
        return queries.results_across_runs(session, InterventionResult, flt, eval_length, method)
    if resource is Resource.patching:
        return queries.results_across_runs(session, PatchingResult, flt, eval_length)
    key = (resource.value, repr(flt), tuple(eval_length or ()))
    if resource is Resource.curves:
        compute = lambda: aggregate.curves(session, flt, eval_length)  # noqa: E731
    else:
        compute = lambda: aggregate.profiles(session, flt, eval_length)  # noqa: E731
    items = cache.get(session, key, compute) if cache is not None else compute()
    return items if resource is Resource.curves else aggregate.profiles_tidy(items)


def _nested_to_json(df: pd.DataFrame) -> pd.DataFrame:
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (list, dict))).any():
            df[col] = df[col].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    return df


def encode(rows: list[dict[str, Any]], fmt: Format) -> bytes:
    if fmt is Format.json:
        return json.dumps(rows, default=str, allow_nan=False).encode()
    df = pd.DataFrame.from_records(rows)
    for col in df.columns:  # timestamps as ISO text: stable across CSV readers
        if pd.api.types.is_datetime64_any_dtype(df[col]):
            df[col] = df[col].map(lambda t: t.isoformat() if pd.notna(t) else None)
    if fmt is Format.csv:
        return _nested_to_json(df).to_csv(index=False).encode()
    buf = io.BytesIO()
    # Parquet keeps numbers typed; nested values (per_position, seeds, state) as JSON text so
    # every row has one schema.
    _nested_to_json(df).to_parquet(buf, index=False)
    return buf.getvalue()


@router.get(
    "/{resource}.{fmt}",
    response_class=Response,
    responses={200: {"content": {MEDIA[Format.csv]: {}, MEDIA[Format.json]: {}, MEDIA[Format.parquet]: {}},
                     "description": "the rows as a file"}},
    summary="Export runs, probes, curves, interventions, patching or profiles as CSV / JSON / Parquet",
)
def export(
    resource: Resource, fmt: Format, session: SessionDep, cache: CacheDep, task: TaskQ = None, family: FamilyQ = None,
    seed: SeedQ = None, suite: SuiteQ = None, pretrained: PretrainedQ = None, run_id: RunIdQ = None,
    eval_length: EvalLengthQ = None, method: MethodQ = None,
) -> Response:
    flt = queries.RunFilter(task=task, family=family, seed=seed, suite=suite, pretrained=pretrained, run_id=run_id)
    rows = rows_for(resource, session, flt, eval_length, method, cache)
    body = encode(_finite(rows), fmt)
    return Response(content=body, media_type=MEDIA[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{resource.value}.{fmt.value}"'})


def _finite(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import math

    def fix(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{k: fix(v) for k, v in r.items()} for r in rows]
