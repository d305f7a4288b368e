"""Writing a results bundle (the format: ``backend.bundle``): a suite's rows of every table, its
manifest with the provenance of the code that made and exported it, its layer profiles and the file
tasks its runs were trained on; optionally (``weights``, ``artifacts``) the checkpoints and the probe
weights / removed directions, which are rebuildable from the results (README "Bundles")."""

from __future__ import annotations

import io
import json
import platform
import shutil
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.bundle import (
    FORMAT,
    FORMAT_VERSION,
    RESULT_TABLES,
    imported_manifest,
    jsonable,
    suite_names,
    table_row,
)
from backend.housekeeping import unknown_suite
from backend.study_parts import planned_run_count, suite_job_params
from layerscope_core import code_sources
from layerscope_core.atomic_file import atomic_file
from layerscope_core.provenance import code_versions
from layerscope_core.suite_names import suite_name_problem
from models_store.checkpoints import CONFIG, PROVENANCE, WEIGHTS
from store.models import MeasureSettings, Run
from worker.persist import REMEASURING

__all__ = [
    "PROVENANCE_KEYS",
    "CARRIED_KEYS",
    "RunsBeingRebuilt",
    "collect",
    "manifest_for",
    "with_provenance",
    "export_bundle",
    "ExportFailed",
]


class RunsBeingRebuilt(ValueError):
    """The suite has runs trained again (rebuilt, or ``--force``) whose rows of the model they
    replace were deleted and whose own measurements are not all stored yet (status
    ``remeasuring``, ``worker.persist.REMEASURING``): a bundle now would hold them without their
    results. ``runs``: their ``(id, name)``."""

    def __init__(self, suite: str, runs: list[tuple[int | None, str]]) -> None:
        self.suite, self.runs = suite, runs
        names = ", ".join(f"{name} (run {rid})" for rid, name in runs[:5]) + (
            f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        )
        super().__init__(
            f"suite {suite!r}: {len(runs)} run(s) being rebuilt, the results of the model each replaces "
            f"deleted and its own not all stored yet: {names}; wait for the rebuild to finish (one stopped "
            "part-way finishes when its suite runs again)"
        )


def being_rebuilt(runs: list[dict[str, Any]]) -> list[tuple[int | None, str]]:
    """``(id, name)`` of the runs (table rows, or the manifest's entries: no id) whose status is
    ``remeasuring`` (:class:`RunsBeingRebuilt`)."""
    return [(r.get("id"), r.get("name") or f"run {r.get('id')}") for r in runs if r.get("status") == REMEASURING]


def collect(session: Session, suite: str, *, empty: bool = False) -> dict[str, list[dict[str, Any]]]:
    """A suite's rows per table (every column). ``empty``: a suite with no run stored yields
    empty tables (its runs in flight may still travel) instead of the error.

    Raises:
        LookupError: no run in ``suite`` (without ``empty``); ``housekeeping.SuiteNameError`` (a
            ValueError): no run in ``suite`` and a name that breaks the suite-name rule.
    """
    runs = list(
        session.execute(
            select(Run).options(selectinload(Run.curve)).where(Run.suite == suite).order_by(Run.id)
        ).scalars()
    )
    if not runs and (not empty or suite_name_problem(suite)):
        raise _no_runs(session, suite, "has no runs")
    ids = [r.id for r in runs]
    tables: dict[str, list[dict[str, Any]]] = {"runs": [table_row(r) for r in runs]}
    for model in RESULT_TABLES:
        rows = session.execute(select(model).where(model.run_id.in_(ids)).order_by(model.id)).scalars()
        tables[model.__tablename__] = [table_row(r) for r in rows]
    settings_ids = sorted(
        {
            r["settings_id"]
            for model in RESULT_TABLES
            for r in tables[model.__tablename__]
            if r.get("settings_id") is not None
        }
    )
    settings: Iterable[MeasureSettings] = (
        session.execute(
            select(MeasureSettings).where(MeasureSettings.id.in_(settings_ids)).order_by(MeasureSettings.id)
        ).scalars()
        if settings_ids
        else []
    )
    tables[MeasureSettings.__tablename__] = [table_row(r) for r in settings]
    return tables


def _no_runs(session: Session, suite: str, found: str) -> LookupError | ValueError:
    """The refusal of a suite with nothing to export (``found``: what it lacks), naming the suites here."""
    return unknown_suite(suite, f"{found} (suites here: {', '.join(suite_names(session)) or 'none'})")


