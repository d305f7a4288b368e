"""Runs and their per-layer results."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from backend import housekeeping
from backend.api import queries
from backend.api.deps import (
    TOO_LARGE,
    UNAUTHORIZED,
    FactoryDep,
    QueueDep,
    ReadAuth,
    Responses,
    SessionDep,
    SettingsDep,
    WriteAuth,
)
from backend.api.query_params import (
    ControlsQ,
    EvalLengthQ,
    FamilyQ,
    Limit,
    MethodQ,
    Offset,
    PatchSiteQ,
    PretrainedQ,
    RunIdPath,
    RunSortQ,
    SeedQ,
    SiteNameQ,
    SuiteQ,
    TaskQ,
    TrainedQ,
)
from backend.api.routes.jobs import QUEUE_DOWN_SUBMIT, _out, _queue_down
from backend.api.schemas import (
    Annotation,
    Deleted,
    ErrorOut,
    InterventionOut,
    JobOut,
    Page,
    PatchingOut,
    ProbeOut,
    RunDetail,
    RunOut,
)
from layerscope_core.sites import parse_site, site_name
from store.models import Run, row_columns

router = APIRouter(prefix="/runs", tags=["runs"], dependencies=[ReadAuth], responses=UNAUTHORIZED)
NOT_FOUND: Responses = {404: {"model": ErrorOut, "description": "unknown run id"}}


@router.get("", response_model=Page[RunOut], summary="Runs, filtered and paged (without loss curves)")
def list_runs(
    session: SessionDep,
    task: TaskQ = None,
    family: FamilyQ = None,
    seed: SeedQ = None,
    suite: SuiteQ = None,
    pretrained: PretrainedQ = None,
    limit: Limit = 100,
    offset: Offset = 0,
    sort: RunSortQ = None,
    trained: TrainedQ = None,
    controls: ControlsQ = "include",
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=r"^[^\x00-\x1f\x7f-\x9f]*$",
            description="search: a substring of name, tags, notes, family, task or suite (case-insensitive)",
        ),
    ] = None,
) -> dict:
    flt = queries.RunFilter(
        task=task,
        family=family,
        seed=seed,
        suite=suite,
        pretrained=pretrained,
        trained=trained,
        controls=controls,
        search=q or None,
    )
    items, total = queries.list_runs(session, flt, limit, offset, sort)
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/{run_id}", response_model=RunDetail, responses=NOT_FOUND, summary="One run, with its loss curve")
def get_run(run_id: RunIdPath, session: SessionDep) -> dict:
    run = queries.get_run(session, run_id)
    return {c.key: getattr(run, c.key) for c in row_columns(Run)}


@router.patch(
    "/{run_id}",
    response_model=RunOut,
    responses={**NOT_FOUND, **TOO_LARGE},
    dependencies=[WriteAuth],
    summary="Set a run's tags and/or notes",
)
def annotate_run(run_id: RunIdPath, body: Annotation, session: SessionDep) -> dict:
    try:
        run = housekeeping.annotate_run(session, run_id, tags=body.tags, notes=body.notes)
    except housekeeping.NotFoundError as exc:
        raise queries.NotFound(str(exc)) from exc
    return queries.run_row(run)


@router.delete(
    "/{run_id}",
    response_model=Deleted,
    responses=NOT_FOUND,
    dependencies=[WriteAuth],
    summary="Delete a run with its probe, intervention and patching rows and its checkpoint",
)
def delete_run(run_id: RunIdPath, session: SessionDep, settings: SettingsDep) -> dict:
    """One transaction: the rows go, the checkpoint folder is removed after the commit (kept when
    another run names it); jobs keep their row with ``run_id`` null."""
    try:
        return housekeeping.delete_runs(session, [run_id], settings.resolved_store_dir)
    except housekeeping.NotFoundError as exc:
        raise queries.NotFound(str(exc)) from exc


@router.get(
    "/{run_id}/probes",
    response_model=list[ProbeOut],  # type: ignore[valid-type]  # a model built at import (schemas.record_schema)
    responses=NOT_FOUND,
    summary="Probe accuracy per layer and eval length",
)
def run_probes(run_id: RunIdPath, session: SessionDep, eval_length: EvalLengthQ = None) -> list[dict]:
    return [
        {**r, "site_name": site_name("resid_post", r["layer"])}
        for r in queries.probe_rows(session, run_id, eval_length)
    ]


@router.get(
    "/{run_id}/interventions",
    response_model=list[InterventionOut],  # type: ignore[valid-type]  # a model built at import (schemas.record_schema)
    responses=NOT_FOUND,
    summary="Interventions per layer, method and eval length (with the refit probe)",
)
def run_interventions(
    run_id: RunIdPath, session: SessionDep, eval_length: EvalLengthQ = None, method: MethodQ = None
) -> list[dict]:
    return queries.intervention_rows(session, run_id, eval_length, method)


@router.get(
    "/{run_id}/patching",
    response_model=list[PatchingOut],  # type: ignore[valid-type]  # a model built at import (schemas.record_schema)
    responses=NOT_FOUND,
    summary="Activation-patching recovery per site × layer × position",
)
def run_patching(
    run_id: RunIdPath,
    session: SessionDep,
    eval_length: EvalLengthQ = None,
    site: PatchSiteQ = None,
    at: SiteNameQ = None,
) -> list[dict]:
    """Rows ordered by eval length, site, layer, position. ``recovery`` is None (with ``note``)
    when too few pairs had a usable clean–corrupted gap; ``corrupt_position`` is the grid's
    corrupted token (0-based). ``site_name`` names each row's site in TransformerLens's style;
    ``at`` keeps the rows of those names only (``blocks.2.state``, ``embed``, ...)."""
    wanted = {parse_site(n) for n in at} if at else None
    rows = queries.patching_rows(session, run_id, eval_length, sorted({s for s, _ in wanted}) if wanted else site)
    out = []
    for r in rows:
        if wanted is None or (r["site"], r["layer"]) in wanted:
            out.append({**r, "site_name": site_name(r["site"], r["layer"])})
    return out


class RebuildOptions(BaseModel):
    """The options of a rebuild (``RebuildParams`` without the run, which the path names)."""

    model_config = ConfigDict(extra="forbid")
    acc_tolerance: float = Field(0.01, ge=0, le=1, description="held-out accuracy may differ by this much (0..1)")
    loss_tolerance: float = Field(0.05, ge=0, le=100, description="the loss may differ by this much (nats) at a step")
    as_suite: str | None = Field(
        None, description="on disagreement, store the rebuild as a new run of this suite (None: store nothing)"
    )
    then: dict | None = Field(
        None, description='a job on the run queued once its weights are there: {"kind": "intervene", "params": {...}}'
    )


@router.post(
    "/{run_id}/rebuild-weights",
    response_model=JobOut,
    status_code=201,
    dependencies=[WriteAuth],
    responses={
        **NOT_FOUND,
        **TOO_LARGE,
        **QUEUE_DOWN_SUBMIT,
        409: {"model": ErrorOut, "description": "the run has its weights here"},
    },
    summary="Queue the rebuild of a run's weights, checked against its record, its results kept",
    description="For a run stored without weights (imported from a bundle without them): a `rebuild` job "
    "(`layerscope runs rebuild-weights`) trains it again within its recorded steps and checks the steps, "
    "loss curve and held-out accuracy against its record. On agreement the weights are attached and every "
    "stored result is kept (the suite's claims do not change); on disagreement nothing is stored (the job "
    "fails saying by how much), or, with `as_suite`, the rebuild is stored as a new run of that suite. "
    "`then` queues a job on the run (e.g. an intervene) once the weights are there "
    "(docs/SCIENCE.md#rebuilding-weights).",
)
def rebuild_weights(
    run_id: RunIdPath,
    session: SessionDep,
    factory: FactoryDep,
    settings: SettingsDep,
    queue: QueueDep,
    options: RebuildOptions | None = None,
) -> dict | JSONResponse:
    from fastapi import HTTPException
    from fastapi.exceptions import RequestValidationError
    from pydantic import ValidationError

    from store import jobs as J
    from worker.job_params import RebuildParams
    from worker.queue import QueueUnavailable, submit
    from worker.run_weights import missing_weights

    run = queries.get_run(session, run_id)
    if missing_weights(run, settings.resolved_store_dir) is None:
        raise HTTPException(409, detail=f"run {run_id} has its weights here (checkpoint {run.checkpoint_id})")
    try:
        params = RebuildParams(run_id=run_id, **(options.model_dump() if options else {}))
    except ValidationError as exc:  # named in the body, as POST /api/jobs names them
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False, include_context=False)]
        ) from exc
    session.rollback()
    try:
        job_id = submit(
            factory, queue, "rebuild", params, max_attempts=settings.max_attempts, priority=J.PERSON_PRIORITY
        )
    except QueueUnavailable as exc:
        return _queue_down(exc, settings)
    with factory() as s:
        return _out(J.get_job(s, job_id))
