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
- ``weights/<checkpoint_id>/…``: the checkpoint files, only with ``weights=True``.

Import maps runs by ``config_hash`` (the unique key of a run): a run already present keeps its
row and id; settings rows likewise by their ``config_hash`` (get-or-create), and each result
row's ``settings_id`` is mapped to the id here (NULL when the bundle lacks that settings row);
result rows are inserted only where their unique key (run, eval length, …) is not present yet.
Importing the same bundle twice therefore changes nothing.
"""

from __future__ import annotations

import io
import json
import math
import platform
import re
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, delete, select
from sqlalchemy.orm import Session

from layerscope_core.provenance import code_versions
from store.models import InterventionResult, Job, MeasureSettings, PatchingResult, ProbeResult, ResultWeights, Run

FORMAT = "layerscope-bundle"
FORMAT_VERSION = 1
RESULT_TABLES = (ProbeResult, InterventionResult, PatchingResult, ResultWeights)
_WEIGHT_NAME = re.compile(r"weights/[0-9a-f]{64}/[A-Za-z0-9._-]+")
_ARTIFACT_NAME = re.compile(r"artifacts/([0-9a-f]{64})\.safetensors")
_TASK_NAME = re.compile(r"tasks/([0-9a-f]{64})\.json")
IMPORT_JOB_KIND = "import"  # a finished jobs row records each import (the suite picker reads it)


class BundleError(ValueError):
    """A file that is not a layerscope bundle, or of an unknown format version."""


# ----------------------------------------------------------------------------- rows


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _row(obj: Any) -> dict[str, Any]:
    """Every column of ``obj``'s table (generic: new columns travel too)."""
    return {c.key: _jsonable(getattr(obj, c.key)) for c in obj.__table__.columns}


def _unique_keys(model: Any) -> tuple[str, ...]:
    """The columns of the table's unique constraint (run_id first), from the SQLAlchemy table."""
    from sqlalchemy import UniqueConstraint

    for c in model.__table__.constraints:
        if isinstance(c, UniqueConstraint):
            return tuple(col.name for col in c.columns)
    raise RuntimeError(f"{model.__tablename__} has no unique key")  # pragma: no cover - schema invariant


# ----------------------------------------------------------------------------- export


def suite_names(session: Session) -> list[str]:
    return [s for s in session.execute(select(Run.suite).distinct().order_by(Run.suite)).scalars() if s]


def collect(session: Session, suite: str) -> dict[str, list[dict[str, Any]]]:
    """A suite's rows per table (every column). Raises LookupError: no run in ``suite``."""
    runs = list(session.execute(select(Run).where(Run.suite == suite).order_by(Run.id)).scalars())
    if not runs:
        known = ", ".join(suite_names(session)) or "none"
        raise LookupError(f"suite {suite!r} has no runs (suites here: {known})")
    ids = [r.id for r in runs]
    tables: dict[str, list[dict[str, Any]]] = {"runs": [_row(r) for r in runs]}
    for model in RESULT_TABLES:
        rows = session.execute(select(model).where(model.run_id.in_(ids)).order_by(model.id)).scalars()
        tables[model.__tablename__] = [_row(r) for r in rows]
    settings_ids = sorted(
        {
            r["settings_id"]
            for model in RESULT_TABLES
            for r in tables[model.__tablename__]
            if r.get("settings_id") is not None
        }
    )
    settings = (
        session.execute(
            select(MeasureSettings).where(MeasureSettings.id.in_(settings_ids)).order_by(MeasureSettings.id)
        ).scalars()
        if settings_ids
        else []
    )
    tables[MeasureSettings.__tablename__] = [_row(r) for r in settings]
    return tables


def _profiles(session: Session, suite: str) -> list[dict[str, Any]]:
    """The suite's layer profiles exactly as ``GET /api/profiles?suite=`` serves them."""
    from backend.api.aggregate import profiles
    from backend.api.queries import RunFilter

    return profiles(session, RunFilter(suite=[suite]))


def manifest_for(tables: dict[str, list[dict[str, Any]]], suite: str, weights: bool) -> dict[str, Any]:
    runs = tables["runs"]
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


def imported_manifest(session: Session, suite: str) -> dict[str, Any] | None:
    """The manifest of the latest bundle imported into ``suite`` (stored at import), or None."""
    rows = session.execute(select(Job).where(Job.kind == IMPORT_JOB_KIND).order_by(Job.id.desc())).scalars()
    for job in rows:
        if (
            (job.params or {}).get("suite") == suite
            and isinstance(job.result, dict)
            and isinstance(job.result.get("manifest"), dict)
        ):
            return job.result["manifest"]
    return None