def _profiles(session: Session, suite: str) -> list[dict[str, Any]]:
    """The suite's layer profiles exactly as ``GET /api/profiles?suite=`` serves them."""
    from backend.api.across_seeds import profiles
    from backend.api.queries import RunFilter

    return profiles(session, RunFilter(suite=[suite]))


def manifest_for(
    tables: dict[str, list[dict[str, Any]]], suite: str, weights: bool, artifacts: bool = False
) -> dict[str, Any]:
    """The manifest of a bundle of ``tables`` (the fields in ``backend.bundle``'s docstring), before provenance."""
    runs = tables["runs"]
    # the tasks, families and methods of its rows that a package adds: what a rebuild needs installed
    sources = code_sources.sources_of(
        (r.get("task") for r in runs),
        (r.get("family") for r in runs),
        (r.get("method") for r in tables.get("intervention_results") or []),
    )
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "suite": suite,
        "created_at": datetime.now(UTC).isoformat(),
        **code_versions(),  # layerscope, git_commit, git_dirty, python, torch, transformers
        "exported_on": platform.node() or None,
        "devices": sorted({r.get("made_on") or "unknown" for r in runs}),
        "wall_time_s": round(sum(float(r.get("train_seconds") or 0.0) for r in runs), 3),
        # first and last run stored (UTC): the study's elapsed time, measurements and parallelism included
        "made_between": [min(stamps), max(stamps)]
        if (stamps := [r["created_at"] for r in runs if r.get("created_at")])
        else None,
        "runs": [
            {
                k: r.get(k)
                for k in (
                    "config_hash",
                    "name",
                    "family",
                    "task",
                    "seed",
                    "status",
                    "made_on",
                    "train_seconds",
                    "heldout_acc",
                )
            }
            for r in runs
        ],
        "tables": {
            name: {"rows": len(rows), "columns": sorted(rows[0]) if rows else []} for name, rows in tables.items()
        },
        "weights": weights,
        "artifacts": artifacts,  # the probe weights / removed directions its rows name travel with it
        **({"code_sources": sources} if sources else {}),
    }


PROVENANCE_KEYS = (
    "layerscope",
    "git_commit",
    "git_dirty",
    "python",
    "torch",
    "transformers",
    "exported_on",
    "created_at",
)
CARRIED_KEYS = ("edits_after_export",)  # top-level keys of an imported manifest that a re-export keeps on top


def with_provenance(
    manifest: dict[str, Any],
    imported: dict[str, Any] | None,
    runs: list[dict[str, Any]] | None = None,
    note: str | None = None,
    planned: int | None = None,
) -> dict[str, Any]:
    """The exporter's versions under ``exported_with``; for an imported suite, the versions of
    the bundle its runs came from stay on top, with that manifest as ``imported_manifest``.
    With the suite's run rows, ``parts`` says where each part of the study was made and, for a
    preset suite, ``progress`` / ``partial`` how far it has come (backend/study_parts.py; the
    imported ``partial`` block's reasons are kept and ``note`` is added to them). ``notes``: the
    notes of every export of the suite, ``note`` last, kept after the study is complete.
    ``planned``: the runs the suite asked for (``study_parts.planned_run_count``), else the preset's."""
    from backend import study_parts

    out = {**manifest, "exported_with": {k: manifest.get(k) for k in PROVENANCE_KEYS}}
    # every export's note, kept once the study is complete too (``partial`` goes then)
    before = (imported or {}).get("partial") or {}  # a bundle made before ``notes``: its partial block's
    notes = [
        *((imported or {}).get("notes") or [*([before["why"]] if before.get("why") else []), *before.get("notes", [])]),
        *([note] if note else []),
    ]
    if notes:
        out["notes"] = notes
    if imported:
        for k in PROVENANCE_KEYS:
            if k != "created_at" and k in imported:
                out[k] = imported[k]
        for k in CARRIED_KEYS:
            if imported.get(k) is not None:
                out[k] = imported[k]
        out["imported_manifest"] = imported
    if runs is None:  # no rows to count: keep what the imported bundle said
        if imported and "partial" in imported:
            out["partial"] = imported["partial"]
        return out
    out["parts"] = study_parts.parts(runs, manifest, imported)
    now = study_parts.progress(
        runs,
        planned or study_parts.preset_run_count(manifest["suite"], [h for r in runs if (h := r.get("config_hash"))]),
        in_flight=len(manifest.get("in_flight") or []),
    )
    if now is not None:
        out["progress"] = now
    partial = study_parts.partial_block(now, imported, note)
    if partial is not None:
        out["partial"] = partial
    return out


