"""The job state machine on the ``jobs`` table (web-free; the API and the workers share it).

queued → running → succeeded | failed | cancelled. Every transition is one conditional UPDATE,
so two workers racing for a job, or a reaper racing a slow worker, never both win:
a worker owns a running job by (worker name, attempt) and its writes are ignored once it no
longer does. The table is the one store of a job's state (its state, attempt, heartbeat and
priority): the queue (``worker.queue``) carries only wake-ups, job ids, sent from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement, and_, exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from layerscope_core.hashing import config_hash
from store.models import Job, utcnow
from store.session import rows_matched

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)  # every job state, in lifecycle order
FINISHED = (SUCCEEDED, FAILED, CANCELLED)


class JobNotFound(LookupError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class JobStateError(ValueError):
    """A transition that the job's current state does not allow (cancel a finished job ...)."""


def params_hash(params: BaseModel) -> str:
    fn = getattr(params, "config_hash", None)
    if callable(fn):
        return str(fn())
    return config_hash(params.model_dump(mode="json"))


PERSON_PRIORITY = 10  # jobs a person launches (POST /api/jobs) before background suites' (0)
RESUMED_AHEAD = 1  # a job that has run before goes ahead of its priority's others (wake_priority)


def new_job(
    kind: str, params: BaseModel, *, parent_id: int | None = None, max_attempts: int = 3, priority: int = 0
) -> Job:
    """An unsaved queued job for already-validated ``params``; ``priority``: higher is taken first."""
    now = utcnow()
    return Job(
        kind=kind,
        state=QUEUED,
        params=params.model_dump(mode="json"),
        config_hash=params_hash(params),
        parent_id=parent_id,
        attempt=0,
        max_attempts=max_attempts,
        progress=0.0,
        message="queued",
        log="",
        cancel_requested=False,
        created_at=now,
        enqueued_at=now,
        priority=priority,
    )


def get_job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


def claim(session: Session, job_id: int, worker: str) -> int | None:
    """queued → running for ``worker``; returns the new attempt number, or None if the job is
    not (any longer) queued: claimed by another worker, finished, cancelled or unknown."""
    now = utcnow()
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == QUEUED)
        .values(
            state=RUNNING,
            attempt=Job.attempt + 1,
            worker=worker,
            started_at=now,
            heartbeat_at=now,
            progress=0.0,
            message="started",
            error=None,
            finished_at=None,
        )
        .execution_options(synchronize_session=False)
    )
    if rows_matched(res) != 1:
        session.rollback()
        return None
    attempt = session.execute(select(Job.attempt).where(Job.id == job_id)).scalar_one()
    session.commit()
    return int(attempt)


def _owned(job_id: int, worker: str, attempt: int):
    return (Job.id == job_id, Job.state == RUNNING, Job.worker == worker, Job.attempt == attempt)


def heartbeat(session: Session, job_id: int, worker: str, attempt: int, **fields: Any) -> tuple[bool, bool]:
    """Write heartbeat_at (+ progress/message/log given in ``fields``) if the worker still owns
    the job. Returns (still_owned, cancel_requested)."""
    res = session.execute(
        update(Job)
        .where(*_owned(job_id, worker, attempt))
        .values(heartbeat_at=utcnow(), **fields)
        .execution_options(synchronize_session=False)
    )
    owned = rows_matched(res) == 1
    cancel = bool(session.execute(select(Job.cancel_requested).where(Job.id == job_id)).scalar())
    session.commit()
    return owned, cancel