def with_provenance(
    manifest: dict[str, Any],
    imported: dict[str, Any] | None,
    runs: list[dict[str, Any]] | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The exporter's versions under ``exported_with``; for an imported suite, the versions of
    the bundle its runs came from stay on top, with that manifest as ``imported_manifest``.
    With the suite's run rows, ``parts`` says where each part of the study was made and, for a
    preset suite, ``progress`` / ``partial`` how far it has come (backend/study_parts.py; the
    imported ``partial`` block's reasons are kept and ``note`` is added to them). ``notes``: the
    notes of every export of the suite, ``note`` last, kept after the study is complete."""
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
        runs, study_parts.preset_run_count(manifest["suite"], [r.get("config_hash") for r in runs])
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
    store_dir: Path | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Write ``suite``'s bundle to ``out`` (a path or a binary buffer). Returns the manifest.
    ``note``: a sentence for the manifest's ``partial.notes`` (why a partial study is partial).

    Raises:
        LookupError: no run in ``suite``; ValueError: ``weights`` without ``store_dir``.
    """
    if weights and store_dir is None:
        raise ValueError("weights=True needs the model store's directory")
    tables = collect(session, suite)
    checkpoints = _checkpoint_folders(tables["runs"], store_dir) if weights else {}
    manifest = manifest_for(tables, suite, weights)
    if weights:
        missing = len(tables["runs"]) - len(checkpoints)
        manifest.update(weights=missing == 0, weights_included=len(checkpoints), weights_missing=missing)
    manifest = with_provenance(manifest, imported_manifest(session, suite), tables["runs"], note)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=2))
        for name, rows in tables.items():
            z.writestr(f"tables/{name}.json", json.dumps(rows, separators=(",", ":")))
        z.writestr(
            "tables/profiles.json", json.dumps(_profiles(session, suite), separators=(",", ":"), default=_jsonable)
        )
        for ckpt, folder in checkpoints.items():
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    z.write(f, f"weights/{ckpt}/{f.relative_to(folder).as_posix()}")
        _write_learned_and_tasks(z, tables, store_dir)
    return manifest


def _write_learned_and_tasks(
    z: zipfile.ZipFile, tables: dict[str, list[dict[str, Any]]], store_dir: Path | None
) -> None:
    """The probe weights / removed directions the suite's rows name
    (``artifacts/<sha256>.safetensors``, small: always included when the store is given) and the
    file tasks its runs were trained on (``tasks/<sha256>.json`` + ``tasks/names.json``), so an
    import elsewhere reads the same data."""
    from models_store.artifacts import ArtifactStore
    from science.tasks import get_task
    from science.tasks.file_task import FileTask

    if store_dir is not None:
        store = ArtifactStore(store_dir)
        for aid in sorted({r["artifact_id"] for r in tables.get("result_weights", [])}):
            if store.path(aid).is_file():
                z.write(store.path(aid), f"artifacts/{aid}.safetensors")
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


def _checkpoint_folders(runs: list[dict[str, Any]], store_dir: Path | None) -> dict[str, Path]:
    """checkpoint id → its folder in the model store, for the runs whose checkpoint is there
    (with files in it)."""
    out: dict[str, Path] = {}
    for r in runs:
        ckpt = r.get("checkpoint_id")
        folder = Path(store_dir) / str(ckpt) if ckpt and store_dir is not None else None
        if folder is not None and folder.is_dir() and any(f.is_file() for f in folder.rglob("*")):
            out[str(ckpt)] = folder
    return out


# ----------------------------------------------------------------------------- import


