"""The job queue: the ``jobs`` table is the truth; Huey carries wake-ups (job ids) only.

``get_huey(settings)`` → a SqliteHuey at ``settings.resolved_queue_url`` by default, a
PriorityRedisHuey (a sorted set) when ``LAYERSCOPE_QUEUE_URL=redis://…``: on both, a higher
priority is taken first and equals first in, first out. :class:`JobQueue` wraps it with the
operations the API and the workers need.

Information flows one way, from the table to the queue: every wake-up is sent for a job whose row
is queued, at the priority its row gives (``store.jobs.wake_priority``; :func:`wake`, :func:`submit`,
:func:`requeue_orphans`); a worker claims the job of a wake-up in one conditional UPDATE
(``store.jobs.claim``), so a wake-up whose row is no longer queued (a duplicate, a cancelled job)
is dropped. A lost wake-up (a Redis restarted without persistence, the queue down at a re-queue)
is sent again from the table by :func:`requeue_orphans` (the API at start-up, every reaper pass).
docs/DESIGN.md#jobs-and-the-queue has the decision.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from threading import Lock
from typing import TypeVar

from huey import Huey, PriorityRedisHuey, RedisHuey, SqliteHuey
from pydantic import BaseModel
from redis.exceptions import RedisError, ResponseError
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from store import jobs as J
from store.models import Job, utcnow
from store.session import session_scope
from store.settings import Settings

log = logging.getLogger(__name__)

TASK_NAME = "layerscope.run_job"
SQLITE_QUEUE_TIMEOUT_S = 30.0

_T = TypeVar("_T")
_hueys: dict[tuple[str, str], Huey] = {}
_hueys_lock = Lock()


class QueueUnavailable(ConnectionError):
    """The queue (Redis, or the SQLite queue file) could not be reached.

    ``job_id``: the job the failed enqueue was for; ``stored``: whether its row is still in
    the ``jobs`` table (then the reaper's ``requeue_orphans`` queues it once the queue is back)."""

    def __init__(self, message: str, *, job_id: int | None = None, stored: bool = False) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.stored = stored


QUEUE_ERRORS: tuple[type[BaseException], ...] = (OSError, sqlite3.Error, RedisError)  # OSError: ConnectionError too

# A Redis queue written before priorities held there is a list at the key the priority queue (a
# sorted set) uses: deleted, only while it still is a list (atomic). Its job ids were wake-ups:
# requeue_orphans sends the queued jobs' again from the table.
_DROP_FIFO_LIST = "if redis.call('TYPE', KEYS[1]).ok == 'list' then return redis.call('DEL', KEYS[1]) end return 0"


def queue_kind(url: str) -> str:
    """``redis`` or ``sqlite`` for a queue URL."""
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("redis", "rediss", "unix"):
        return "redis"
    if scheme.startswith("sqlite"):
        return "sqlite"
    raise ValueError(f"LAYERSCOPE_QUEUE_URL: unsupported queue URL {url!r} (use redis://… or sqlite:///path)")


# What a consumed ``run_job`` task does with its job id. worker.runner (above this module)
# registers its Runner here at import, so the queue never imports the runner.
_job_handler: Callable[[int], None] | None = None


def set_job_handler(handler: Callable[[int], None]) -> None:
    """Register what a consumed ``run_job`` task runs (``worker.runner`` does, at import)."""
    global _job_handler
    _job_handler = handler


def make_huey(url: str, name: str = "layerscope") -> Huey:
    """A new Huey for ``url`` with the ``run_job`` task registered: a PriorityRedisHuey (Redis ≥ 5:
    ZADD / BZPOPMIN) or a SqliteHuey, both taking the higher priority first."""
    kind = queue_kind(url)
    if kind == "redis":
        huey: Huey = PriorityRedisHuey(name, url=url, results=False, blocking=True, read_timeout=1)
    else:
        path = make_url(url).database
        if not path or path == ":memory:":
            raise ValueError("LAYERSCOPE_QUEUE_URL: a SQLite queue needs a file path (sqlite:///path/queue.db)")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        huey = SqliteHuey(name, filename=path, results=False, timeout=SQLITE_QUEUE_TIMEOUT_S)

    @huey.task(name=TASK_NAME)
    def run_job(job_id: int) -> None:  # executed by a plain `huey_consumer` too
        if _job_handler is None:
            raise RuntimeError("no job handler registered: import worker.runner in the consumer")
        _job_handler(job_id)

    huey.run_job = run_job
    return huey


def get_huey(settings: Settings) -> Huey:
    """The (cached) Huey for ``settings.resolved_queue_url`` and ``settings.queue_name``."""
    key = (settings.resolved_queue_url, settings.queue_name)
    with _hueys_lock:
        if key not in _hueys:
            _hueys[key] = make_huey(*key)
        return _hueys[key]


class JobQueue:
    """Job ids in (with a priority), job ids out: the highest priority first, equals in order."""

    def __init__(self, huey: Huey) -> None:
        self.huey = huey

    @classmethod
    def from_settings(cls, settings: Settings) -> JobQueue:
        return cls(get_huey(settings))

    @property
    def kind(self) -> str:
        return "redis" if isinstance(self.huey, RedisHuey) else "sqlite"

    def enqueue(self, job_id: int, priority: int = 0) -> None:
        """Put ``job_id`` on the queue, taken before every id of a lower ``priority``;
        :class:`QueueUnavailable` when the queue is unreachable. The API and the workers send
        wake-ups through :func:`wake` / :func:`submit`, which read the priority from the job's row."""
        try:
            self._call(lambda: self.huey.run_job(int(job_id), priority=priority or None))
        except QUEUE_ERRORS as exc:
            raise self._unavailable(exc, job_id=int(job_id)) from exc

    def dequeue(self) -> int | None:
        """The next job id, or None (a Redis queue blocks up to 1 s; SQLite returns at once)."""
        task = self._call(self.huey.dequeue)
        if task is None:
            return None
        if not task.args:
            log.error("queue message without a job id dropped: %r", task)
            return None
        return int(task.args[0])

    def pending_ids(self) -> set[int]:
        """Job ids waiting on the queue; :class:`QueueUnavailable` when it is unreachable."""
        try:
            return {int(t.args[0]) for t in self._call(self.huey.pending) if t.args}
        except QUEUE_ERRORS as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: BaseException, job_id: int | None = None) -> QueueUnavailable:
        first = (str(exc).strip().splitlines() or [""])[0]
        return QueueUnavailable(
            f"the job queue ({self.kind}) is not reachable: {type(exc).__name__}: {first}", job_id=job_id
        )

    def _call(self, op: Callable[[], _T]) -> _T:
        """``op()``; on a Redis key still holding an older version's first-in-first-out list
        (WRONGTYPE), that list is dropped (``_DROP_FIFO_LIST``) and ``op`` tried once more."""
        try:
            return op()
        except ResponseError as exc:
            if not str(exc).startswith("WRONGTYPE") or self.kind != "redis":
                raise
            key = self.huey.storage.queue_key
            if self.huey.storage.conn.eval(_DROP_FIFO_LIST, 1, key):
                log.warning(
                    "dropped the first-in-first-out Redis list %s of an older layerscope: its queued jobs "
                    "are sent again, by priority, from the jobs table",
                    key,
                )
            return op()

    def __len__(self) -> int:
        return int(self.huey.pending_count())

    def __bool__(self) -> bool:  # `queue or default` must not ask the (maybe unreachable) queue its length
        return True

    def flush(self) -> None:
        self.huey.storage.flush_queue()