def export_bundle(
    session: Session,
    suite: str,
    out: Path | io.BytesIO,
    *,
    weights: bool = False,
    artifacts: bool = False,
    store_dir: Path | None = None,
    note: str | None = None,
    in_flight: bool = False,
    allow_partial: bool = False,
) -> dict[str, Any]:
    """Write ``suite``'s bundle to ``out`` (a path or a binary buffer). Returns the manifest.
    ``note``: a sentence for the manifest's ``partial.notes`` (why a partial study is partial).
    ``in_flight``: also the mid-run training checkpoints of the suite's runs not stored yet
    (``training/<run hash>.pt`` + its note; the manifest's ``in_flight`` lists them with their
    step and each file's size and sha256), so the suite resumes them where the bundle is imported;
    a suite with no run stored yet is exported then too (0 runs) when it has a run in flight.
    ``artifacts``: also the probe weights / removed directions the ``result_weights`` rows name
    (``artifacts/<sha256>.safetensors``); without it the rows travel and the files are left out:
    they are most of a measured suite's bytes, and a run's are fitted again on its weights
    (README "Bundles"). ``allow_partial``: export runs being rebuilt too (status ``remeasuring``: their old results
    deleted, their own not all stored), refused otherwise (docs/SCIENCE.md#rebuilding-weights).

    Raises:
        RunsBeingRebuilt (a ValueError): runs being rebuilt, without ``allow_partial``;
        LookupError: no run in ``suite`` (with ``in_flight``: none stored and none in flight);
        ValueError: ``weights``, ``artifacts`` or ``in_flight`` without ``store_dir``, or no run in ``suite``
        and a name that breaks the suite-name rule (``housekeeping.SuiteNameError``).
    """
    if (weights or artifacts or in_flight) and store_dir is None:
        raise ValueError("weights, artifacts and in_flight need the model store's directory")
    tables = collect(session, suite, empty=in_flight)
    if not allow_partial and (rebuilding := being_rebuilt(tables["runs"])):
        raise RunsBeingRebuilt(suite, rebuilding)
    checkpoints = _checkpoint_folders(tables["runs"], store_dir) if weights else {}
    training = _in_flight(tables["runs"], suite, store_dir) if in_flight else {}
    measuring = _measuring(tables["runs"], suite, store_dir) if in_flight else {}
    # a measurement in flight resumes only on the weights it was measured on: they travel with it
    checkpoints |= _checkpoint_folders([m["run"] for m in measuring.values()], store_dir)
    if not tables["runs"] and not training:
        raise _no_runs(session, suite, "has no runs and none in flight")
    manifest = manifest_for(tables, suite, weights, artifacts)
    if weights:
        missing = len(tables["runs"]) - len(checkpoints)
        manifest.update(weights=missing == 0, weights_included=len(checkpoints), weights_missing=missing)
    learned = _artifacts(tables, store_dir) if artifacts else []  # the rows always travel; the files on request
    if store_dir is not None:  # an import checks that every one arrived (a bundle cut short is refused)
        manifest["artifacts_included"] = len(learned)
    if not isinstance(out, str | Path):
        return _write(out, session, suite, tables, manifest, checkpoints, training, measuring, learned, note, in_flight)
    out = Path(out)
    try:  # beside the target under a temporary name, fsynced, renamed: a failure leaves the old bundle
        with atomic_file(out) as fh:
            return _write(
                fh, session, suite, tables, manifest, checkpoints, training, measuring, learned, note, in_flight
            )
    except OSError as exc:
        raise ExportFailed(out, exc, _needed(tables, checkpoints, training, measuring, learned)) from exc


class ExportFailed(OSError):
    """Writing a bundle failed (a full disk, say): the previous file at ``path`` is untouched.
    The message names the path, the reason and the space the export needed (an upper bound: the
    uncompressed size of what it writes) against the space free there."""

    def __init__(self, path: Path, exc: OSError, needed: int) -> None:
        try:
            free = f"{shutil.disk_usage(path.parent).free / 1e6:,.1f} MB free there"
        except OSError:
            free = "the free space there unknown"
        kept = "the previous bundle there is untouched" if path.exists() else "nothing was left there"
        super().__init__(
            f"{path}: export failed ({exc.strerror or exc}); {kept}; it needs up to {needed / 1e6:,.1f} MB "
            f"(uncompressed), {free}"
        )
        self.errno = exc.errno  # a full disk stays recognisable (ENOSPC)


