"""One definition per result row: ``science.records`` is what the science returns; the ORM table
(``store.models``), the API schema (``backend.api.schemas``, derived from the record) and the
results bundle (the table's columns) carry exactly its fields, plus the fields listed below.

A field added to a record and not to its table (or the reverse) fails here, not in a worker's
insert or in an API response.
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields

import pytest
from sqlalchemy import JSON

from backend.api.schemas import InterventionOut, PatchingOut, ProbeOut
from science.records import InterventionRecord, PatchingRecord, ProbeRecord
from store.models import InterventionResult, PatchingResult, ProbeResult

# Columns the store adds to every result row: its primary key, the run it belongs to, and the
# measure_settings row it was made with (docs/DESIGN.md). Never part of what the science returns.
STORAGE_ONLY = {"id", "run_id", "settings_id"}
# Fields the API adds to every served row: the run it belongs to, the layer's display name and
# normalised depth (layerscope_core.layers), and for probes and patching the TransformerLens-style
# site name (layerscope_core.sites). The API serves no primary key and no settings_id.
API_ONLY = {
    ProbeOut: {"run_id", "layer_name", "depth", "site_name"},
    InterventionOut: {"run_id", "layer_name", "depth"},
    PatchingOut: {"run_id", "layer_name", "depth", "site_name"},
}
# The fields of science.probes.ProbeReport that are not stored: the largest gradient entry at the
# optimiser's stop (a convergence diagnostic), the fitted probe object (its weights go to
# result_weights) and the test tokens' best constant guess and count (what an edit's removal line
# reads: stored as the intervention row's refit_line, not per probe). The record adds where, under which settings and by which measurement code:
# eval_length, config_hash, measurement_version.
REPORT_ONLY = {"grad_max", "probe", "best_guess", "n_test_tokens"}
RECORD_ONLY = {"eval_length", "config_hash", "measurement_version"}

CASES = [
    (ProbeRecord, ProbeResult, ProbeOut),
    (InterventionRecord, InterventionResult, InterventionOut),
    (PatchingRecord, PatchingResult, PatchingOut),
]
IDS = [c[0].__name__ for c in CASES]


def record_fields(record: type) -> set[str]:
    return {f.name for f in fields(record)}


def nullable(tp: object) -> bool:
    return type(None) in typing.get_args(tp)


def base_type(tp: object) -> type:
    """``int | None`` → int, ``list[float | None]`` → list, ``dict[str, …] | None`` → dict."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        assert len(args) == 1, tp
        tp = args[0]
    return typing.get_origin(tp) or tp


@pytest.mark.parametrize(("record", "table", "schema"), CASES, ids=IDS)
def test_the_table_stores_exactly_the_record(record, table, schema) -> None:
    columns = {c.key for c in table.__table__.columns}
    assert columns - STORAGE_ONLY == record_fields(record), (
        f"{table.__tablename__} and {record.__name__} differ: only in the table "
        f"{sorted(columns - STORAGE_ONLY - record_fields(record))}, only in the record "
        f"{sorted(record_fields(record) - columns)}"
    )
    assert columns >= STORAGE_ONLY


@pytest.mark.parametrize(("record", "table", "schema"), CASES, ids=IDS)
def test_each_column_has_the_record_fields_type_and_nullability(record, table, schema) -> None:
    hints = typing.get_type_hints(record)
    for name, tp in hints.items():
        col = table.__table__.columns[name]
        assert col.nullable == nullable(tp), f"{table.__tablename__}.{name}: nullable {col.nullable}, record {tp}"
        want = base_type(tp)
        if isinstance(col.type, JSON):
            assert want in (list, dict), f"{name}: a JSON column for {tp}"
        else:
            assert col.type.python_type is want, f"{table.__tablename__}.{name}: {col.type} for {tp}"


@pytest.mark.parametrize(("record", "table", "schema"), CASES, ids=IDS)
def test_the_api_serves_the_record_with_its_types_and_descriptions(record, table, schema) -> None:
    served = set(schema.model_fields)
    assert served - API_ONLY[schema] == record_fields(record)
    assert API_ONLY[schema] <= served
    hints = typing.get_type_hints(record)
    for f in fields(record):
        info = schema.model_fields[f.name]
        assert info.annotation == hints[f.name], f.name
        assert info.is_required(), f"{schema.__name__}.{f.name}: the API serves every stored column"
        assert info.description == f.metadata.get("description")
    assert not (API_ONLY[schema] & STORAGE_ONLY - {"run_id"})  # no primary key, no settings_id


@pytest.mark.parametrize(("record", "table", "schema"), CASES, ids=IDS)
def test_the_bundle_carries_every_field_of_the_record(record, table, schema) -> None:
    from backend.bundle import for_table, table_row

    hints = typing.get_type_hints(record)
    sample = {"int": 1, "float": 0.5, "bool": True, "str": "x", "list": [0.5], "dict": {"a": 0.5}}
    values = {name: sample[base_type(tp).__name__] for name, tp in hints.items()}
    obj = table(id=7, run_id=3, settings_id=None, **values)
    exported = table_row(obj)
    assert set(exported) == record_fields(record) | STORAGE_ONLY
    imported = for_table(table, exported)
    assert set(imported) == record_fields(record) | STORAGE_ONLY - {"id"}
    assert record(**{k: imported[k] for k in record_fields(record)}) == values


def test_the_probe_record_is_the_probe_report_where_it_is_stored() -> None:
    from science.probes import ProbeReport

    report = {f.name for f in fields(ProbeReport)}
    assert report - REPORT_ONLY == record_fields(ProbeRecord) - RECORD_ONLY
    assert report >= REPORT_ONLY and not (RECORD_ONLY & report)


def test_a_schema_cannot_shadow_a_record_field() -> None:
    from pydantic import Field

    from backend.api.schemas import record_schema

    with pytest.raises(TypeError, match="already come from"):
        record_schema("X", PatchingRecord, "x", extra={"note": (str, Field())})
    with pytest.raises(TypeError, match="not a dataclass"):
        record_schema("X", dict, "x", extra={})