# --- wake-ups, sent from the table ----------------------------------------------------------


def wake(factory: sessionmaker[Session], queue: JobQueue, ids: list[int]) -> list[int]:
    """Send a wake-up for each of ``ids`` whose row is queued, at the priority its row gives
    (``store.jobs.wake_priority``); returns the ids sent. :class:`QueueUnavailable` when the
    queue is unreachable: the jobs stay queued in the table and :func:`requeue_orphans` sends
    them once it is back."""
    with factory() as s:
        priorities = J.wake_priorities(s, ids)
    for job_id, priority in priorities.items():
        queue.enqueue(job_id, priority)
    return list(priorities)


def submit(
    factory: sessionmaker[Session],
    queue: JobQueue,
    kind: str,
    params: BaseModel,
    *,
    max_attempts: int = 3,
    parent_id: int | None = None,
    priority: int = 0,
    idempotency_key: str | None = None,
) -> int:
    """Store a queued job (params already validated), then enqueue its id. Returns the id.

    All or nothing from the caller's view: when the queue is unreachable the stored row is
    withdrawn again and :class:`QueueUnavailable` raised (``stored=False``: submitting again
    later makes no duplicate). Only if the withdrawal fails too (the database went away as
    well) does the row stay, queued: ``requeue_orphans`` queues it once the queue is back
    (``stored=True``)."""
    with session_scope(factory) as s:
        job = J.new_job(kind, params, parent_id=parent_id, max_attempts=max_attempts, priority=priority)
        job.idempotency_key = idempotency_key  # unique: a concurrent twin fails here (IntegrityError)
        s.add(job)
        s.flush()
        job_id, wake_priority = job.id, J.wake_priority(job.priority, job.started_at)
    try:
        queue.enqueue(job_id, wake_priority)
    except QueueUnavailable as exc:
        stored = not _withdraw(factory, job_id)
        raise QueueUnavailable(str(exc), job_id=job_id, stored=stored) from exc
    return job_id


