"""Jobs: submit (validated params), list, detail with log tail, cancel, retry."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, Union

from fastapi import APIRouter, Body, Header, Query, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from backend.api.deps import (
    TOO_LARGE,
    UNAUTHORIZED,
    FactoryDep,
    OneIdempotencyKey,
    QueueDep,
    ReadAuth,
    Responses,
    SessionDep,
    SettingsDep,
    WriteAuth,
)
from backend.api.query_params import INT32_MAX, JobIdPath, Limit, Offset
from backend.api.schemas import ErrorOut, JobDetail, JobKind, JobOut, JobState, Page
from backend.api.submit_checks import memory_errors, model_source_errors, position_errors, run_param_errors
from layerscope_core.text import TEXT_PATTERN
from store import jobs as J
from store.measured import eval_lengths_in
from store.models import Job, Run
from worker.job_params import PARAMS_BY_KIND
from worker.queue import QueueUnavailable, submit, wake

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=UNAUTHORIZED)


def _job_create_model(kind: str, params_model: type[BaseModel]) -> type[BaseModel]:
    return create_model(
        f"{kind.capitalize()}JobCreate",
        __config__=ConfigDict(extra="forbid"),
        kind=(Literal[kind], Field(description="job kind")),
        params=(params_model, Field(description=f"{params_model.__name__}: validated before the job is stored")),
        max_attempts=(int | None, Field(None, ge=1, le=20, description="default: settings.max_attempts")),
    )


JOB_CREATE_MODELS = {kind: _job_create_model(kind, model) for kind, model in PARAMS_BY_KIND.items()}


class _JobCreateFields(Protocol):
    """What the body model of every kind has: the type checker's view of :data:`JobCreate`."""

    kind: str
    params: BaseModel
    max_attempts: int | None


if TYPE_CHECKING:
    JobCreate = _JobCreateFields
else:  # the kinds' models, built above from PARAMS_BY_KIND; FastAPI reads this union at run time
    JobCreate = Annotated[Union[tuple(JOB_CREATE_MODELS.values())], Field(discriminator="kind")]  # noqa: UP007

NOT_FOUND: Responses = {404: {"model": ErrorOut, "description": "unknown job id"}}
CONFLICT: Responses = {409: {"model": ErrorOut, "description": "the job's state does not allow this"}}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}}
QUEUE_DOWN_SUBMIT: Responses = {
    503: {
        "model": ErrorOut,
        "headers": RETRY_AFTER,
        "description": "the job queue is not reachable: nothing was stored, submit again after Retry-After "
        "seconds (no duplicate)",
    }
}
QUEUE_DOWN_RETRY: Responses = {
    503: {
        "model": ErrorOut,
        "headers": RETRY_AFTER,
        "description": "the job queue is not reachable: the job is queued in the database and reaches the "
        "workers when the queue is back (retrying again answers 409)",
    }
}


def _retry_after(settings) -> str:
    """When the queue may be back, and when the reaper next re-queues stored jobs."""
    return str(max(1, math.ceil(settings.reap_every_seconds)))


def _queue_down(exc: QueueUnavailable, settings, *, retry: bool = False) -> JSONResponse:
    if retry or exc.stored:
        detail = (
            f"{exc} — job {exc.job_id} is stored and queued; it reaches the workers when the queue is "
            f"back, do not submit it again"
        )
    else:
        detail = f"{exc} — nothing was stored; submit again in {_retry_after(settings)} s"
    return JSONResponse(status_code=503, content={"detail": detail}, headers={"Retry-After": _retry_after(settings)})


IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=TEXT_PATTERN)]


def _job_for_key(session, key: str, body: Any, settings) -> dict[str, Any] | None:
    """The job made by an earlier request with Idempotency-Key ``key`` (None: none yet); a 422 at
    the header when that request was another (draft-ietf-httpapi-idempotency-key-header: a key
    reused with a different payload), naming what differs."""
    job = session.scalar(select(Job).where(Job.idempotency_key == key))
    if job is None:
        return None
    differs = _differences(job, body, settings)
    if differs:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("header", "Idempotency-Key"),
                    "msg": f"already used for job {job.id}, made by a request with another {differs}: "
                    "send a new key for a new job (the same key answers only the same request)",
                    "input": key,
                }
            ]
        )
    return _out(job)


def _differences(job: Job, body: Any, settings) -> str:
    """What of ``body`` differs from the request that made ``job`` ("" when nothing): its kind, or
    the validated params that differ and max_attempts (the body's, or the default it stood for)."""
    if job.kind != body.kind:
        return f"kind (a {job.kind} job)"
    sent = body.params.model_dump(mode="json")
    stored = _stored_params(job, sent)
    out = [f"params.{k}" for k in sorted(sent.keys() | stored.keys()) if sent.get(k) != stored.get(k)]
    if (body.max_attempts or settings.max_attempts) != job.max_attempts:
        out.append("max_attempts")
    return ", ".join(out)


