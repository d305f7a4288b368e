"""Results bundles: one portable file with a suite's runs and every result, and its import.

Format (``format_version`` 1) — a zip archive:

- ``manifest.json``: ``format`` ("layerscope-bundle"), ``format_version``, ``suite``,
  ``created_at`` (UTC ISO 8601), ``layerscope`` (package version), ``git_commit`` (or None),
  ``python``, ``torch``, ``transformers`` (versions, or None), ``exported_on`` (host),
  ``devices`` (distinct ``runs.made_on``), ``wall_time_s`` (sum of the runs' training seconds),
  ``made_between`` (first and last run stored, UTC ISO 8601),
  ``runs`` (one entry per run: ``config_hash``, ``name``, ``family``, ``task``, ``seed``,
  ``status``, ``made_on``, ``train_seconds``), ``tables`` (name → row count and columns),
  ``weights`` (bool: asked for and every run's checkpoint included; with ``weights`` asked for,
  ``weights_included`` / ``weights_missing`` count the runs whose checkpoint is / is not in the
  zip — a run trained without a checkpoint, or imported without weights, has none), ``exported_with`` (the exporter's ``layerscope``, ``git_commit``,
  ``python``, ``torch``, ``transformers``, ``exported_on``, ``created_at``).
- A suite that came in from a bundle keeps its provenance on re-export: the imported bundle's
  manifest (stored with the import's jobs row) travels as ``imported_manifest`` and the
  top-level version fields stay those of the bundle the runs came from; the imported manifest's
  top-level ``edits_after_export`` list (hand edits recorded after that export) stays on top too.
- ``code_sources`` (only when some are): ``{"task:NAME" | "family:NAME" | "method:NAME": where it
  comes from}`` for the tasks, families and methods of the rows that are not built in (a plugin's
  package and version, or the module that registered it: ``layerscope_core.code_sources``); import
  says which of them are not installed where it imports.
- ``parts`` (where each part of a study made in parts was made, with its code versions),
  ``progress`` and, while runs remain, ``partial`` (counts against the preset, and why it is
  partial): backend/study_parts.py.
- ``tables/<table>.json``: the rows of ``runs``, ``probe_results``, ``intervention_results``,
  ``patching_results`` and ``measure_settings`` (schema 0003: the settings rows the suite's
  result rows point to with ``settings_id``) — every column of the SQLAlchemy table (so
  columns added later travel without touching this module); datetimes as ISO 8601, ``NaN`` as
  null. Bundles written before 0003 have no ``measure_settings`` file: they import with
  ``settings_id`` NULL.
- ``tables/profiles.json``: the suite's layer profiles as ``GET /api/profiles`` serves them
  (derived from the probe rows, for readers without layerscope; not imported).
- ``weights/<checkpoint_id>/{weights.safetensors, config.json, provenance.json}``: the
  checkpoint's files as the model store lays them out (``models_store.checkpoints``), with
  ``weights=True`` (and those of the runs whose measurement travels in flight, below).
- ``artifacts/<sha256>.safetensors``: the probe weights / removed directions the
  ``result_weights`` rows name, when the exporter had the model store; the manifest's
  ``artifacts_included`` counts them (an import checks that each arrived).
- ``training/<run hash>.pt`` + ``training/<run hash>.json``: the mid-run training state of the
  suite's runs in flight and the note naming each run (with the ``layerscope suite`` command that
  resumes it, ``resume``), only with ``in_flight=True`` (the manifest's ``in_flight`` lists them:
  ``config_hash``, ``name``, ``family``, ``task``, ``seed``, ``step``, ``resume`` and ``files``,
  each file's ``size`` and ``sha256``; bundles written before ``files`` have none to check); such a
  bundle may hold 0 runs (a suite whose first runs are still training). Import checks each file
  against ``files`` (a mismatch refuses the bundle) and puts the states into the model store's
  ``training/`` folder, where the same suite resumes them (docs/SCIENCE.md#resuming-training).
- ``measuring/<part>-<hash>/<piece>.pt`` + ``note.json``: the finished pieces of the suite's
  measurements not stored yet (``worker.in_flight_measuring``), only with ``in_flight=True``; the
  manifest's ``measuring`` lists each folder (``folder``, the run's ``config_hash``, ``name``,
  ``family``, ``task``, ``seed``, ``part``, ``pieces``, ``weights``: the checkpoint carried with it
  under ``weights/``, since pieces resume only on the weights they were measured on, and
  ``files`` with each file's ``size`` and ``sha256``, checked at import). Import puts them into
  the store's ``measuring/`` folder, where the same suite resumes each measurement at its next
  piece (docs/SCIENCE.md#staged-measurement).

A bundle is read as hostile input (docs/DESIGN.md#bundles-read-as-hostile-input): the zip's
directory against the limits and the layout (``backend.bundle_guard``), the manifest against the
tables and members (``backend.bundle_agree``), the weights against their hashes and runs
(``backend.bundle_stage``). Reading a bundle checks every row first (``backend.bundle_checks``: types, ranges, layers against
the run's, storable text and numbers); a bad one refuses the bundle as a whole, before anything is
written. Import maps runs by ``config_hash`` (the unique key of a run): a run already present keeps its
row and id; settings rows likewise by their ``config_hash`` (get-or-create), and each result
row's ``settings_id`` is mapped to the id here (NULL when the bundle lacks that settings row);
result rows are inserted only where their unique key (run, eval length, …) is not present yet.
Importing the same bundle twice therefore changes nothing. A stored run of another training
(``backend.bundle_import.training_differences``) keeps its rows unless the import replaces it.

This module is the format (its constants, reading a bundle, the rows as they travel) and the
import records; writing one is ``backend.bundle_export``, loading one ``backend.bundle_import``.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, select
from sqlalchemy.orm import Session

from backend.bundle_agree import check_agreement
from backend.bundle_checks import check_in_flight, check_measuring, check_tables
from backend.bundle_guard import Limits, Streamed, ZipRefused, open_checked, read_small, streamed
from store.models import (
    InterventionResult,
    Job,
    MeasureSettings,
    PatchingResult,
    ProbeResult,
    ResultWeights,
    Run,
    row_columns,
)
from worker.in_flight import TRAINING_NAME
from worker.in_flight_measuring import MEASURING_NAME

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "RESULT_TABLES",
    "IMPORT_JOB_KIND",
    "WEIGHT_NAME",
    "ARTIFACT_NAME",
    "TASK_NAME",
    "BundleError",
    "read_bundle",
    "jsonable",
    "table_row",
    "for_table",
    "unique_keys",
    "column_default",
    "suite_names",
    "imported_manifest",
    "imported_suites",
]

FORMAT = "layerscope-bundle"
FORMAT_VERSION = 1
RESULT_TABLES = (ProbeResult, InterventionResult, PatchingResult, ResultWeights)
# the zip entries a bundle may carry beside its tables
WEIGHT_NAME = re.compile(r"weights/[0-9a-f]{64}/[A-Za-z0-9._-]+")
ARTIFACT_NAME = re.compile(r"artifacts/([0-9a-f]{64})\.safetensors")
TASK_NAME = re.compile(r"tasks/([0-9a-f]{64})\.json")
IMPORT_JOB_KIND = "import"  # a finished jobs row records each import (the suite picker reads it)


class BundleError(ValueError):
    """A file that is not a layerscope bundle, or of an unknown format version."""


# ----------------------------------------------------------------------------- rows


def jsonable(v: Any) -> Any:
    """A column value as JSON holds it: datetimes as ISO 8601, non-finite floats as null."""
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def table_row(obj: Any) -> dict[str, Any]:
    """Every column of ``obj``'s table (generic: new columns travel too); a run's with its loss
    curve (``store.models.row_columns``)."""
    return {c.key: jsonable(getattr(obj, c.key)) for c in row_columns(type(obj))}


def unique_keys(model: Any) -> tuple[str, ...]:
    """The columns of the table's unique constraint (run_id first), from the SQLAlchemy table."""
    from sqlalchemy import UniqueConstraint

    for c in model.__table__.constraints:
        if isinstance(c, UniqueConstraint):
            return tuple(col.name for col in c.columns)
    raise RuntimeError(f"{model.__tablename__} has no unique key")  # pragma: no cover - schema invariant