def live_suite_job(factory: sessionmaker[Session], params: BaseModel) -> int | None:
    """The newest suite job with these params (same ``params_hash``) that is queued or running,
    or that succeeded with no child failed or cancelled; None when there is none (``demo`` then
    submits the suite)."""
    from sqlalchemy import select

    with factory() as s:
        for job in s.execute(
            select(Job).where(Job.kind == "suite", Job.config_hash == J.params_hash(params)).order_by(Job.id.desc())
        ).scalars():
            if job.state in (J.QUEUED, J.RUNNING):
                return job.id
            if job.state == J.SUCCEEDED:
                bad = s.execute(
                    select(Job.id).where(Job.parent_id == job.id, Job.state.in_((J.FAILED, J.CANCELLED)))
                ).first()
                if bad is None:
                    return job.id
    return None


def _withdraw(factory: sessionmaker[Session], job_id: int) -> bool:
    """Delete a job that never reached the queue (still queued, never claimed); True if gone."""
    from sqlalchemy import delete

    try:
        with session_scope(factory) as s:
            s.execute(
                delete(Job).where(Job.id == job_id, Job.state == J.QUEUED, Job.attempt == 0, Job.started_at.is_(None))
            )
            gone = s.get(Job, job_id) is None
    except Exception:  # the row stays queued and the reaper queues it later
        log.exception("could not withdraw job %s after a failed enqueue; it stays queued", job_id)
        return False
    if gone:
        # not "job N": the id is free again (SQLite gives the next job the highest id + 1)
        log.warning("the job was withdrawn, nothing stored: the queue was not reachable when it was submitted")
    return gone


def requeue_orphans(factory: sessionmaker[Session], queue: JobQueue, grace_seconds: float = 0.0) -> list[int]:
    """Send the wake-up of each queued job that has none on the queue (an API restart, a lost
    message, a queue down when the job was re-queued), at the priority its row gives.

    ``grace_seconds``: skip jobs enqueued more recently than this (a worker may be about to
    claim them). Returns the ids enqueued. An unreachable queue is logged, not raised: the jobs
    stay queued in the table and the next pass (the API's and workers' reaper) tries again — so
    an API starting while Redis is down still starts."""
    older = utcnow() - timedelta(seconds=max(0.0, grace_seconds))  # a job retried later waits until then
    with session_scope(factory) as s:
        priorities = J.wake_priorities(s, older_than=older)
    if not priorities:
        return []
    done: list[int] = []
    try:
        pending = queue.pending_ids()
        for job_id, priority in priorities.items():
            if job_id not in pending:
                queue.enqueue(job_id, priority)
                done.append(job_id)
    except QueueUnavailable as exc:
        log.warning("%s: %d queued job(s) wait in the table until it is back", exc, len(priorities) - len(done))
    if done:
        with session_scope(factory) as s:
            J.mark_enqueued(s, done)
        log.info("re-enqueued %d queued job(s) missing from the queue: %s", len(done), done)
    return done


def reap(factory: sessionmaker[Session], queue: JobQueue, stale_after_seconds: float) -> tuple[list[int], list[int]]:
    """Re-queue running jobs with a stale heartbeat while attempts remain (else fail them), and
    wake them (:func:`wake`)."""
    with session_scope(factory) as s:
        requeued, failed = J.reap_stale(s, stale_after_seconds)
    wake(factory, queue, requeued)
    if requeued or failed:
        log.warning("reaper: re-queued %s, failed %s (stale heartbeat)", requeued, failed)
    return requeued, failed


def fan_out_suite(
    factory: sessionmaker[Session],
    queue: JobQueue,
    suite_job_id: int,
    children: Sequence[BaseModel],
    worker: str,
    attempt: int,
    max_attempts: int,
) -> list[int]:
    """Create a suite's child train jobs and finish the suite job in ONE transaction, then
    wake the children (:func:`wake`). A re-run suite job (its worker died after the commit) finds
    its children already made and wakes the queued ones only."""
    from sqlalchemy import select

    with session_scope(factory) as s:
        existing = list(s.execute(select(Job.id).where(Job.parent_id == suite_job_id).order_by(Job.id)).scalars())
        if existing:
            ids = existing
        else:
            parent = s.get(Job, suite_job_id)  # a suite a person launched: its runs keep its priority
            rows = [
                J.new_job(
                    "train",
                    p,
                    parent_id=suite_job_id,
                    max_attempts=max_attempts,
                    priority=parent.priority if parent is not None else 0,
                )
                for p in children
            ]
            s.add_all(rows)
            s.flush()
            ids = [r.id for r in rows]
        owned = J.finish(
            s,
            suite_job_id,
            worker,
            attempt,
            J.SUCCEEDED,
            result={"child_job_ids": ids},
            message=f"fanned out {len(ids)} train job(s)",
            commit=False,
        )
        if not owned:
            s.rollback()
            return []
    wake(factory, queue, ids)
    return ids
