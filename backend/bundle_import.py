"""Loading a results bundle into the results DB (the format: ``backend.bundle``) without
duplicating rows already present, in one transaction; its checkpoints, probe weights / removed
directions and file tasks into the model store."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.orm import Session

from backend.bundle import (
    IMPORT_JOB_KIND,
    RESULT_TABLES,
    WEIGHT_NAME,
    BundleError,
    column_default,
    for_table,
    read_bundle,
    unique_keys,
)
from backend.bundle_guard import Streamed, ZipRefused, open_checked
from backend.bundle_stage import StoreTransaction
from layerscope_core import code_sources
from layerscope_core.atomic_file import write_atomic
from store.models import InterventionResult, Job, MeasureSettings, PatchingResult, ProbeResult, ResultWeights, Run
from worker import in_flight_measuring

__all__ = ["same_training", "training_differences", "import_bundle"]


def _close(a: Any, b: Any) -> bool:
    return a is None and b is None or (a is not None and b is not None and abs(float(a) - float(b)) < 1e-9)


def _same_json(a: Any, b: Any) -> bool:
    """Equal JSON values, numbers to 1e-9 (a loss curve as stored here and as the bundle has it)."""
    number = (int, float)
    if isinstance(a, number) and isinstance(b, number) and not isinstance(a, bool) and not isinstance(b, bool):
        return _close(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def training_differences(run: Run, row: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What differs between a stored run's training and a bundle's run of the same config hash:
    ``{field: (stored, bundle)}`` over ``checkpoint_id`` (the weights' hash, compared where both
    record one), ``steps``, ``heldout_acc`` and ``loss_curve``; empty: the same training.

    ``train_seconds`` and ``made_with`` are not compared: a run resumed from its checkpoint, or
    its weights rebuilt, on the same device ends bit for bit as the unbroken run
    (docs/SCIENCE.md#resuming-training), with other seconds and ``made_with.resumed_at_steps``."""
    out: dict[str, tuple[Any, Any]] = {}
    if run.checkpoint_id and row.get("checkpoint_id") and run.checkpoint_id != row["checkpoint_id"]:
        out["checkpoint_id"] = (run.checkpoint_id, row["checkpoint_id"])
    if run.steps != row.get("steps"):
        out["steps"] = (run.steps, row.get("steps"))
    if not _close(run.heldout_acc, row.get("heldout_acc")):
        out["heldout_acc"] = (run.heldout_acc, row.get("heldout_acc"))
    if not _same_json(run.loss_curve or [], row.get("loss_curve") or []):
        out["loss_curve"] = (len(run.loss_curve or []), len(row.get("loss_curve") or []))
    return out


def same_training(run: Run, row: dict[str, Any]) -> bool:
    """Whether a stored run and a bundle's run of the same config hash are the same model: no
    :func:`training_differences`. A run trained again or rebuilt elsewhere
    (docs/SCIENCE.md#rebuilding-weights) is another model under the same hash."""
    return not training_differences(run, row)