def for_table(model: Any, row: dict[str, Any]) -> dict[str, Any]:
    """Keep the columns this schema has (a bundle from a newer schema loses only its new
    columns), parse datetimes back, drop the primary key."""
    out = {}
    for col in row_columns(model):
        if col.key == "id" or col.key not in row:
            continue
        v = row[col.key]
        if isinstance(col.type, DateTime) and isinstance(v, str):
            v = datetime.fromisoformat(v)
        out[col.key] = v
    return out


def column_default(model: Any, column: str) -> Any:
    """The column's scalar default (None without one, or with a callable one)."""
    col = model.__table__.columns[column]
    return col.default.arg if col.default is not None and not callable(col.default.arg) else None


# ----------------------------------------------------------------------------- reading


def read_bundle(
    path: Path | io.BytesIO, limits: Limits | None = None
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The manifest and the tables of a bundle, read as hostile input.

    The zip's central directory is checked first (``backend.bundle_guard``: member count, sizes,
    compression ratio, names, the exporter's layout; ``limits``: the settings' by default), then
    the tables (``backend.bundle_checks``: a row of the wrong type, out of range, or not
    consistent with its run refuses the bundle as a whole) and the manifest against them
    (``backend.bundle_agree``). The checkpoints and artifacts are not read here: their names are
    in ``manifest["_members"]`` and ``backend.bundle_stage`` streams them at import.

    Raises:
        BundleError: not a zip, no manifest, another format or a newer format version, a member
            that breaks a rule of the zip, a table with a bad row, or a manifest that disagrees
            with the bundle (the first named: member, row, field, why).
    """
    try:
        z = open_checked(path, limits)
    except ZipRefused as exc:
        raise _refused(path, str(exc)) from None
    except zipfile.BadZipFile as exc:  # a zip's directory is at its end: a cut-off download loses it first
        raise BundleError(
            f"{path}: not a layerscope bundle ({exc}: not a zip file, or one cut short — a download or copy "
            "that did not finish)"
        ) from exc
    except OSError as exc:
        raise BundleError(f"{path}: not a layerscope bundle ({exc})") from exc
    with z:
        try:
            manifest = json.loads(read_small(z, "manifest.json"))
        except (KeyError, ValueError, RecursionError) as exc:  # ZipRefused (damaged) is a ValueError
            raise BundleError(f"{path}: no readable manifest.json ({exc})") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            got = manifest.get("format") if isinstance(manifest, dict) else manifest
            raise BundleError(f"{path}: format {got!r}, expected {FORMAT!r}")
        version = manifest.get("format_version", FORMAT_VERSION)  # absent: written before versions were
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise BundleError(
                f"{path}: format version {version!r} is not one layerscope writes (1 to {FORMAT_VERSION})"
            )
        if version > FORMAT_VERSION:
            raise BundleError(
                f"{path}: format version {manifest.get('format_version')} is newer than this "
                f"layerscope reads ({FORMAT_VERSION}); upgrade layerscope"
            )
        names = z.namelist()
        tables_here = [m.__tablename__ for m in (Run, *RESULT_TABLES, MeasureSettings)]
        # no measure_settings before schema 0003 (nor result_weights before 0008): no rows
        raw = {t: _small(z, path, f"tables/{t}.json") for t in tables_here if f"tables/{t}.json" in names}
        tables = {t: _rows(path, t, raw.get(t, b"[]")) for t in tables_here}
        problems = check_tables(manifest, raw, tables)  # before anything is read from it
        if not problems:  # agreement is checked on rows of the right types
            problems = check_agreement(manifest, tables, set(raw), names)
        if problems:
            raise _refused_for(path, problems)
        learned = {n: _small(z, path, n) for n in names if TASK_NAME.fullmatch(n) or n == "tasks/names.json"}
        # the notes read whole (JSON), the states and pieces streamed: their size and sha256 only
        training = {n: _member(z, path, n) for n in names if TRAINING_NAME.fullmatch(n)}
        measuring = {n: _member(z, path, n) for n in names if MEASURING_NAME.fullmatch(n)}
        # a cut-short state or piece refuses the bundle before anything is written
        problems = check_in_flight(manifest, training) + check_measuring(manifest, measuring)
        if problems:
            raise _refused_for(path, problems)
    manifest["_members"] = names
    manifest["_learned"] = learned
    manifest["_training"] = training
    manifest["_measuring"] = measuring
    return manifest, tables


def _member(z: zipfile.ZipFile, path: Path | io.BytesIO, name: str) -> bytes | Streamed:
    """A JSON member's bytes, or a binary member read through for its size and sha256 (:func:`_small`)."""
    try:
        return streamed(z, name) if not name.endswith(".json") else read_small(z, name)
    except ZipRefused as exc:
        raise _refused(path, str(exc)) from None