def _stored_params(job: Job, sent: dict[str, Any]) -> dict[str, Any]:
    """A job's params as the request's are compared with them: as stored (the validated params'
    JSON), or validated again when that differs, so a job stored before a parameter existed reads
    with its default."""
    if job.params == sent:
        return job.params
    try:
        return PARAMS_BY_KIND[job.kind].model_validate(job.params).model_dump(mode="json")
    except (KeyError, ValidationError):  # params no kind of today takes: not the request's
        return job.params


def _out(job: Job) -> dict[str, Any]:
    return JobOut.model_validate(job).model_dump()


def _detail(session, job: Job, tail_lines: int) -> dict[str, Any]:
    d = _out(job)
    lines = (job.log or "").splitlines()
    d["log_tail"] = "\n".join(lines[-tail_lines:])
    d.update(J.children_summary(session, [job.id])[job.id])  # every id asked for has an entry
    return _with_suite_state(d)


def _with_suite_state(d: dict[str, Any]) -> dict[str, Any]:
    """A job's dict with ``state`` as every page and the CLI read it (``store.jobs.suite_state``)
    and its row's own state in ``job_state``."""
    return {**d, "job_state": d["state"], "state": J.suite_state(d["state"], d.get("children"))}


def _check_run(params: Any, session, limit: int) -> None:
    """A job on a stored run (``params.run_id``) that could only fail is not queued: a 422 when
    the run is unknown, has no weights, cannot take the layers / eval lengths asked for, or its
    captured states would not fit in ``limit`` bytes."""
    run_id = getattr(params, "run_id", None)
    if run_id is None:
        return
    from worker.job_params import RebuildParams
    from worker.run_weights import missing_weights

    run = session.get(Run, run_id)
    rebuild = isinstance(params, RebuildParams)  # makes the weights: a run without them is what it takes
    # the checkpoint id only: a worker on another machine may hold the weights in its own store
    why = f"run {run_id} not found" if run is None else None if rebuild else missing_weights(run)
    if why:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body", "params", "run_id"), "msg": why, "input": run_id}]
        )
    if rebuild:  # the job queued after it is checked now, as it would be alone (its weights aside)
        if params.then is None:
            return
        params = params.then.params
    if errors := run_param_errors(params, run):  # layers / eval lengths the run's model cannot take
        raise RequestValidationError(errors)
    if errors := memory_errors(params, limit, run=run, measured=eval_lengths_in(session, run_id)):
        raise RequestValidationError(errors)


def _check_runs(body: Any, factory, limit: int) -> None:
    """The runs of a train or suite job: one run per seed per suite (for a suite, and for a single
    run in one), each run's estimated peak memory within ``limit`` bytes; a 422 naming the
    conflict, the runs over the limit, or why the suite cannot be expanded."""
    from worker.presets import expand_suite
    from worker.suite_settings import check_one_run_per_seed

    params = body.params
    loc = ("body", "params") if body.kind == "suite" else ("body", "params", "suite")
    try:
        jobs = expand_suite(params, local_files_only=True) if body.kind == "suite" else [params]
        check_one_run_per_seed(jobs, factory)
    except ValueError as exc:  # an unexpandable suite, or a SuiteSettingsConflict
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": loc,
                    "msg": str(exc),
                    "input": params.model_dump(mode="json") if body.kind == "suite" else getattr(params, "suite", None),
                }
            ]
        ) from exc
    if errors := memory_errors(params, limit, jobs=jobs if body.kind == "suite" else None):
        raise RequestValidationError(errors)
    if errors := position_errors(params, jobs=jobs if body.kind == "suite" else None):  # the worker would refuse it
        raise RequestValidationError(errors)


def _check_submission(body: Any, session, factory, settings) -> None:
    """What a job needs before it is stored, each a 422 naming the field: its run
    (:func:`_check_run`), the transformers models it names that are read here, one run per
    seed per suite, and a peak memory within ``settings.max_job_memory_gib`` (``worker.memory``;
    a suite naming a hub model not cached here is checked by its runner, which reads it from the
    hub, for one run per seed)."""
    from worker.memory import limit_bytes

    limit = limit_bytes(settings)
    _check_run(body.params, session, limit)
    errors, read_here = model_source_errors(body.params)  # the transformers models it names, read here only
    if errors:
        raise RequestValidationError(errors)
    if body.kind == "train" or (body.kind == "suite" and read_here):
        _check_runs(body, factory, limit)