def _needed(
    tables: dict[str, list[dict[str, Any]]],
    checkpoints: dict[str, Path],
    training: dict[str, dict[str, Any]],
    measuring: dict[str, dict[str, Any]],
    artifacts: list[Path],
) -> int:
    """An upper bound of a bundle's size: its tables as JSON and its files, uncompressed."""
    files = [f for folder in checkpoints.values() for f in _checkpoint_files(folder)]
    files += [Path(t["checkpoint"]) for t in training.values()] + artifacts
    files += [m["path"] / p for m in measuring.values() for p in m["pieces"]]
    size = sum(f.stat().st_size for f in files if f.is_file())
    return size + sum(len(json.dumps(rows, default=str)) for rows in tables.values()) + 2**20  # + manifest, profiles


def _write(
    fh: BinaryIO | io.BytesIO,
    session: Session,
    suite: str,
    tables: dict[str, list[dict[str, Any]]],
    manifest: dict[str, Any],
    checkpoints: dict[str, Path],
    training: dict[str, dict[str, Any]],
    measuring: dict[str, dict[str, Any]],
    artifacts: list[Path],
    note: str | None,
    in_flight: bool,
) -> dict[str, Any]:
    """Write the bundle into ``fh``; returns its manifest."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as z:
        if in_flight:  # first: the manifest records what was written (a worker may replace a state)
            manifest["in_flight"] = [_write_state(z, h, t) for h, t in training.items()]
            written = (_write_measuring(z, name, m) for name, m in measuring.items())
            manifest["measuring"] = [entry for entry in written if entry is not None]
        params = suite_job_params(session, suite)
        if params is not None:  # the runs it asked for: the report's cells
            manifest["suite_params"] = params
        planned = planned_run_count(params, suite, [h for r in tables["runs"] if (h := r.get("config_hash"))])
        manifest = with_provenance(manifest, imported_manifest(session, suite), tables["runs"], note, planned)
        z.writestr("manifest.json", json.dumps(manifest, indent=2))
        for name, rows in tables.items():
            z.writestr(f"tables/{name}.json", json.dumps(rows, separators=(",", ":")))
        z.writestr(
            "tables/profiles.json", json.dumps(_profiles(session, suite), separators=(",", ":"), default=jsonable)
        )
        for ckpt, folder in checkpoints.items():
            for f in _checkpoint_files(folder):
                z.write(f, f"weights/{ckpt}/{f.name}")
        for path in artifacts:
            z.write(path, f"artifacts/{path.name}")
        _write_tasks(z, tables)
    return manifest


def _write_state(z: zipfile.ZipFile, run_hash: str, state: dict[str, Any]) -> dict[str, Any]:
    """Write one state in flight (``{checkpoint, note}`` of :func:`_in_flight`) into ``z``; its
    manifest entry: the run (``config_hash``, ``name``, ``family``, ``task``, ``seed``), its
    ``step`` (None: unreadable), its ``resume`` command (None: not known) and ``files``: the
    entry name → ``{"size": bytes, "sha256": hex}`` of each file as written (the bytes read once:
    the worker may replace the checkpoint meanwhile)."""
    from worker import in_flight

    name = f"training/{run_hash}"
    with open(state["checkpoint"], "rb") as src:
        with z.open(f"{name}.pt", "w", force_zip64=True) as dst:  # zip64: a state may pass 2 GiB
            pt = in_flight.copy_recorded(src, dst)
        step = in_flight.checkpoint_step(state["checkpoint"], src)
    note = json.dumps(state["note"], sort_keys=True).encode()
    z.writestr(f"{name}.json", note)
    return {
        "config_hash": run_hash,
        **{k: state["note"].get(k) for k in ("name", "family", "task", "seed")},
        "step": step,
        "resume": state["note"].get("resume"),
        "files": {f"{name}.pt": pt, f"{name}.json": in_flight.file_record(note)},
    }


def _write_measuring(z: zipfile.ZipFile, name: str, folder: dict[str, Any]) -> dict[str, Any] | None:
    """Write one measurement in flight (``worker.in_flight_measuring.suite_folders``' value, with
    its ``run`` row) into ``z`` as ``measuring/<name>/…``; its manifest entry
    (``in_flight_measuring.manifest_entry`` + ``weights``: the checkpoint id carried with it, or
    None when the run has none here: the pieces are then of no use where the bundle goes). None,
    and nothing written, when the folder went meanwhile (a running worker stored that part)."""
    from worker import in_flight_measuring

    files = {}
    try:
        for file in [in_flight_measuring.NOTE_NAME, *folder["pieces"]]:
            # read once, all before writing: the record is of the very bytes written
            files[f"{in_flight_measuring.FOLDER}/{name}/{file}"] = (folder["path"] / file).read_bytes()
    except FileNotFoundError:
        return None
    for entry, blob in files.items():
        z.writestr(entry, blob)
    return {**in_flight_measuring.manifest_entry(name, folder, files), "weights": folder["run"].get("checkpoint_id")}


def _measuring(runs: list[dict[str, Any]], suite: str, store_dir: Path | None) -> dict[str, dict[str, Any]]:
    """folder name → ``{path, note, pieces, run}`` of the suite's measurements in flight whose run
    is among ``runs`` (the rows exported)."""
    from worker import in_flight_measuring

    by_hash = {r.get("config_hash"): r for r in runs}
    found = in_flight_measuring.suite_folders(Path(str(store_dir)), suite)
    return {n: {**f, "run": by_hash[h]} for n, f in found.items() if (h := f["note"].get("config_hash")) in by_hash}


def _artifacts(tables: dict[str, list[dict[str, Any]]], store_dir: Path | None) -> list[Path]:
    """The files of the probe weights / removed directions the suite's rows name that the store
    holds (``artifacts/<sha256>.safetensors``; exported with ``--artifacts`` only)."""
    from models_store.artifacts import ArtifactStore

    if store_dir is None:
        return []
    store = ArtifactStore(store_dir)
    ids = sorted({r["artifact_id"] for r in tables.get("result_weights", [])})
    return [store.path(aid) for aid in ids if store.path(aid).is_file()]


def _write_tasks(z: zipfile.ZipFile, tables: dict[str, list[dict[str, Any]]]) -> None:
    """The file tasks the suite's runs were trained on (``tasks/<sha256>.json`` +
    ``tasks/names.json``), so an import elsewhere reads the same data."""
    from science.tasks import get_task
    from science.tasks.file_task import FileTask

    names: dict[str, str] = {}
    for r in tables["runs"]:
        sha = (r.get("task_params") or {}).get("sha256")
        if sha and r["task"] not in names:
            try:
                task = get_task(r["task"], sha256=sha)
            except ValueError:  # the file task is not in this store (imported without it): nothing to carry
                continue
            if isinstance(task, FileTask):
                names[r["task"]] = sha
                z.writestr(f"tasks/{sha}.json", task.file.canonical_bytes())
    if names:
        z.writestr("tasks/names.json", json.dumps(names, sort_keys=True))


def _checkpoint_files(folder: Path) -> list[Path]:
    """The files of a checkpoint folder a bundle carries: the model store's layout
    (``models_store.checkpoints``), nothing else in the folder."""
    return [folder / n for n in (WEIGHTS, CONFIG, PROVENANCE) if (folder / n).is_file()]


def _checkpoint_folders(runs: list[dict[str, Any]], store_dir: Path | None) -> dict[str, Path]:
    """checkpoint id → its folder in the model store, for the runs whose checkpoint is there
    (with files in it)."""
    out: dict[str, Path] = {}
    for r in runs:
        ckpt = r.get("checkpoint_id")
        folder = Path(store_dir) / str(ckpt) if ckpt and store_dir is not None else None
        if folder is not None and folder.is_dir() and _checkpoint_files(folder):
            out[str(ckpt)] = folder
    return out


def _in_flight(runs: list[dict[str, Any]], suite: str, store_dir: Path | None) -> dict[str, dict[str, Any]]:
    """run hash → ``{checkpoint, note}`` of the suite's runs in flight (``worker.in_flight``):
    the checkpoints noted with the suite, or among its preset's runs, that are not stored yet. A
    checkpoint of a preset job without a note, or with one written before notes named the resume
    command, gets its preset job's note."""
    from backend.study_parts import suite_preset
    from worker import in_flight
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    stored = [r["config_hash"] for r in runs if r.get("config_hash")]
    preset = suite_preset(suite, stored)
    jobs = {j.run_hash(): j for j in expand_suite(SuiteParams(preset=preset, name=suite))} if preset else {}
    found = in_flight.suite_checkpoints(Path(str(store_dir)), suite, jobs, stored)
    for h, t in found.items():
        if h in jobs and (t["note"] is None or "resume" not in t["note"]):  # no note, or one from before resume
            t["note"] = in_flight.note_of(jobs[h], h)  # the preset's job runs with the suite's name
    return found