def _small(z: zipfile.ZipFile, path: Path | io.BytesIO, name: str) -> bytes:
    """The bytes of member ``name`` (at most the size its directory entry states, checked).

    Raises:
        BundleError: damaged (its CRC-32, compressed data or size), named.
    """
    try:
        return read_small(z, name)
    except ZipRefused as exc:
        raise _refused(path, str(exc)) from None


def _refused(path: Path | io.BytesIO, why: str) -> BundleError:
    return BundleError(f"{path}: refused as a whole, nothing imported: {why}")


def _refused_for(path: Path | io.BytesIO, problems: list[str]) -> BundleError:
    """The refusal naming the first of ``problems`` and how many more there are."""
    more = len(problems) - 1
    return _refused(path, problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))


def _rows(path: Path | io.BytesIO, table: str, raw: bytes) -> list[Any]:
    """The rows of ``tables/<table>.json``.

    Raises:
        BundleError: not JSON, or not a list.
    """
    try:
        rows = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise _refused(path, f"tables/{table}.json is not JSON ({exc})") from None
    if not isinstance(rows, list):
        raise _refused(path, f"tables/{table}.json is not a list of rows")
    return rows


def suite_names(session: Session) -> list[str]:
    """The suites that have runs here, sorted."""
    return [s for s in session.execute(select(Run.suite).distinct().order_by(Run.suite)).scalars() if s]


def imported_manifest(session: Session, suite: str) -> dict[str, Any] | None:
    """The manifest of the latest bundle imported into ``suite`` (stored at import), or None."""
    jobs = session.execute(select(Job.id, Job.params).where(Job.kind == IMPORT_JOB_KIND).order_by(Job.id.desc()))
    for job_id, params in jobs.all():  # a manifest is large: only those of this suite's imports are read
        if (params or {}).get("suite") != suite:
            continue
        result = session.execute(select(Job.result).where(Job.id == job_id)).scalar_one_or_none()
        if isinstance(result, dict) and isinstance(result.get("manifest"), dict):
            return result["manifest"]
    return None


def imported_suites(session: Session) -> set[str]:
    """Suites that came into this DB from a bundle (an ``import`` jobs row records each)."""
    rows = session.execute(select(Job.params).where(Job.kind == IMPORT_JOB_KIND)).scalars()
    return {suite for p in rows if isinstance(p, dict) and (suite := p.get("suite"))}