def children_summary(session: Session, parent_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per parent (suite) job: ``{"children": {state: count}, "children_progress": mean or None}``
    (one query each)."""
    if not parent_ids:
        return {}
    out: dict[int, dict[str, Any]] = {pid: {"children": {}, "children_progress": None} for pid in parent_ids}
    for pid, state, n in session.execute(
        select(Job.parent_id, Job.state, func.count())
        .where(Job.parent_id.in_(parent_ids))
        .group_by(Job.parent_id, Job.state)
    ):
        if pid is not None:  # the WHERE holds only children
            out[pid]["children"][state] = int(n)
    for pid, prog in session.execute(
        select(Job.parent_id, func.avg(Job.progress)).where(Job.parent_id.in_(parent_ids)).group_by(Job.parent_id)
    ):
        if pid is not None:
            out[pid]["children_progress"] = float(prog) if prog is not None else None
    return out


def suite_state(own: str, children: dict[str, int] | None) -> str:
    """The state a job reads everywhere (API, CLI, dashboard): its own, except for a suite job that
    has fanned out (its own state is then ``succeeded``): ``running`` while any of its runs is
    queued or running, else ``failed`` / ``cancelled`` when any run was, else ``succeeded``."""
    kids = children or {}
    if own != SUCCEEDED or not any(kids.values()):
        return own
    if kids.get(QUEUED) or kids.get(RUNNING):
        return RUNNING
    return next((s for s in (FAILED, CANCELLED) if kids.get(s)), SUCCEEDED)


def state_filter(states: Iterable[str]) -> ColumnElement[bool]:
    """A WHERE clause keeping the jobs whose :func:`suite_state` is one of ``states`` (a fanned-out
    suite job by its runs' states), so ``--state running`` lists a suite whose runs still run."""
    child = aliased(Job)

    def kids_in(*ss: str) -> ColumnElement[bool]:
        return exists().where(child.parent_id == Job.id, child.state.in_(ss))

    fanned = and_(Job.kind == "suite", Job.state == SUCCEEDED)
    by_state = {
        RUNNING: or_(Job.state == RUNNING, and_(fanned, kids_in(QUEUED, RUNNING))),
        SUCCEEDED: and_(Job.state == SUCCEEDED, or_(Job.kind != "suite", ~kids_in(QUEUED, RUNNING, FAILED, CANCELLED))),
        FAILED: or_(Job.state == FAILED, and_(fanned, ~kids_in(QUEUED, RUNNING), kids_in(FAILED))),
        CANCELLED: or_(Job.state == CANCELLED, and_(fanned, ~kids_in(QUEUED, RUNNING, FAILED), kids_in(CANCELLED))),
    }
    return or_(*(by_state.get(s, Job.state == s) for s in states))


def cancel_flag(session: Session, job_id: int) -> bool:
    return bool(session.execute(select(Job.cancel_requested).where(Job.id == job_id)).scalar())


class StoringRefused(Exception):
    """``begin_storing`` lost to a cancel (or the job was taken from the worker): store nothing."""


def begin_storing(session: Session, job_id: int, worker: str, attempt: int) -> bool:
    """Mark the worker's running job as storing its results, unless a cancel was requested (one
    conditional UPDATE: it and :func:`request_cancel`'s are serialised on the row, so exactly one
    wins). Returns whether the job may store; False: store nothing, end it cancelled."""
    res = session.execute(
        update(Job)
        .where(*_owned(job_id, worker, attempt), Job.cancel_requested.is_(False))
        .values(storing=True, heartbeat_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return rows_matched(res) == 1


def end_storing(session: Session, job_id: int) -> None:
    """The result write is committed (or rolled back): a cancel is a 200 again."""
    session.execute(
        update(Job).where(Job.id == job_id).values(storing=False).execution_options(synchronize_session=False)
    )
    session.commit()


def finish(
    session: Session,
    job_id: int,
    worker: str,
    attempt: int,
    state: str,
    *,
    error: str | None = None,
    result: dict[str, Any] | None = None,
    run_id: int | None = None,
    message: str | None = None,
    commit: bool = True,
) -> bool:
    """running → ``state`` if the worker still owns the job; returns whether it did. A job whose
    cancel was requested (answered 200) never becomes ``succeeded``: it ends ``cancelled``."""
    assert state in FINISHED
    if state == SUCCEEDED and cancel_flag(session, job_id):
        state, result, run_id, message = CANCELLED, None, None, "cancelled"
    values: dict[str, Any] = dict(
        storing=False,
        state=state,
        finished_at=utcnow(),
        heartbeat_at=utcnow(),
        error=error,
        message=message if message is not None else state,
    )
    if state == SUCCEEDED:
        values["progress"] = 1.0
    if result is not None:
        values["result"] = result
    if run_id is not None:
        values["run_id"] = run_id
    owned = _owned(job_id, worker, attempt)
    if state == SUCCEEDED:  # a cancel landing between the read above and this write: not succeeded
        owned = (*owned, Job.cancel_requested.is_(False))
    res = session.execute(update(Job).where(*owned).values(**values).execution_options(synchronize_session=False))
    if rows_matched(res) != 1 and state == SUCCEEDED and cancel_flag(session, job_id):
        return finish(session, job_id, worker, attempt, CANCELLED, message="cancelled", commit=commit)
    if commit:
        session.commit()
    return rows_matched(res) == 1


def retry_later(session: Session, job_id: int, worker: str, attempt: int, reason: str, delay_s: float) -> bool:
    """running → queued after a retryable failure (a full disk) while attempts remain, the
    attempt counted: ``enqueued_at`` is set ``delay_s`` ahead, and the reaper's pass
    (``worker.queue.requeue_orphans``) enqueues it once that time is past. Returns whether it
    did (False: not owned, no attempt left, or a cancel was requested)."""
    now = utcnow()
    res = session.execute(
        update(Job)
        .where(*_owned(job_id, worker, attempt), Job.attempt < Job.max_attempts, Job.cancel_requested.is_(False))
        .values(
            state=QUEUED,
            worker=None,
            storing=False,
            error=reason,
            heartbeat_at=now,
            enqueued_at=now + timedelta(seconds=delay_s),
            message=f"re-queued after attempt {attempt}: {reason[:500]}; taken again in {delay_s:g} s",
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return rows_matched(res) == 1


def release(session: Session, job_id: int, worker: str, attempt: int) -> bool:
    """running → queued when a worker stops gracefully mid-job (the attempt is not counted)."""
    res = session.execute(
        update(Job)
        .where(*_owned(job_id, worker, attempt))
        .values(
            state=QUEUED,
            worker=None,
            attempt=Job.attempt - 1,
            message="released by a stopping worker",
            enqueued_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return rows_matched(res) == 1


def request_cancel(session: Session, job_id: int) -> Job:
    """Cancel: a queued job is cancelled at once, a running one gets the flag its worker checks
    between steps and layers (and before each result write: it then stores nothing more and ends
    ``cancelled``); a suite's unfinished children are cancelled too.

    Raises:
        JobStateError: the job is finished, or storing its results (``jobs.storing``, set by
            :func:`begin_storing`): too late to cancel; it ends as that write lets it.
    """
    job = get_job(session, job_id)
    if job.state in FINISHED and job.kind != "suite":
        raise JobStateError(f"job {job_id} is already {job.state}")
    now = utcnow()
    ids = [job_id] + [c for c in _descendants(session, job_id)]
    session.execute(
        update(Job)
        .where(Job.id.in_(ids), Job.state == QUEUED)
        .values(state=CANCELLED, cancel_requested=True, finished_at=now, message="cancelled")
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(Job)
        .where(Job.id.in_(ids), Job.state == RUNNING, Job.storing.is_(False))
        .values(cancel_requested=True, message="cancel requested")
        .execution_options(synchronize_session=False)
    )
    session.commit()
    session.refresh(job)
    if job.kind != "suite":  # what the job became while this ran: only a flagged or cancelled job is a 200
        if job.state in (SUCCEEDED, FAILED):
            raise JobStateError(f"job {job_id} is already {job.state}")
        if job.state == RUNNING and not job.cancel_requested:
            raise JobStateError(f"job {job_id} is already storing its results; it cannot be cancelled now")
    return job


def _descendants(session: Session, job_id: int) -> list[int]:
    out: list[int] = []
    frontier = [job_id]
    while frontier:
        children = list(session.execute(select(Job.id).where(Job.parent_id.in_(frontier))).scalars())
        out += children
        frontier = children
    return out


def retry(session: Session, job_id: int) -> Job:
    """failed | cancelled → queued, its attempts counted afresh under the same limit
    (``max_attempts`` is kept: a retried 3-attempt job reads "attempt 1 of 3", not "of 4")."""
    job = get_job(session, job_id)
    if job.state not in (FAILED, CANCELLED):
        raise JobStateError(f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried")
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state.in_((FAILED, CANCELLED)))
        .values(
            state=QUEUED,
            cancel_requested=False,
            error=None,
            progress=0.0,
            message="queued (retry)",
            worker=None,
            finished_at=None,
            attempt=0,
            enqueued_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    session.refresh(job)
    return job


def reap_stale(
    session: Session, stale_after_seconds: float, now: datetime | None = None
) -> tuple[list[int], list[int]]:
    """Running jobs whose heartbeat is older than ``stale_after_seconds``: re-queued while
    attempts remain, else failed. Returns (requeued ids, failed ids); the caller enqueues."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=stale_after_seconds)
    stale = session.execute(
        select(Job.id, Job.attempt, Job.max_attempts, Job.worker, Job.cancel_requested).where(
            Job.state == RUNNING, Job.heartbeat_at < cutoff
        )
    ).all()
    requeued: list[int] = []
    failed: list[int] = []
    for job_id, attempt, max_attempts, worker, cancel in stale:
        cond = (Job.id == job_id, Job.state == RUNNING, Job.attempt == attempt, Job.heartbeat_at < cutoff)
        if cancel:
            values = dict(state=CANCELLED, finished_at=now, message=f"cancelled (worker {worker} lost)")
            target = None
        elif attempt < max_attempts:
            values = dict(
                state=QUEUED,
                worker=None,
                enqueued_at=now,
                message=f"re-queued: worker {worker} lost (no heartbeat for {stale_after_seconds:g} s)",
            )
            target = requeued
        else:
            values = dict(
                state=FAILED,
                finished_at=now,
                error=f"worker {worker} lost (no heartbeat for {stale_after_seconds:g} s) "
                f"on attempt {attempt} of {max_attempts}",
                message="failed: worker lost",
            )
            target = failed
        res = session.execute(update(Job).where(*cond).values(**values).execution_options(synchronize_session=False))
        if rows_matched(res) == 1 and target is not None:
            target.append(job_id)
    session.commit()
    return requeued, failed


def wake_priority(priority: int, started_at: datetime | None) -> int:
    """The priority a queued job's wake-up carries on the queue (higher is taken first): the row's
    ``priority`` (:data:`PERSON_PRIORITY` or 0), :data:`RESUMED_AHEAD` more once the job has run
    before (``started_at`` set: handed back by a stopping worker, re-queued by the reaper or after a
    full disk, retried), so an interrupted run, its training checkpoint on disk, is taken again
    before the runs of its priority queued behind it."""
    return int(priority) + (RESUMED_AHEAD if started_at is not None else 0)


def wake_priorities(
    session: Session, ids: Iterable[int] | None = None, *, older_than: datetime | None = None
) -> dict[int, int]:
    """Queued job id → its wake-up's priority (:func:`wake_priority`), in id order (first in,
    first out among equals): the queued ones of ``ids`` (None: every queued job); ``older_than``:
    only jobs whose ``enqueued_at`` is before it (a job retried after a back-off waits until then)."""
    q = select(Job.id, Job.priority, Job.started_at).where(Job.state == QUEUED).order_by(Job.id)
    if ids is not None:
        ids = list(ids)
        if not ids:
            return {}
        q = q.where(Job.id.in_(ids))
    if older_than is not None:
        q = q.where((Job.enqueued_at.is_(None)) | (Job.enqueued_at < older_than))
    return {int(i): wake_priority(p, started) for i, p, started in session.execute(q)}


def mark_enqueued(session: Session, ids: Iterable[int]) -> None:
    ids = list(ids)
    if ids:
        session.execute(
            update(Job)
            .where(Job.id.in_(ids), Job.state == QUEUED)
            .values(enqueued_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        session.commit()
