"""The checks a results bundle's rows pass before any of them is read into a database
(``backend.bundle.read_bundle``: ``layerscope import``, ``report``, ``serve BUNDLE`` and
``layerscope.results.open`` all read through it). A bundle that fails one is refused as a whole,
in one line naming the file, the row, the field and why: nothing is written.

- **Types**: every table is validated, strictly (no ``"1"`` for 1, no ``true`` for 1), against the
  definition of its rows: ``runs`` against the API's run (``backend.api.schemas.RunDetail``), the
  result tables and the settings rows against their records in ``science.records``.
- **Ranges**: the ``bounds`` of the records' fields (accuracies and p-values 0..1, percentage
  points ±100, counts ≥ 0, lengths ≥ 1) and :data:`RUN_BOUNDS` for a run's columns.
- **Consistency a database cannot enforce**: run ids and config hashes unique; every result row
  belongs to one of the bundle's runs, at a layer that run has (``-1..n_layers-1``; ``-2`` only
  for ``conv1d_removal``; a patching site that has the layer, ``layerscope_core.sites``);
  positions inside their eval length; checkpoint and artifact ids 64 hex characters.
- **Storable text and numbers**: a name column (``String``: suite, name, family, task, site, …)
  and each tag follows the text rule of ``layerscope_core.text`` (no control characters: a suite
  named so could never be queried) and fits its column; no string anywhere is invalid Unicode,
  no number anywhere is NaN or infinite, nothing nests too deep (``layerscope_core.json_checks``).
  The manifest's ``suite`` and each run's follow the suite-name rule of
  ``layerscope_core.suite_names`` (a name that is a URL path segment and a file name as it stands).
- **Training states in flight** (``training/<run hash>.pt`` + ``.json``, :func:`check_in_flight`):
  each file as the manifest's ``in_flight`` entry records it (size and sha256; a bundle written
  before the records has none to check), each checkpoint with its note, each note a JSON object.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, fields
from functools import cache
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, TypeAdapter, ValidationError, create_model
from sqlalchemy import Float, Integer, String

from layerscope_core.json_checks import MAX_JSON_DEPTH, value_errors
from layerscope_core.layers import ALL_LAYERS, EMB
from layerscope_core.sites import site_name
from layerscope_core.suite_names import suite_name_problem
from layerscope_core.text import readable_error
from science.records import (
    ACC,
    COUNT,
    LENGTH,
    BehaviourRecord,
    InterventionRecord,
    MeasureSettingsRecord,
    PatchingRecord,
    ProbeRecord,
)
from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult, ResultWeights, Run

__all__ = ["RUN_BOUNDS", "check_tables", "check_in_flight"]

RUN_BOUNDS: dict[str, tuple[Any, Any]] = {
    "n_layers": (1, None),  # a model has at least one block
    "d_model": (1, None),
    "n_params": COUNT,
    "seed": COUNT,
    "steps": COUNT,
    "train_seconds": (0.0, None),
    "heldout_acc": ACC,
    "early_stop_acc": ACC,
    "best_heldout_acc": ACC,
    "best_step": COUNT,
}
"""The range of a run's columns (``store.models.Run``; a run has no record in ``science.records``)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ESCAPE = re.compile(rb"\\[bfnrt]|\\u00[0-9a-fA-F]{2}|\\u[dD][89a-fA-F]")  # a control character or a surrogate
_C1 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080..U+009F in UTF-8
# a number past a float (1e400) where it ends (a hex hash ends with a quote)
_BIG_NUMBER = re.compile(rb"[eE]\+?[0-9]{3,}(?=[,\]}\s])")
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_CONV1D = "conv1d_removal"  # the one edit whose layer may be -2 (every layer)
_MAX_SHOWN = 60  # characters of a bad value shown in the message
_SETTINGS_BOUNDS = {"eval_lengths": LENGTH, "patch_eval_length": LENGTH, "fit_length": LENGTH}


class _ResultWeightsRow(BaseModel):
    """A ``result_weights`` row (no science record: what a probe or an edit learned)."""

    id: int
    run_id: int
    kind: Literal["probe", "edit"]
    method: str = ""
    layer: int
    eval_length: int
    artifact_id: str
    config_hash: str


