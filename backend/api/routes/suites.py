"""Suites: the list (which ones were imported from a bundle) and a suite's results bundle."""

from __future__ import annotations

import io
import re
from typing import Annotated, Any, cast

from fastapi import APIRouter, HTTPException, Path, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy import select
from starlette.convertors import Convertor, register_url_convertor

from backend import housekeeping, study_parts
from backend.api.deps import TOO_LARGE, UNAUTHORIZED, CacheDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from backend.api.queries import NotFound, queued_suites
from backend.api.schemas import Annotation, AnnotationOut, Deleted, ErrorOut
from backend.bundle import imported_manifest, imported_suites
from backend.bundle_export import RunsBeingRebuilt, export_bundle
from backend.measured_runs import measured_run_ids
from science.trained import is_trained
from store.models import MeasureSettings, ProbeResult, Run, SuiteNote
from worker.persist import REMEASURING

router = APIRouter(prefix="/suites", tags=["suites"], dependencies=[ReadAuth], responses=UNAUTHORIZED)


class SuiteNameConvertor(Convertor[str]):
    """A suite's name in the path (``{name:suite}``), any characters, ``/`` included — except a
    path ending in ``/bundle``, which is the bundle route's (``PATCH …/x/bundle`` stays a 405,
    not a suite named ``x/bundle``). The server decodes ``%2F`` before routing, so ``a%2Fb``
    reaches the routes as ``a/b``: the suite-name rule, which forbids ``/``, answers it with a 422
    saying so, as for every name it breaks (a suite stored under such a name before the rule stays
    reachable), not a 404 for a path no route has. ``{name}`` (``[^/]+``) missed every such name;
    ``{name:path}`` (``.*``) would take ``…/x/bundle`` for PATCH and DELETE, and misses a newline."""

    regex = r"(?:(?!/bundle$)[\s\S])+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("suite", SuiteNameConvertor())  # before the routes below are made

SuiteName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=100,
        description="runs.suite; a name no stored suite has that breaks the suite-name rule "
        "(layerscope_core.suite_names) is a 422 saying why",
    ),
]


def _bad_name(name: str, exc: housekeeping.SuiteNameError) -> RequestValidationError:
    """A 422 at the path's ``name``: no suite can be named so (and none stored is)."""
    return RequestValidationError([{"type": "value_error", "loc": ("path", "name"), "msg": str(exc), "input": name}])


class SuiteOut(BaseModel):
    name: str
    n_runs: int
    n_trained: int  # runs trained for their task (science.trained.is_trained), measured or not
    n_measured: int  # runs with probe, intervention and patching results all stored (trained or not)
    n_trained_measured: int  # runs both trained and measured: the ones every claim can read
    n_controls: int = 0  # random-init control runs (docs/SCIENCE.md#controls), not counted in n_runs
    imported: bool  # loaded from a results bundle (`layerscope import`), not made by this installation
    # A suite named after a preset: the preset's run count and the runs not measured yet (status
    # ``complete``, as the bundle manifest's ``progress`` counts them); absent for other suites.
    preset_runs: int | None = None
    runs_remaining: int | None = None
    # True while a preset suite has runs remaining (False once complete); for a suite that is no
    # preset, True when the bundle it was imported from says it is partial (absent otherwise).
    partial: bool | None = None
    partial_why: str | None = None  # the imported manifest's partial ``why`` and ``notes``, if any
    tags: list[str] | None = None  # a researcher's labels (PATCH /api/suites/{name}); absent when none
    notes: str | None = None  # a researcher's remarks
    # Runs (controls included) being rebuilt now (status ``remeasuring``): their old results are
    # deleted and their own not all stored, so the bundle route answers 409 without allow_partial.
    # Absent when none.
    n_rebuilding: int | None = None
    # True for a suite whose jobs are queued or running and that has no run stored yet (its counts
    # are 0); absent otherwise.
    queued: bool | None = None
    # The eval lengths the suite's runs were probed at (ascending; a file task's is its rows'
    # length), and the lengths its runs trained at: the dashboard's length pickers offer these.
    eval_lengths: list[int] = []
    train_lengths: list[int] = []
    patch_lengths: list[int] = []  # the lengths its patching grids were measured at (recorded settings)


