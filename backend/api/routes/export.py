"""Tidy export of anything a figure shows: CSV, JSON (records) or Parquet, via pandas."""

from __future__ import annotations

import io
import json
from enum import StrEnum
from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, Query, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy import select

from backend.api import across_seeds, queries
from backend.api.across_seeds import ResultCache
from backend.api.deps import UNAUTHORIZED, CacheDep, ReadAuth, SessionDep
from backend.api.query_params import EvalLengthQ, FamilyQ, MethodQ, PretrainedQ, RunIdQ, SeedQ, SuiteQ, TaskQ, TrainedQ
from backend.api.schemas import CurvePoint
from layerscope_core.csv_cells import csv_text
from store.models import InterventionResult, PatchingResult, ProbeResult

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


MEDIA = {
    Format.csv: "text/csv; charset=utf-8",
    Format.json: "application/json",
    Format.parquet: "application/vnd.apache.parquet",
}


RESULT_MODELS = {
    Resource.probes: ProbeResult,
    Resource.interventions: InterventionResult,
    Resource.patching: PatchingResult,
}
_CONTEXT_KEYS = set(select(*queries.RUN_CONTEXT).selected_columns.keys())


def _result_columns(model: Any) -> list[str]:
    """The keys of ``queries.results_across_runs`` rows: the result columns, the run context (a
    run column whose name a result column already has is deduplicated by SQLAlchemy, e.g. an
    intervention's own ``seed`` and the run's ``seed_1``), layer_name and depth."""
    cols = [c for c in model.__table__.columns if c.key != "id"]
    return list(select(*cols, *queries.RUN_CONTEXT).selected_columns.keys()) + ["layer_name", "depth"]


def _needed_columns(model: Any, fields: list[str]) -> set[str]:
    """Result columns to read for ``fields``: those asked for, ``layer`` (for layer_name and
    depth) and any whose name a run-context column shares (so the keys stay as in :data:`COLUMNS`)."""
    return {*fields, "layer"} | {c.key for c in model.__table__.columns if c.key in _CONTEXT_KEYS}


# The columns of each resource's rows, in order (``fields=`` picks from these; a test checks them
# against the rows the export really returns).
COLUMNS: dict[Resource, list[str]] = {
    Resource.runs: [c.key for c in queries.RUN_LIST_COLUMNS],
    **{r: _result_columns(m) for r, m in RESULT_MODELS.items()},
    Resource.curves: list(CurvePoint.model_fields),  # the rows /api/curves serves, in its field order
    Resource.profiles: [
        "suite",
        "task",
        "family",
        "pretrained",
        "eval_length",
        "n_layers",
        "profile_class",
        "seeds",
        "untrained_run_ids",
        "floor",
        "metric",
        "mean",
        "lo",
        "hi",
        "n",
    ],
}

FieldsQ = Annotated[
    str | None,
    Query(
        max_length=2000,
        pattern=r"^[A-Za-z0-9_,]*$",
        description="comma-separated columns to keep, in this order (default: all), e.g. run_id,layer,accuracy",
    ),
]


def parse_fields(resource: Resource, fields: str | None) -> list[str] | None:
    """``"a,b,a"`` → ``["a", "b"]``; an unknown column → 422 naming it (loc ``query.fields``)."""
    if fields is None:
        return None
    names = list(dict.fromkeys(f for f in fields.split(",") if f))
    allowed = COLUMNS[resource]
    unknown = [f for f in names if f not in allowed]
    if unknown or not names:
        msg = (
            f"unknown field(s) {', '.join(map(repr, unknown))} for {resource.value}"
            if unknown
            else "name at least one field"
        ) + f"; choose from {', '.join(allowed)}"
        raise RequestValidationError([{"type": "value_error", "loc": ("query", "fields"), "msg": msg, "input": fields}])
    return names


def rows_for(
    resource: Resource,
    session: Any,
    flt: queries.RunFilter,
    eval_length: list[int] | None,
    method: list[str] | None,
    cache: ResultCache | None = None,
    fields: list[str] | None = None,
) -> list[dict[str, Any]]:
    if resource is Resource.runs:
        return queries.list_runs(session, flt, None)[0]
    if resource in RESULT_MODELS:
        # only the asked-for result columns are read (plus ``layer``, for layer_name and depth)
        model = RESULT_MODELS[resource]
        columns = None if fields is None else _needed_columns(model, fields)
        return queries.results_across_runs(
            session, model, flt, eval_length, method if resource is Resource.interventions else None, columns
        )
    key = (resource.value, repr(flt), tuple(eval_length or ()))
    if resource is Resource.curves:
        compute = lambda: across_seeds.curves(session, flt, eval_length)  # noqa: E731
    else:
        compute = lambda: across_seeds.profiles(session, flt, eval_length)  # noqa: E731
    items = cache.get(session, key, compute) if cache is not None else compute()
    return items if resource is Resource.curves else across_seeds.profiles_tidy(items)


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
        return csv_text(_nested_to_json(df)).encode()
    buf = io.BytesIO()
    # Parquet keeps numbers typed; nested values (per_position, seeds, state) as JSON text so
    # every row has one schema.
    _nested_to_json(df).to_parquet(buf, index=False)
    return buf.getvalue()


@router.get(
    "/{resource}.{fmt}",
    response_class=Response,
    responses={
        200: {
            "content": {MEDIA[Format.csv]: {}, MEDIA[Format.json]: {}, MEDIA[Format.parquet]: {}},
            "description": "the rows as a file",
        },
        404: {"description": "a named suite is unknown (no run stored, none queued)"},
    },
    summary="Export runs, probes, curves, interventions, patching or profiles as CSV / JSON / Parquet",
)
def export(
    resource: Resource,
    fmt: Format,
    session: SessionDep,
    cache: CacheDep,
    task: TaskQ = None,
    family: FamilyQ = None,
    seed: SeedQ = None,
    suite: SuiteQ = None,
    pretrained: PretrainedQ = None,
    run_id: RunIdQ = None,
    eval_length: EvalLengthQ = None,
    method: MethodQ = None,
    fields: FieldsQ = None,
    trained: TrainedQ = None,
) -> Response:
    columns = parse_fields(resource, fields)
    queries.require_suites(session, suite)  # 404: a typo must not export as an empty file
    flt = queries.RunFilter(
        task=task, family=family, seed=seed, suite=suite, pretrained=pretrained, run_id=run_id, trained=trained
    )
    rows = rows_for(resource, session, flt, eval_length, method, cache, columns)
    if columns is not None:
        rows = [{k: r[k] for k in columns} for r in rows]
    body = encode(_finite(rows), fmt)
    return Response(
        content=body,
        media_type=MEDIA[fmt],
        headers={"Content-Disposition": f'attachment; filename="{resource.value}.{fmt.value}"'},
    )


def _finite(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import math

    def fix(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{k: fix(v) for k, v in r.items()} for r in rows]