@router.post(
    "",
    response_model=JobOut,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAuth, OneIdempotencyKey],  # several Idempotency-Key headers: a 400
    responses={
        **TOO_LARGE,
        400: {
            "model": ErrorOut,
            "description": "a body that cannot be parsed (not UTF-8 JSON), or several Idempotency-Key headers",
        },
        **QUEUE_DOWN_SUBMIT,
        200: {
            "model": JobOut,
            "description": "the job an earlier request with this Idempotency-Key made (nothing new was made)",
        },
    },
    summary="Submit a job; its params are validated per kind (422 names the bad field)",
)
def create_job(
    body: Annotated[JobCreate, Body()],
    session: SessionDep,
    factory: FactoryDep,
    settings: SettingsDep,
    queue: QueueDep,
    response: Response,
    idempotency_key: Annotated[
        IdempotencyKey | None,
        Header(
            alias="Idempotency-Key",
            description="any unique string per intended job (a UUID): the same key with the same "
            "request again answers the job the first request made (200) instead of making a second "
            "one; with another request (kind, params or max_attempts) it is a 422; sent more than "
            "once, a 400",
        ),
    ] = None,
) -> dict | JSONResponse:
    if idempotency_key is not None and (earlier := _job_for_key(session, idempotency_key, body, settings)) is not None:
        response.status_code = status.HTTP_200_OK
        return earlier
    _check_submission(body, session, factory, settings)
    session.rollback()  # end the read above: the job is written (and read back) on a fresh transaction
    try:
        # a person's job: taken before the queued jobs of background suites (the demo's)
        job_id = submit(
            factory,
            queue,
            body.kind,
            body.params,
            max_attempts=body.max_attempts or settings.max_attempts,
            priority=J.PERSON_PRIORITY,
            idempotency_key=idempotency_key,
        )
    except QueueUnavailable as exc:
        return _queue_down(exc, settings)
    except IntegrityError:  # a concurrent request with the same key stored its job first
        with factory() as s:
            earlier = _job_for_key(s, idempotency_key, body, settings) if idempotency_key else None
        if earlier is None:
            raise
        response.status_code = status.HTTP_200_OK
        return earlier
    with factory() as s:
        return _out(J.get_job(s, job_id))


@router.get("", response_model=Page[JobOut], dependencies=[ReadAuth], summary="Jobs, newest first, filtered and paged")
def list_jobs(
    session: SessionDep,
    state: Annotated[list[JobState] | None, Query(description="state(s)")] = None,
    kind: Annotated[list[JobKind] | None, Query(description="kind(s)")] = None,
    parent_id: Annotated[int | None, Query(ge=1, le=INT32_MAX, description="a suite job's children")] = None,
    run_id: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict:
    q = select(Job)
    if state:
        q = q.where(J.state_filter(state))
    if kind:
        q = q.where(Job.kind.in_(kind))
    if parent_id is not None:
        q = q.where(Job.parent_id == parent_id)
    if run_id is not None:
        q = q.where(Job.run_id == run_id)
    total = session.execute(select(func.count()).select_from(q.subquery())).scalar_one()
    items = [_out(j) for j in session.execute(q.order_by(Job.id.desc()).limit(limit).offset(offset)).scalars()]
    kids = J.children_summary(session, [j["id"] for j in items if j["kind"] == "suite"])
    items = [_with_suite_state({**j, **kids.get(j["id"], {})}) for j in items]
    return {"items": items, "total": int(total), "limit": limit, "offset": offset}


@router.get(
    "/{job_id}",
    response_model=JobDetail,
    responses=NOT_FOUND,
    dependencies=[ReadAuth],
    summary="One job with its log tail (and a suite's children by state)",
)
def get_job(
    job_id: JobIdPath, session: SessionDep, tail: Annotated[int, Query(ge=1, le=10_000, description="log lines")] = 50
) -> dict:
    return _detail(session, J.get_job(session, job_id), tail)


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses={**NOT_FOUND, **CONFLICT, **TOO_LARGE},
    dependencies=[WriteAuth],
    summary="Cancel: a queued job at once, a running one at its next check",
)
def cancel_job(job_id: JobIdPath, session: SessionDep) -> dict:
    return _out(J.request_cancel(session, job_id))


@router.post(
    "/{job_id}/retry",
    response_model=JobOut,
    responses={**NOT_FOUND, **CONFLICT, **TOO_LARGE, **QUEUE_DOWN_RETRY},
    dependencies=[WriteAuth],
    summary="Queue a failed or cancelled job again",
)
def retry_job(
    job_id: JobIdPath, session: SessionDep, factory: FactoryDep, settings: SettingsDep, queue: QueueDep
) -> dict | JSONResponse:
    job = J.retry(session, job_id)
    try:
        wake(factory, queue, [job.id])
    except QueueUnavailable as exc:
        return _queue_down(exc, settings, retry=True)
    return _out(job)