def _partial_why(manifest: dict | None) -> str | None:
    block = (manifest or {}).get("partial") or {}
    reasons = [block["why"]] if block.get("why") else []
    reasons += [n for n in block.get("notes") or [] if n and n not in reasons]
    return "; ".join(str(r) for r in reasons) or None


def _measured_lengths(session: SessionDep) -> dict[str, tuple[list[int], list[int]]]:
    """Each suite's (probed eval lengths, patching lengths), ascending: one DISTINCT over the probe
    rows and the settings they were measured with (whose ``patch_eval_length`` is the patching
    grid's length; the patching table itself is far larger)."""
    rows = session.execute(
        select(Run.suite, ProbeResult.eval_length, MeasureSettings.patch_eval_length)
        .join(ProbeResult, ProbeResult.run_id == Run.id)
        .outerjoin(MeasureSettings, MeasureSettings.id == ProbeResult.settings_id)
        .distinct()
    ).all()
    probed: dict[str, set[int]] = {}
    patched: dict[str, set[int]] = {}
    for suite, length, patch in rows:
        if suite is None:  # a run outside every suite: no suite's lengths
            continue
        probed.setdefault(suite, set()).add(int(length))
        if patch is not None:
            patched.setdefault(suite, set()).add(int(patch))
    return {k: (sorted(v), sorted(patched.get(k, ()))) for k, v in probed.items()}


@router.get(
    "",
    response_model=list[SuiteOut],
    response_model_exclude_none=True,
    summary="Suites with their run counts (stored, trained, measured); imported or made here; "
    "for a preset suite, its progress against the preset (partial while runs remain)",
    description="A suite submitted but without a run stored yet (its jobs queued or running) is listed "
    "too, with zero counts and `queued: true`.",
)
def list_suites(session: SessionDep, cache: CacheDep) -> list[dict]:
    # every column here is in ix_runs_read: on SQLite the query reads that index, not the rows
    # (past each run's loss curve); the training lengths come from the rows, stored before it
    rows = session.execute(
        select(Run.suite, Run.id, Run.heldout_acc, Run.early_stop_acc, Run.status, Run.config_hash, Run.control)
        .where(Run.suite.is_not(None))
        .order_by(Run.suite)
    ).all()
    train_lengths: dict[int, Any] = dict(
        session.execute(select(Run.id, Run.train_config["train_length"]).where(Run.suite.is_not(None))).all()
    )
    # read off the result rows alone: remembered until they change (the aggregates' fingerprint)
    lengths = cache.get(session, ("suites", "lengths"), lambda: _measured_lengths(session))
    ids = [r.id for r in rows]
    measured = cache.get(session, ("suites", "measured", *ids), lambda: measured_run_ids(session, ids))
    imported = imported_suites(session)
    out: dict[str, dict] = {}
    statuses: dict[str, list[dict]] = {}
    for named, rid, acc, crit, status, chash, control in rows:
        suite = cast(str, named)  # the query keeps runs with a suite only
        d = out.setdefault(suite, _zero_counts(suite, suite in imported, *lengths.get(suite, ([], []))))
        train_length = train_lengths.get(rid)
        if isinstance(train_length, int) and train_length not in d["train_lengths"]:
            d["train_lengths"] = sorted([*d["train_lengths"], train_length])
        statuses.setdefault(suite, []).append({"status": status, "config_hash": chash, "control": control})
        if status == REMEASURING:
            d["n_rebuilding"] = d.get("n_rebuilding", 0) + 1
        if control:
            d["n_controls"] += 1
            continue
        d["n_runs"] += 1
        d["n_trained"] += is_trained(acc, crit)
        d["n_measured"] += rid in measured
        d["n_trained_measured"] += is_trained(acc, crit) and rid in measured
    notes = {n.name: n for n in session.execute(select(SuiteNote)).scalars()}
    for suite, d in out.items():
        if suite in notes:
            d.update(tags=notes[suite].tags or None, notes=notes[suite].notes)
        manifest = imported_manifest(session, suite) if d["imported"] else None
        now = study_parts.progress(
            statuses[suite], study_parts.preset_run_count(suite, [r["config_hash"] for r in statuses[suite]])
        )
        if now is not None:
            d.update(preset_runs=now["preset_runs"], runs_remaining=now["runs_remaining"], partial=not now["complete"])
        elif manifest and manifest.get("partial"):
            d["partial"] = True
        if d.get("partial"):
            d["partial_why"] = _partial_why(manifest)
    return list(out.values()) + _queued_without_runs(session, set(out))