def read_bundle(path: Path | io.BytesIO) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The manifest and the tables of a bundle.

    Raises:
        BundleError: not a zip, no manifest, another format or a newer format version.
    """
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{path}: not a layerscope bundle ({exc})") from exc
    with z:
        try:
            manifest = json.loads(z.read("manifest.json"))
        except (KeyError, json.JSONDecodeError) as exc:
            raise BundleError(f"{path}: no readable manifest.json") from exc
        if manifest.get("format") != FORMAT:
            raise BundleError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
        if int(manifest.get("format_version", 0)) > FORMAT_VERSION:
            raise BundleError(
                f"{path}: format version {manifest.get('format_version')} is newer than this "
                f"layerscope reads ({FORMAT_VERSION}); upgrade layerscope"
            )
        tables = {}
        for model in (Run, *RESULT_TABLES, MeasureSettings):  # no measure_settings before schema 0003
            name = f"tables/{model.__tablename__}.json"
            tables[model.__tablename__] = json.loads(z.read(name)) if name in z.namelist() else []
        weights = {n: z.read(n) for n in z.namelist() if n.startswith("weights/") and not n.endswith("/")}
        learned = {n: z.read(n) for n in z.namelist() if _ARTIFACT_NAME.fullmatch(n) or _TASK_NAME.fullmatch(n)}
        if "tasks/names.json" in z.namelist():
            learned["tasks/names.json"] = z.read("tasks/names.json")
    manifest["_weights"] = weights
    manifest["_learned"] = learned
    return manifest, tables


def _for_table(model: Any, row: dict[str, Any]) -> dict[str, Any]:
    """Keep the columns this schema has (a bundle from a newer schema loses only its new
    columns), parse datetimes back, drop the primary key."""
    out = {}
    for col in model.__table__.columns:
        if col.key == "id" or col.key not in row:
            continue
        v = row[col.key]
        if isinstance(col.type, DateTime) and isinstance(v, str):
            v = datetime.fromisoformat(v)
        out[col.key] = v
    return out


def _close(a: Any, b: Any) -> bool:
    return a is None and b is None or (a is not None and b is not None and abs(float(a) - float(b)) < 1e-9)


def same_training(run: Run, row: dict[str, Any]) -> bool:
    """Whether a stored run and a bundle's run of the same config hash are the same model: the
    same training record (steps, seconds, held-out accuracy). A run trained again or rebuilt
    elsewhere (docs/SCIENCE.md#rebuilding-weights) is another model under the same hash."""
    return (
        run.steps == row.get("steps")
        and _close(run.train_seconds, row.get("train_seconds"))
        and _close(run.heldout_acc, row.get("heldout_acc"))
    )


def import_bundle(
    session: Session,
    path: Path | io.BytesIO,
    *,
    store_dir: Path | None = None,
    source: str | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Load a bundle into the results DB without duplicating rows already present; one
    transaction. A run stored here with the same config hash but another training record (trained
    again, or its weights rebuilt, here or where the bundle was made) is another model: its rows
    are never mixed with the bundle's. It is kept, and the bundle's run and rows left out
    (``runs_conflicting``), unless ``replace``: then its results are deleted and the bundle's run
    and rows take its place (``runs_replaced``). A stored run that is the bundle's model but has
    no weights gets the bundle's, when the bundle carries them.

    Returns: ``suite``, ``runs_added``, ``runs_present``, ``runs_replaced``, ``runs_conflicting``
    (one ``{name, config_hash, stored, bundle}`` per run left out), ``rows_added`` (per table),
    ``settings_added``.

    Raises:
        BundleError: see :func:`read_bundle`.
    """
    from worker.params import config_hash

    manifest, tables = read_bundle(path)
    weights = manifest.pop("_weights")
    learned = manifest.pop("_learned", {})
    if store_dir is not None:  # content-addressed files first: a refused task name leaves the DB untouched
        _store_learned_and_tasks(learned, Path(store_dir))
    id_map: dict[int, int] = {}
    added = present = 0
    replaced: list[int] = []
    conflicting: list[dict[str, Any]] = []

    def checkpoint_here(fields: dict[str, Any]) -> str | None:  # its weights are in the bundle and go to the store
        ckpt = fields.get("checkpoint_id")
        return (
            ckpt if ckpt and store_dir is not None and any(n.startswith(f"weights/{ckpt}/") for n in weights) else None
        )

    try:
        for row in tables["runs"]:
            fields = _for_table(Run, row)
            fields["checkpoint_id"] = checkpoint_here(fields)  # None: not loadable here for follow-up jobs
            stored = session.execute(select(Run).where(Run.config_hash == row["config_hash"])).scalar()
            if stored is not None and same_training(stored, row):
                if stored.checkpoint_id is None and fields["checkpoint_id"]:
                    stored.checkpoint_id = fields["checkpoint_id"]
                id_map[row["id"]] = stored.id
                present += 1
                continue
            if stored is not None and not replace:
                conflicting.append(
                    {
                        "name": stored.name,
                        "config_hash": stored.config_hash,
                        "stored": {"steps": stored.steps, "heldout_acc": stored.heldout_acc, "made_on": stored.made_on},
                        "bundle": {
                            "steps": row.get("steps"),
                            "heldout_acc": row.get("heldout_acc"),
                            "made_on": row.get("made_on"),
                        },
                    }
                )
                continue
            if stored is not None:  # replace: the stored model's results go, the bundle's run takes its row
                for model in RESULT_TABLES:
                    session.execute(delete(model).where(model.run_id == stored.id))
                for key, value in fields.items():
                    if key != "id":
                        setattr(stored, key, value)
                id_map[row["id"]] = stored.id
                replaced.append(stored.id)
                continue
            run = Run(**fields)
            session.add(run)
            session.flush()
            id_map[row["id"]] = run.id
            added += 1
        settings_map, settings_added = _import_settings(session, tables[MeasureSettings.__tablename__])
        rows_added: dict[str, int] = {}
        for model in RESULT_TABLES:
            key = _unique_keys(model)
            rows = [r for r in tables[model.__tablename__] if r.get("run_id") in id_map]
            target_ids = sorted({id_map[r["run_id"]] for r in rows})
            have = set()
            if target_ids:
                cols = [getattr(model, k) for k in key]
                have = {tuple(t) for t in session.execute(select(*cols).where(model.run_id.in_(target_ids)))}
            new = []
            for r in rows:
                fields = _for_table(
                    model, {**r, "run_id": id_map[r["run_id"]], "settings_id": settings_map.get(r.get("settings_id"))}
                )
                k = tuple(fields.get(c, _default(model, c)) for c in key)
                if k not in have:
                    have.add(k)
                    new.append(model(**fields))
            session.add_all(new)
            if model is not ResultWeights or rows:  # result_weights counted only where a bundle has them
                rows_added[model.__tablename__] = len(new)
        if added or replaced or any(rows_added.values()):
            session.add(
                Job(
                    kind=IMPORT_JOB_KIND,
                    state="succeeded",
                    params={
                        "suite": manifest.get("suite"),
                        "source": source,
                        "manifest_created_at": manifest.get("created_at"),
                        "devices": manifest.get("devices"),
                        "git_commit": manifest.get("git_commit"),
                    },
                    config_hash=config_hash({k: manifest.get(k) for k in ("suite", "created_at", "git_commit")}),
                    message=f"imported {added} run(s) of suite {manifest.get('suite')!r}",
                    progress=1.0,
                    result={"manifest": manifest},  # provenance for a later re-export (imported_manifest)
                    finished_at=datetime.now(UTC),
                )
            )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    if store_dir is not None:
        for name, blob in weights.items():
            if not _WEIGHT_NAME.fullmatch(name):  # only weights/<checkpoint id>/<file>: no path escapes
                continue
            target = Path(store_dir) / name.removeprefix("weights/")
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob)
    return {
        "suite": manifest.get("suite"),
        "runs_added": added,
        "runs_present": present,
        "runs_replaced": len(replaced),
        "runs_conflicting": conflicting,
        "rows_added": rows_added,
        "settings_added": settings_added,
    }


def _store_learned_and_tasks(learned: dict[str, bytes], store_dir: Path) -> None:
    """Put a bundle's artifacts and file tasks into the model store (checked against their hashes;
    a task name already bound here to other data is refused, as ``layerscope task add`` does)."""
    import hashlib

    from models_store.artifacts import ArtifactStore
    from science.tasks.file_task import TaskFile
    from science.tasks.task_store import TaskStore

    arts = ArtifactStore(store_dir)
    for name, blob in learned.items():
        m = _ARTIFACT_NAME.fullmatch(name)
        if m and hashlib.sha256(blob).hexdigest() == m.group(1) and not arts.path(m.group(1)).is_file():
            arts.dir.mkdir(parents=True, exist_ok=True)
            arts.path(m.group(1)).write_bytes(blob)
    names = json.loads(learned["tasks/names.json"]) if "tasks/names.json" in learned else {}
    tasks = TaskStore(store_dir / "tasks")
    for task_name, sha in names.items():
        blob = learned.get(f"tasks/{sha}.json")
        if blob is None:
            continue
        file = TaskFile.from_json(json.loads(blob))
        if file.digest != sha:
            raise BundleError(f"the bundle's task {task_name!r} is damaged (its data hashes otherwise)")
        tasks.add(file, task_name, source="bundle")


def _import_settings(session: Session, rows: list[dict[str, Any]]) -> tuple[dict[int, int], int]:
    """Get-or-create the bundle's ``measure_settings`` rows by ``config_hash`` (no commit);
    returns (bundle id → id here, rows added)."""
    out: dict[int, int] = {}
    added = 0
    for row in rows:
        if row.get("id") is None or not row.get("config_hash"):
            continue
        existing = session.execute(
            select(MeasureSettings.id).where(MeasureSettings.config_hash == row["config_hash"])
        ).scalar()
        if existing is None:
            obj = MeasureSettings(**_for_table(MeasureSettings, row))
            session.add(obj)
            session.flush()
            existing = obj.id
            added += 1
        out[row["id"]] = existing
    return out, added


def _default(model: Any, column: str) -> Any:
    col = model.__table__.columns[column]
    return col.default.arg if col.default is not None and not callable(col.default.arg) else None


def imported_suites(session: Session) -> set[str]:
    """Suites that came into this DB from a bundle (an ``import`` jobs row records each)."""
    rows = session.execute(select(Job.params).where(Job.kind == IMPORT_JOB_KIND)).scalars()
    return {p.get("suite") for p in rows if isinstance(p, dict) and p.get("suite")}