def _conflict(stored: Run, row: dict[str, Any], differs: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """A ``runs_conflicting`` entry: the stored run and the bundle's, side by side, and what
    differs (``{field: (stored, bundle)}``; ``loss_curve``: the curves' lengths)."""
    return {
        "name": stored.name,
        "config_hash": stored.config_hash,
        "stored": {"steps": stored.steps, "heldout_acc": stored.heldout_acc, "made_on": stored.made_on},
        "bundle": {
            "steps": row.get("steps"),
            "heldout_acc": row.get("heldout_acc"),
            "made_on": row.get("made_on"),
        },
        "differs": differs,
    }


class _RunImport:
    """The bundle's runs against the stored ones (see :func:`import_bundle`): ``id_map`` (bundle
    run id → id here) and the counts the import reports."""

    def __init__(self) -> None:
        self.id_map: dict[int, int] = {}
        self.added = self.present = self.controls_added = 0
        self.replaced: list[int] = []
        self.conflicting: list[dict[str, Any]] = []

    def import_run(self, session: Session, row: dict[str, Any], checkpoint_id: str | None, replace: bool) -> None:
        """One of the bundle's runs: present (the same model), left out (another model, no
        ``replace``), replacing the stored one, or added; ``checkpoint_id``: its weights as the
        store here will hold them (None: not loadable here for follow-up jobs)."""
        fields = for_table(Run, row)
        fields["checkpoint_id"] = checkpoint_id
        stored = session.execute(select(Run).where(Run.config_hash == row["config_hash"])).scalar()
        differs = training_differences(stored, row) if stored is not None else {}
        if stored is not None and not differs:
            if stored.checkpoint_id is None and fields["checkpoint_id"]:
                stored.checkpoint_id = fields["checkpoint_id"]
            self.id_map[row["id"]] = stored.id
            self.present += 1
        elif stored is not None and not replace:
            self.conflicting.append(_conflict(stored, row, differs))
        elif stored is not None:  # replace: the stored model's results go, the bundle's run takes its row
            for model in RESULT_TABLES:
                session.execute(delete(model).where(model.run_id == stored.id))
            for key, value in fields.items():
                if key != "id":
                    setattr(stored, key, value)
            self.id_map[row["id"]] = stored.id
            self.replaced.append(stored.id)
        else:
            run = Run(**fields)
            session.add(run)
            session.flush()
            self.id_map[row["id"]] = run.id
            self.added += 1
            self.controls_added += bool(row.get("control"))  # a random-init twin, not a trained run


def _import_results(
    session: Session, tables: dict[str, list[dict[str, Any]]], id_map: dict[int, int], settings_map: dict[int, int]
) -> dict[str, int]:
    """The result rows of the imported runs whose unique key is not stored yet (no commit);
    returns the rows added per table (``result_weights`` only where the bundle has some)."""
    rows_added: dict[str, int] = {}
    for model in RESULT_TABLES:
        key = unique_keys(model)
        rows = [r for r in tables[model.__tablename__] if r.get("run_id") in id_map]
        target_ids = sorted({id_map[r["run_id"]] for r in rows})
        have = set()
        if target_ids:
            cols = [getattr(model, k) for k in key]
            have = {tuple(t) for t in session.execute(select(*cols).where(model.run_id.in_(target_ids)))}
        new = []
        for r in rows:
            fields = for_table(
                model,
                {
                    **r,
                    "run_id": id_map[r["run_id"]],
                    "settings_id": None if r.get("settings_id") is None else settings_map.get(r["settings_id"]),
                },
            )
            k = tuple(fields.get(c, column_default(model, c)) for c in key)
            if k not in have:
                have.add(k)
                new.append(model(**fields))
        session.add_all(new)
        if model is not ResultWeights or rows:  # result_weights counted only where a bundle has them
            rows_added[model.__tablename__] = len(new)
    return rows_added


def _import_job(manifest: dict[str, Any], source: str | None, added: int, started: datetime) -> Job:
    """The finished ``import`` jobs row that records an import (the suite picker reads it; its
    manifest is the provenance of a later re-export, ``imported_manifest``): created and started
    when the import began, finished now (the row's default creation time came after its end)."""
    from worker.job_params import config_hash

    return Job(
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
        created_at=started,
        started_at=started,
        finished_at=datetime.now(UTC),
    )


def _store_training(
    session: Session,
    training: dict[str, Any],
    entries: list[dict[str, Any]],
    store_dir: Path | None,
    txn: StoreTransaction | None = None,
) -> list[dict[str, Any]]:
    """The bundle's in-flight training states (checked by ``read_bundle``; ``training``: entry
    name → bytes, or a function writing them: :func:`_writers`) into
    ``<store>/training/`` (docs/SCIENCE.md#resuming-training): each checkpoint whole or not at
    all; a state already there (perhaps further along) is kept, and none is written for a run
    stored here (its training is over), nor anywhere without ``store_dir``.

    Returns one entry per state: ``config_hash``, ``name``, ``step`` (None: unknown), ``resume``
    (the ``layerscope suite`` command that resumes it; None: its note records none), ``checked``
    (its files matched the size and sha256 the manifest records; False: the bundle records none),
    ``restored`` (bool) and ``why_not`` (None when restored)."""
    from worker.in_flight import TRAINING_NAME

    stored = set(session.scalars(select(Run.config_hash)))
    by_hash = {e.get("config_hash"): e for e in entries}
    out = []
    for h in sorted({m.group(1) for n in training if (m := TRAINING_NAME.fullmatch(n))}):
        note = json.loads(training[f"training/{h}.json"])  # read_bundle checked it is a JSON object
        entry = by_hash.get(h, {})
        target = Path(store_dir or ".") / "training" / f"{h}.pt"
        why_not = (
            "no model store to put it in"
            if store_dir is None
            else "its run is stored here (its training is over)"
            if h in stored
            else "a training state of this run is here already (kept)"
            if target.exists()
            else None
        )
        if why_not is None:
            target.parent.mkdir(parents=True, exist_ok=True)
            for name, path in ((f"training/{h}.json", target.with_suffix(".json")), (f"training/{h}.pt", target)):
                if not path.exists():  # the note first: a note without its checkpoint is never resumed
                    write_atomic(path, training[name])  # a resumed run never reads half a state
                    if txn is not None:
                        txn.created([path])
        out.append(
            {
                "config_hash": h,
                "name": note.get("name", entry.get("name")),
                "step": entry.get("step"),
                "resume": note.get("resume"),
                "checked": "files" in entry,
                "restored": why_not is None,
                "why_not": why_not,
            }
        )
    return out


def import_bundle(
    session: Session,
    path: Path | io.BytesIO,
    *,
    store_dir: Path | None = None,
    source: str | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Load a bundle into the results DB without duplicating rows already present; one
    transaction over the database and, with ``store_dir``, the model store
    (``backend.bundle_stage``: every checkpoint and artifact is streamed, verified against its
    hash and its run's model config before a row is written; a failure at any step leaves no
    row and removes every file placed). A run stored here with the same config hash but another training
    (:func:`training_differences`: trained again, or its weights rebuilt on another device, here or
    where the bundle was made) is another model: its rows
    are never mixed with the bundle's. It is kept, and the bundle's run and rows left out
    (``runs_conflicting``), unless ``replace``: then its results are deleted and the bundle's run
    and rows take its place (``runs_replaced``). A stored run that is the bundle's model but has
    no weights gets the bundle's, when the bundle carries them.

    Returns: ``suite``, ``runs_added`` (``controls_added`` of them random-init controls), ``runs_present``, ``runs_replaced``, ``runs_conflicting``
    (one ``{name, config_hash, stored, bundle, differs}`` per run left out), ``rows_added`` (per
    table), ``settings_added``, ``in_flight_restored`` (how many training states of runs in
    flight were put into the store, with ``store_dir``), ``in_flight_states`` (one per state in
    the bundle, restored or not and why, with the command that resumes it: :func:`_store_training`),
    ``measuring_restored`` and ``measuring_states`` (the same for the measurements in flight:
    ``worker.in_flight_measuring.restore``), ``code_missing`` (one line per task, family or method
    the bundle's ``code_sources`` name that is not installed here:
    ``layerscope_core.code_sources.missing_here``).

    Raises:
        BundleError: see :func:`backend.bundle.read_bundle` (a training state in flight whose
            size or sha256 is not the manifest's refuses the bundle before anything is written);
            a checkpoint or artifact that does not hash to its name, or a checkpoint that is not
            its run's model, named; a row the database refuses.
        OSError: the store cannot be written (a full disk): nothing of the import is kept.
    """
    started = datetime.now(UTC)
    manifest, tables = read_bundle(path)
    members = manifest.pop("_members")
    learned = manifest.pop("_learned", {})
    training = manifest.pop("_training", {})
    measuring = manifest.pop("_measuring", {})
    with (
        StoreTransaction(Path(store_dir)) if store_dir is not None else contextlib.nullcontext() as txn,
        open_checked(path) if store_dir is not None else contextlib.nullcontext() as z,
    ):
        if txn is not None and z is not None:  # every checkpoint and artifact verified before a row or file is written
            try:
                txn.stage(z, tables["runs"])
            except ZipRefused as exc:
                raise BundleError(f"{source or path}: refused as a whole, nothing imported: {exc}") from None
            training, measuring = _writers(training, z), _writers(measuring, z)
        try:
            out = _import_rows(session, manifest, tables, members, store_dir, source, replace, started)
            if (
                txn is not None and store_dir is not None
            ):  # the store's half, undone with the rows if anything fails before the commit
                txn.place()
                txn.created(_store_tasks(learned, Path(store_dir)))
            out["in_flight_states"] = _store_training(
                session, training, manifest.get("in_flight") or [], store_dir, txn
            )
            out["measuring_states"] = _store_measuring(session, measuring, store_dir, txn)
            session.commit()
        except (IntegrityError, DataError) as exc:  # a row the checks let through and the database does not
            _undo(session, txn, exc)
            why = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc).splitlines()[0]
            raise BundleError(
                f"{source or path}: refused as a whole, nothing imported: the database refused a row ({why})"
            ) from exc
        except ZipRefused as exc:  # a state or piece read otherwise than when it was checked
            _undo(session, txn, exc)
            raise BundleError(f"{source or path}: refused as a whole, nothing imported: {exc}") from None
        except BaseException as exc:
            _undo(session, txn, exc)
            raise
    out["code_missing"] = code_sources.missing_here(manifest.get("code_sources"))
    out["in_flight_restored"] = sum(st["restored"] for st in out["in_flight_states"])
    out["measuring_restored"] = sum(m["restored"] for m in out["measuring_states"])
    return out


def _writers(blobs: dict[str, Any], z: zipfile.ZipFile) -> dict[str, Any]:
    """``blobs`` (``read_bundle``'s in-flight members) with each member read through
    (``bundle_guard.Streamed``) turned into a function copying it from ``z`` into a file: a state
    or piece is never held whole, and is refused if it reads otherwise than when it was checked."""
    return {n: functools.partial(b.copy_to, z) if isinstance(b, Streamed) else b for n, b in blobs.items()}


def _undo(session: Session, txn: StoreTransaction | None, exc: BaseException) -> None:
    """Roll the import back: its rows, and every file it put into the store (named on ``exc``
    where one could not be removed)."""
    session.rollback()
    failed = txn.undo() if txn is not None else []
    if failed:
        exc.add_note(f"the import could not remove what it wrote to the model store: {', '.join(failed)}")


def _import_rows(
    session: Session,
    manifest: dict[str, Any],
    tables: dict[str, list[dict[str, Any]]],
    members: list[str],
    store_dir: Path | None,
    source: str | None,
    replace: bool,
    started: datetime,
) -> dict[str, Any]:
    """The bundle's rows into ``session`` (flushed, not committed); the counts of :func:`import_bundle`."""
    carried = {n.split("/")[1] for n in members if WEIGHT_NAME.fullmatch(n)}

    def checkpoint_here(row: dict[str, Any]) -> str | None:  # its weights are in the bundle and go to the store
        ckpt = row.get("checkpoint_id")
        return ckpt if ckpt and store_dir is not None and ckpt in carried else None

    runs = _RunImport()
    for row in tables["runs"]:
        runs.import_run(session, row, checkpoint_here(row), replace)
    settings_map, settings_added = _import_settings(session, tables[MeasureSettings.__tablename__])
    rows_added = _import_results(session, tables, runs.id_map, settings_map)
    if runs.added or runs.replaced or any(rows_added.values()):
        session.add(_import_job(manifest, source, runs.added, started))
    session.flush()
    return {
        "suite": manifest.get("suite"),
        "runs_added": runs.added,
        "controls_added": runs.controls_added,
        "runs_present": runs.present,
        "runs_replaced": len(runs.replaced),
        "runs_conflicting": runs.conflicting,
        "rows_added": rows_added,
        "settings_added": settings_added,
    }


def _store_measuring(
    session: Session, measuring: dict[str, Any], store_dir: Path | None, txn: StoreTransaction | None
) -> list[dict[str, Any]]:
    """The measurements in flight into the store (``worker.in_flight_measuring.restore``), each
    folder restored recorded with ``txn`` (undone with the import)."""
    states = in_flight_measuring.restore(measuring, store_dir, lambda note: _part_stored(session, note))
    if txn is not None and store_dir is not None:
        txn.created(Path(store_dir) / in_flight_measuring.FOLDER / m["folder"] for m in states if m["restored"])
    return states


def _part_stored(session: Session, note: dict[str, Any]) -> bool:
    """Whether the run a measuring folder's ``note`` names is stored here with rows of its part."""
    tables: dict[str, type[ProbeResult] | type[InterventionResult] | type[PatchingResult]] = {
        "probes": ProbeResult,
        "interventions": InterventionResult,
        "patching": PatchingResult,
    }
    part = note.get("part")
    table = tables.get(part) if isinstance(part, str) else None
    run_id = session.scalar(select(Run.id).where(Run.config_hash == note.get("config_hash")))
    return (
        table is not None
        and run_id is not None
        and session.scalar(select(table.id).where(table.run_id == run_id).limit(1)) is not None
    )


def _store_tasks(learned: dict[str, bytes], store_dir: Path) -> list[Path]:
    """Put a bundle's file tasks into the model store (each checked against its hash; a task
    name already bound here to other data is refused, as ``layerscope task add`` does); returns
    the files created (undone with the import).

    Raises:
        BundleError: a task whose data hashes otherwise, or that ``tasks/names.json`` names
            without its file.
    """
    from science.tasks.file_task import TaskFile
    from science.tasks.task_store import TaskStore

    names = json.loads(learned["tasks/names.json"]) if "tasks/names.json" in learned else {}
    if not isinstance(names, dict):
        raise BundleError("tasks/names.json: not an object (task name → sha256)")
    tasks = TaskStore(store_dir / "tasks")
    created: list[Path] = []
    for task_name, sha in names.items():
        blob = learned.get(f"tasks/{sha}.json")
        if blob is None:
            raise BundleError(f"tasks/names.json: names task {task_name!r} with tasks/{sha}.json, not in the bundle")
        file = TaskFile.from_json(json.loads(blob))
        if file.digest != sha:
            raise BundleError(f"the bundle's task {task_name!r} is damaged (its data hashes otherwise)")
        new = [p for p in (tasks.root / f"{sha}.json", tasks.root / "names" / f"{task_name}.json") if not p.exists()]
        tasks.add(file, task_name, source="bundle")
        created += [p for p in new if p.exists()]
    return created


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
            obj = MeasureSettings(**for_table(MeasureSettings, row))
            session.add(obj)
            session.flush()
            existing = obj.id
            added += 1
        out[row["id"]] = existing
    return out, added