def _zero_counts(name: str, imported: bool, eval_lengths: list[int], patch_lengths: list[int]) -> dict[str, Any]:
    """A suite's row of :class:`SuiteOut` before its runs are counted."""
    return dict(
        name=name,
        n_runs=0,
        n_trained=0,
        n_measured=0,
        n_trained_measured=0,
        n_controls=0,
        imported=imported,
        eval_lengths=eval_lengths,
        patch_lengths=patch_lengths,
        train_lengths=[],
    )


def _queued_without_runs(session: SessionDep, listed: set[str]) -> list[dict]:
    """The suites submitted and still queued or running that have no run stored yet (the routes'
    404s already know them, ``queries.require_suites``): listed with zero counts, ``queued``."""
    out = []
    for name in sorted(queued_suites(session, pending_only=True) - listed):
        d = {**_zero_counts(name, False, [], []), "queued": True}
        now = study_parts.progress([], study_parts.preset_run_count(name))
        if now is not None:
            d.update(preset_runs=now["preset_runs"], runs_remaining=now["runs_remaining"], partial=True)
        out.append(d)
    return out


@router.get(
    "/{name:suite}/bundle",
    summary="The suite's results bundle (zip: manifest.json + tables/*.json)",
    responses={
        200: {"content": {"application/zip": {}}, "description": "the bundle"},
        404: {"model": ErrorOut, "description": "no run in this suite"},
        409: {"model": ErrorOut, "description": "runs of the suite are being rebuilt (without allow_partial)"},
    },
    response_class=Response,
)
def suite_bundle(
    name: SuiteName,
    session: SessionDep,
    allow_partial: Annotated[
        bool, Query(description="Export runs being rebuilt too (status remeasuring), without all their results.")
    ] = False,
) -> Response:
    buf = io.BytesIO()
    try:
        export_bundle(session, name, buf, allow_partial=allow_partial)
    except RunsBeingRebuilt as exc:  # their old results deleted, their own not all stored yet
        raise HTTPException(409, str(exc)) from exc
    except housekeeping.SuiteNameError as exc:
        raise _bad_name(name, exc) from exc
    except LookupError as exc:  # names the suites that exist
        raise HTTPException(404, str(exc.args[0])) from exc
    filename = re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".layerscope.zip"
    return Response(
        buf.getvalue(),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.patch(
    "/{name:suite}",
    response_model=AnnotationOut,
    dependencies=[WriteAuth],
    responses={**TOO_LARGE, 404: {"model": ErrorOut, "description": "no run in this suite"}},
    summary="Set a suite's tags and/or notes",
)
def annotate_suite(name: SuiteName, body: Annotation, session: SessionDep) -> dict:
    try:
        row = housekeeping.annotate_suite(session, name, tags=body.tags, notes=body.notes)
    except housekeeping.SuiteNameError as exc:
        raise _bad_name(name, exc) from exc
    except housekeeping.NotFoundError as exc:
        raise NotFound(str(exc)) from exc
    return {"tags": row.tags or [], "notes": row.notes}


@router.delete(
    "/{name:suite}",
    response_model=Deleted,
    dependencies=[WriteAuth],
    responses={404: {"model": ErrorOut, "description": "no run in this suite"}},
    summary="Delete a suite: its runs, their result rows and checkpoints (one transaction)",
    description="Export it first (GET /api/suites/{name}/bundle) to keep a copy.",
)
def delete_suite(name: SuiteName, session: SessionDep, settings: SettingsDep) -> dict:
    try:
        ids = housekeeping.suite_run_ids(session, name)
        return housekeeping.delete_runs(session, ids, settings.resolved_store_dir, suite=name)
    except housekeeping.SuiteNameError as exc:
        raise _bad_name(name, exc) from exc
    except housekeeping.NotFoundError as exc:
        raise NotFound(str(exc)) from exc