def _row_model(record: type, table: Any, **storage: Any) -> type[BaseModel]:
    """A bundle row of ``table``: the record's fields, then ``storage`` (the keys the record has
    not). A field a bundle of an older schema lacks takes the record's default, else its
    column's (as the import does); with neither it is required."""
    hints = get_type_hints(record)
    own: dict[str, Any] = {}
    for f in fields(record):
        if not f.init or f.name in storage:  # derived (MeasureSettingsRecord.config_hash), or a key
            continue
        column = table.__table__.columns.get(f.name)
        default = f.default
        if default is MISSING and column is not None and column.server_default is not None:
            default = column.server_default.arg
        own[f.name] = (hints[f.name], ... if default is MISSING else default)
    return create_model(f"{record.__name__}Row", **own, **storage)


@cache
def _row_types() -> dict[str, TypeAdapter]:
    """table → the validator of its rows (a list). A run has no record: its row is the API's."""
    from backend.api.schemas import RunDetail

    result = {"id": (int, ...), "run_id": (int, ...), "settings_id": (int | None, None)}
    return {
        Run.__tablename__: _list_of(RunDetail),
        MeasureSettings.__tablename__: _list_of(
            _row_model(MeasureSettingsRecord, MeasureSettings, id=(int, ...), config_hash=(str, ...))
        ),
        ProbeResult.__tablename__: _list_of(_row_model(ProbeRecord, ProbeResult, **result)),
        InterventionResult.__tablename__: _list_of(_row_model(InterventionRecord, InterventionResult, **result)),
        PatchingResult.__tablename__: _list_of(_row_model(PatchingRecord, PatchingResult, **result)),
        ResultWeights.__tablename__: _list_of(_ResultWeightsRow),
    }


def _list_of(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    """The validator of a list of ``model`` rows."""
    return TypeAdapter(list[model])  # type: ignore[valid-type]  # model: a class, most made at run time (_row_model)


def _bounds(record: type) -> dict[str, tuple[Any, Any]]:
    return {f.name: f.metadata["bounds"] for f in fields(record) if f.metadata.get("bounds")}


_TABLES: dict[str, tuple[Any, dict[str, tuple[Any, Any]]]] = {  # table → (SQLAlchemy model, bounds)
    Run.__tablename__: (Run, RUN_BOUNDS),
    MeasureSettings.__tablename__: (MeasureSettings, _SETTINGS_BOUNDS),
    ProbeResult.__tablename__: (ProbeResult, _bounds(ProbeRecord)),
    InterventionResult.__tablename__: (InterventionResult, _bounds(InterventionRecord)),
    PatchingResult.__tablename__: (PatchingResult, _bounds(PatchingRecord)),
    ResultWeights.__tablename__: (ResultWeights, {"eval_length": LENGTH}),
}
_BEHAVIOUR_BOUNDS = _bounds(BehaviourRecord)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


class _Problems:
    """The problems found, each ``tables/<table>.json: <table>[i] (id N).field = value: why``."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, table: str, rows: list[Any], loc: tuple[Any, ...], why: str, value: Any = MISSING) -> None:
        where = f"tables/{table}.json"
        if loc and isinstance(loc[0], int):
            i, loc = loc[0], loc[1:]
            row = rows[i] if 0 <= i < len(rows) else None
            rid = row.get("id") if isinstance(row, dict) and isinstance(row.get("id"), int) else None
            where += f": {table}[{i}]" + (f" (id {rid})" if rid is not None else "")
        if loc:
            where += "." + ".".join(str(p) for p in loc) if ": " in where else ": " + ".".join(str(p) for p in loc)
        self.found.append(f"{where}{'' if value is MISSING else ' = ' + _shown(value)}: {why}")


def _within(value: Any, bounds: tuple[Any, Any]) -> bool:
    """Every number in ``value`` (a number, or a list / dict of them; None skipped) within ``bounds``."""
    lo, hi = bounds
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
    for v in items:
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if number and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            return False
    return True


def _span(bounds: tuple[Any, Any]) -> str:
    lo, hi = bounds
    return f"must be at least {lo}" if hi is None else f"must be within {lo}..{hi}"


def _check_types(table: str, raw: bytes, rows: list[Any], problems: _Problems) -> None:
    try:
        _row_types()[table].validate_json(raw, strict=True)
    except ValidationError as exc:
        for e in exc.errors(include_url=False):
            if e["type"] == "json_invalid":  # a lone surrogate escape (json.loads read it: named already)
                continue
            value = MISSING if e["type"] == "missing" else e.get("input", MISSING)
            problems.add(table, rows, tuple(e["loc"]), readable_error(e["msg"]), value)


def _may_hold_bad_values(raw: bytes) -> bool:
    """Whether the JSON file ``raw`` may hold a control character, a lone surrogate, a number
    that is not finite or nesting deeper than a row may (then :func:`value_errors` looks row by
    row). Byte scans only: each needs in the file an escape (``\\n``, ``\\u0007``,
    ``\\ud800``; json.dumps escapes other non-ASCII text as ``\\uXXXX``, which needs no look),
    U+007F..U+009F as such, ``NaN`` / ``Infinity``, a number with a 3-digit exponent, or brackets
    nested that deep."""
    if (b"\\" in raw and _ESCAPE.search(raw)) or b"\x7f" in raw or (b"\xc2" in raw and _C1.search(raw)):
        return True
    if b"NaN" in raw or b"Infinity" in raw:
        return True
    if _BIG_NUMBER.search(raw):
        return True
    # strings kept (a bracket in one only makes this look): innermost pairs peeled a level a pass
    brackets = raw.translate(None, _NOT_BRACKETS)
    for _ in range(MAX_JSON_DEPTH + 1):  # the file's list, then a row
        brackets = _PAIR.sub(b"", brackets)
    return bool(brackets)


def _check_storable(table: str, rows: list[dict[str, Any]], raw: bytes, problems: _Problems) -> None:
    """The text rule on name columns and tags, column lengths, integers a database column holds,
    ranges (``bounds``), and anywhere: valid Unicode, finite numbers, no deep nesting (looked
    for row by row only where :func:`_may_hold_bad_values`)."""
    model, bounds = _TABLES[table]
    names = {c.key: c.type.length for c in model.__table__.columns if isinstance(c.type, String)}
    integers = [c.key for c in model.__table__.columns if isinstance(c.type, Integer)]
    floats = [c.key for c in model.__table__.columns if isinstance(c.type, Float)]
    suspect = _may_hold_bad_values(raw)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):  # the type check names it
            continue
        for e in value_errors(row, prefix=(i,)) if suspect else ():
            column = e["loc"][1] if len(e["loc"]) > 1 else None
            if e["type"] != "string_control_character" or column in names or column == "tags":
                value = row.get(column, MISSING) if len(e["loc"]) == 2 and column is not None else MISSING
                problems.add(table, rows, e["loc"], e["msg"], value)
        for column, length in names.items():
            v = row.get(column)
            if isinstance(v, str) and length is not None and len(v) > length:
                problems.add(table, rows, (i, column), f"longer than its column takes ({len(v)} > {length} characters)")
        for column in integers + floats:
            v = row.get(column)
            if isinstance(v, int) and not -(2**63) <= v < 2**63:
                problems.add(table, rows, (i, column), "too large for a database integer (64 bits)", v)
        for column in () if suspect else floats:  # "1111…(309 digits).0": no exponent, not suspect
            v = row.get(column)
            if isinstance(v, float) and not math.isfinite(v):
                problems.add(table, rows, (i, column), "must be a finite number", v)
        for column, span in bounds.items():
            if row.get(column) is not None and not _within(row[column], span):
                problems.add(table, rows, (i, column), _span(span), row[column])


def _layer_problem(layer: int, run: dict[str, Any], *, every: bool) -> str | None:
    """Why ``layer`` is no layer of ``run`` (None: it is one); ``every``: -2 (every layer) allowed."""
    n = run["n_layers"]
    if EMB <= layer < n or (every and layer == ALL_LAYERS):
        return None
    every_text = ", -2 (every layer)" if every else ""
    return f"not a layer of run {run['id']} ({n} blocks): -1 (emb){every_text} or a block 0..{n - 1}"


def _check_runs(rows: list[dict[str, Any]], problems: _Problems) -> dict[int, dict[str, Any]]:
    """Unique ids and config hashes, suite names, checkpoint ids, family and task as the run's own
    configs record them, behaviour ranges; returns id → run."""
    by_id: dict[int, dict[str, Any]] = {}
    hashes: dict[str, int] = {}
    for i, run in enumerate(rows):
        if run["id"] in by_id:
            problems.add("runs", rows, (i, "id"), "another run of the bundle has this id", run["id"])
        if run["config_hash"] in hashes:
            why = f"runs[{hashes[run['config_hash']]}] has this config hash too (a run's unique key)"
            problems.add("runs", rows, (i, "config_hash"), why, run["config_hash"])
        by_id.setdefault(run["id"], run)
        hashes.setdefault(run["config_hash"], i)
        if isinstance(run.get("suite"), str) and (bad_name := suite_name_problem(run["suite"])):
            problems.add("runs", rows, (i, "suite"), bad_name, run["suite"])
        if run.get("checkpoint_id") is not None and not _HEX64.fullmatch(run["checkpoint_id"]):
            problems.add(
                "runs", rows, (i, "checkpoint_id"), "not a checkpoint id (64 hex characters)", run["checkpoint_id"]
            )
        for column, config, key in (("family", "model_config", "family"), ("task", "train_config", "task")):
            recorded = (run.get(config) or {}).get(key) if isinstance(run.get(config), dict) else None
            if recorded is not None and run.get(column) != recorded:  # a renamed run is another model's
                why = f"not the {key} its {config} records ({recorded!r})"
                problems.add("runs", rows, (i, column), why, run.get(column))
        for length, entry in (run.get("behaviour") or {}).items():
            if not isinstance(entry, dict):
                problems.add("runs", rows, (i, "behaviour", length), "must be an object", entry)
                continue
            for key, span in _BEHAVIOUR_BOUNDS.items():
                if entry.get(key) is not None and not _within(entry[key], span):
                    problems.add("runs", rows, (i, "behaviour", length, key), _span(span), entry[key])
    return by_id


def _check_results(
    table: str, rows: list[dict[str, Any]], runs: dict[int, dict[str, Any]], problems: _Problems
) -> None:
    """Each row's run, layer, site and positions against the run it belongs to."""
    for i, row in enumerate(rows):
        run = runs.get(row["run_id"])
        if run is None:
            problems.add(table, rows, (i, "run_id"), "no run of the bundle has this id", row["run_id"])
            continue
        every = row.get("method") == _CONV1D  # -2: every layer, conv1d removal only
        why = _layer_problem(row["layer"], run, every=every)
        if why is None and table == PatchingResult.__tablename__:
            try:
                site_name(row.get("site", "resid_post"), row["layer"])
            except ValueError as exc:
                why = str(exc)
        if why is not None:
            problems.add(table, rows, (i, "layer"), why, row["layer"])
        for column in ("position", "corrupt_position"):
            if isinstance(row.get(column), int) and row[column] >= row["eval_length"]:
                why = (
                    f"past the end of its eval length {row['eval_length']} (positions are 0..{row['eval_length'] - 1})"
                )
                problems.add(table, rows, (i, column), why, row[column])
        if table == ResultWeights.__tablename__ and not _HEX64.fullmatch(row["artifact_id"]):
            problems.add(table, rows, (i, "artifact_id"), "not an artifact id (64 hex characters)", row["artifact_id"])


def check_tables(manifest: dict[str, Any], raw: dict[str, bytes], tables: dict[str, list[Any]]) -> list[str]:
    """The problems of a bundle's tables (``raw``: the JSON files as read, ``tables``: them
    parsed; both by table name), each naming its file, row, field and why; ``[]``: none.
    The checks across rows run only once every row has its types."""
    problems = _Problems()
    suite = manifest.get("suite")
    why = suite_name_problem(suite) if isinstance(suite, str) else "must be a string"
    if suite is not None and why:
        problems.found.append(f"manifest.json: suite = {_shown(suite)}: {why}")
    for table, rows in tables.items():
        if table in _TABLES and table in raw:
            _check_storable(table, rows, raw[table], problems)
            _check_types(table, raw[table], rows, problems)
    if not problems.found:
        runs = _check_runs(tables[Run.__tablename__], problems)
        for model in (ProbeResult, InterventionResult, PatchingResult, ResultWeights):
            _check_results(model.__tablename__, tables.get(model.__tablename__, []), runs, problems)
    return problems.found


def check_in_flight(manifest: dict[str, Any], training: dict[str, Any]) -> list[str]:
    """The problems of a bundle's training states in flight (``training``: zip entry name → its
    bytes, or for a state its ``backend.bundle_guard.Streamed`` record, the names ``worker.in_flight.TRAINING_NAME`` matches), each naming its file; ``[]``: none.
    Where the manifest's ``in_flight`` entries record ``files`` (name → ``{"size", "sha256"}``),
    each such file must be in the bundle with that size and sha256, and no other state file may
    be; a bundle written before the records is checked for pairs and notes only."""
    from worker.in_flight import TRAINING_NAME

    recorded, problems = _recorded_files(manifest, "in_flight", training, TRAINING_NAME, "a state file")
    if recorded is None:
        return problems
    for name, blob in sorted(training.items()):
        m = TRAINING_NAME.fullmatch(name)
        if m is None:  # the bundle reader files only such names here
            problems.append(f"{name} is not a training state's name")
            continue
        h, kind = m.groups()
        other = f"training/{h}.{'json' if kind == 'pt' else 'pt'}"
        if recorded and name not in recorded:
            problems.append(f"{name} is in the bundle but not in the manifest's in_flight")
        elif other not in training:
            problems.append(f"{name} is in the bundle without its {other}")
        elif kind == "json" and not isinstance(_json_object(blob), dict):
            problems.append(f"{name} is not a JSON object (the note naming the run in flight)")
    return problems


def check_measuring(manifest: dict[str, Any], measuring: dict[str, Any]) -> list[str]:
    """The problems of a bundle's measurements in flight (``measuring``: zip entry name → its
    bytes, or for a piece its ``backend.bundle_guard.Streamed`` record, the names ``worker.in_flight_measuring.MEASURING_NAME`` matches), each naming its file;
    ``[]``: none. Every such file must be listed in the manifest's ``measuring`` entries with its
    size and sha256, and every folder must hold its note, a JSON object."""
    from worker.in_flight_measuring import MEASURING_NAME, NOTE_NAME

    recorded, problems = _recorded_files(manifest, "measuring", measuring, MEASURING_NAME, "a measuring file")
    if recorded is None:
        return problems
    folders = {m.group(1) for n in measuring if (m := MEASURING_NAME.fullmatch(n))}  # the reader's names all match
    for name in sorted(measuring):
        if name not in recorded:
            problems.append(f"{name} is in the bundle but not in the manifest's measuring")
    for folder in sorted(folders):
        note = measuring.get(f"measuring/{folder}/{NOTE_NAME}")
        if note is None or not isinstance(_json_object(note), dict):
            problems.append(f"measuring/{folder}/{NOTE_NAME} is missing or not a JSON object (the note naming the run)")
    return problems


def _recorded_files(
    manifest: dict[str, Any], key: str, blobs: dict[str, bytes], pattern: re.Pattern[str], what: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """The ``files`` records (entry name → ``{"size", "sha256"}``) of the manifest's ``key``
    entries, and the problems of ``blobs`` against them: a record that is not one, a file listed
    but absent, a file whose size or sha256 differs. ``(None, [problem])`` when ``key`` is not a
    list of objects with ``files`` objects."""

    entries = manifest.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return None, [f"manifest.json: {key} must be a list of objects"]
    recorded: dict[str, Any] = {}
    for i, entry in enumerate(e for e in entries if "files" in e):
        files = entry["files"]
        if not isinstance(files, dict):
            return None, [f"manifest.json: {key}[{i}].files must be an object"]
        recorded.update(files)
    problems = []
    for name, want in recorded.items():
        if not pattern.fullmatch(name) or not _is_record(want):
            problems.append(f"manifest.json: {key} files entry {name[:100]!r} is not {what}'s size and sha256")
        elif name not in blobs:
            problems.append(f"{name} is listed in the manifest's {key} but not in the bundle")
        elif (got := _record(blobs[name])) != want:
            problems.append(
                f"{name} is damaged: {got['size']} bytes with sha256 {got['sha256'][:16]}…, where the manifest "
                f"records {want['size']} bytes with sha256 {want['sha256'][:16]}… (a truncated or corrupted copy: "
                "export the bundle again)"
            )
    return recorded, problems


def _record(blob: Any) -> dict[str, Any]:
    """``{"size", "sha256"}`` of a member: read through already (``bundle_guard.Streamed``) or its bytes."""
    from worker.in_flight import file_record

    return blob.record if hasattr(blob, "record") else file_record(blob)


def _is_record(value: Any) -> bool:
    """Whether ``value`` is a state file's record: ``{"size": bytes ≥ 0, "sha256": 64 hex}``."""
    return (
        isinstance(value, dict)
        and set(value) == {"size", "sha256"}
        and type(value["size"]) is int
        and value["size"] >= 0
        and isinstance(value["sha256"], str)
        and _HEX64.fullmatch(value["sha256"]) is not None
    )


def _json_object(blob: bytes) -> Any:
    """``blob`` parsed as JSON, or None when it is not JSON."""
    try:
        return json.loads(blob)
    except (ValueError, RecursionError):  # not JSON (a UnicodeDecodeError is a ValueError): not a note
        return None
