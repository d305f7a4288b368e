"""The job runner: ``layerscope worker`` consumes job ids and runs one job at a time.

For each id: claim the row atomically (queued → running, attempt + 1, worker name; a job
already claimed or finished is skipped), heartbeat from a thread, write progress (0..1 +
message) and a log tail, honour the cancel flag, then mark succeeded / failed (error text) /
cancelled. A suite job fans out into child train jobs. Between jobs the loop runs the reaper,
which re-queues jobs whose heartbeat went stale (a worker killed by OOM or ``kill -9``).

The executor is a parameter (default: ``worker.execute.execute``) so the runner is tested
with a fake one.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import signal
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session, sessionmaker

from layerscope_core.text import validation_line
from science.bounded import MEMORY_SETTING, MeasureMemoryError
from science.context import JobCancelled, JobContext
from store import jobs as J
from store.session import make_engine, make_sessionmaker
from store.settings import Settings
from worker.job_params import RebuildParams, SuiteParams, params_of
from worker.packing import raise_if_stopping
from worker.queue import JobQueue, fan_out_suite, reap, requeue_orphans, set_job_handler, wake

log = logging.getLogger(__name__)

Executor = Callable[[str, BaseModel, JobContext, Any], dict]


@dataclass
class RunnerEnv:
    """What a custom executor gets (same fields as ``worker.pipeline.WorkerEnv``)."""

    session_factory: sessionmaker[Session]
    store_dir: Path
    device: str = "cpu"


def load_executor(spec: str | None) -> Executor | None:
    """``"package.module:function"`` → the function (None → the default pipeline)."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"executor must look like 'package.module:function', got {spec!r}")
    return getattr(importlib.import_module(module), name)


def default_worker_name(device: str) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{device}"


class DBJobContext(JobContext):
    """Progress, log tail and cancel flag of one running job, backed by the ``jobs`` row.

    ``progress``/``log`` only update memory; :meth:`flush` (called by the heartbeat thread)
    writes them with the heartbeat. ``check_cancelled`` reads the flag from the DB (at most
    every ``cancel_poll_s``) and raises :class:`JobCancelled` — also when the job was taken
    away from this worker (the reaper re-queued it)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        job_id: int,
        worker: str,
        attempt: int,
        log_lines: int = 200,
        cancel_poll_s: float = 0.2,
    ) -> None:
        super().__init__(description=f"job {job_id}", enabled=False)
        self.factory, self.job_id, self.worker, self.attempt = factory, job_id, worker, attempt
        self._lock = threading.Lock()
        self._fraction = 0.0
        self.message = ""
        self._log: deque[str] = deque(maxlen=log_lines)
        self._dirty = True
        self._cancel = False
        self._lost = False
        self._cancel_poll_s = cancel_poll_s
        self._last_cancel_check = 0.0
        self._run_id: int | None = None

    def attach_run(self, run_id: int) -> None:
        with self._lock:
            self._run_id = int(run_id)
            self._dirty = True

    def progress(self, fraction: float, message: str = "") -> None:
        with self._lock:
            self._fraction = max(0.0, min(1.0, float(fraction)))
            if message:
                self.message = message
            self._dirty = True

    def log(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        with self._lock:
            for part in str(line).splitlines() or [""]:
                self._log.append(f"{stamp} {part}")
            self._dirty = True
        log.info("job %s: %s", self.job_id, line)

    def check_cancelled(self) -> None:
        raise_if_stopping()  # a stop signal whose KeyboardInterrupt a finalizer swallowed
        now = time.monotonic()
        if not (self._cancel or self._lost) and now - self._last_cancel_check >= self._cancel_poll_s:
            self._last_cancel_check = now
            with self.factory() as s:
                self._cancel = J.cancel_flag(s, self.job_id)
        if self._lost:
            raise JobCancelled(f"job {self.job_id} was taken from this worker (stale heartbeat)")
        if self._cancel:
            raise JobCancelled(f"job {self.job_id} cancelled")

    @contextlib.contextmanager
    def storing(self) -> Iterator[None]:
        """``jobs.storing`` set around a result write (``store.jobs.begin_storing``); a cancel
        requested before it: :class:`JobCancelled`, nothing written."""
        with self.factory() as s:
            may_store = J.begin_storing(s, self.job_id, self.worker, self.attempt)
        if not may_store:
            self._cancel = True
            raise JobCancelled(
                f"job {self.job_id} cancelled (or taken from this worker) before its results were stored"
            )
        try:
            yield
        finally:
            with self.factory() as s:
                J.end_storing(s, self.job_id)

    def flush(self) -> None:
        """Heartbeat, plus progress/message/log when they changed."""
        fields: dict[str, Any] = {}
        with self._lock:
            if self._dirty:
                fields = dict(progress=self._fraction, message=self.message[:2000], log="\n".join(self._log))
                if self._run_id is not None:
                    fields["run_id"] = self._run_id
                self._dirty = False
        with self.factory() as s:
            owned, cancel = J.heartbeat(s, self.job_id, self.worker, self.attempt, **fields)
        self._cancel = self._cancel or cancel
        if not owned:
            self._lost = True

    def log_text(self) -> str:
        with self._lock:
            return "\n".join(self._log)


class Heartbeat(threading.Thread):
    """Calls ``ctx.flush()`` every ``interval`` seconds until stopped."""

    def __init__(self, ctx: DBJobContext, interval: float) -> None:
        super().__init__(name=f"heartbeat-{ctx.job_id}", daemon=True)
        self.ctx, self.interval = ctx, interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self.ctx.flush()
            except Exception:  # a DB blip must not kill the job; a lasting one lets the reaper act
                log.exception("heartbeat of job %s failed", self.ctx.job_id)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


@contextlib.contextmanager
def _stop_signals_ignored():
    """SIGINT / SIGTERM ignored inside (main thread only: elsewhere signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in old:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


class Backoff:
    """Exponential back-off for the worker loop's infrastructure failures (the queue or the DB
    down, the disk full): ``first`` seconds, doubling up to ``cap``, one log line per back-off
    (no traceback: the same error every second filled the log while a disk was full); reset
    by :meth:`ok` after a round that worked."""

    def __init__(self, stop_event: threading.Event, first: float = 1.0, cap: float = 60.0) -> None:
        self.stop_event, self.first, self.cap = stop_event, first, cap
        self.delay = 0.0

    def failed(self, what: str, exc: BaseException) -> float:
        """Log one line for ``exc`` and wait (until stopped); returns the seconds waited."""
        self.delay = self.first if self.delay == 0 else min(self.cap, self.delay * 2)
        first = (" ".join(str(getattr(exc, "orig", None) or exc).split()) or type(exc).__name__)[:300]
        log.warning("%s failed (%s: %s); retrying in %.3g s", what, type(exc).__name__, first, self.delay)
        self.stop_event.wait(self.delay)
        return self.delay

    def ok(self) -> None:
        self.delay = 0.0


class Runner:
    """Runs jobs by id. ``run_forever`` is the worker loop; ``run_one`` runs a single id."""

    def __init__(
        self,
        settings: Settings,
        *,
        device: str | None = None,
        name: str | None = None,
        executor: Executor | None = None,
        session_factory: sessionmaker[Session] | None = None,
        queue: JobQueue | None = None,
    ) -> None:
        self.settings = settings
        self.device = device or settings.device
        self.name = name or default_worker_name(self.device)
        self._custom_executor = executor
        self.factory = session_factory or make_sessionmaker(make_engine(settings.resolved_db_url))
        self.queue = queue or JobQueue.from_settings(settings)
        self._env: Any = None
        self._executor: Executor | None = executor
        self.stop_event = threading.Event()
        self.jobs_run = 0
        self.backoff = Backoff(self.stop_event)

    # -- the executor and its environment (the real pipeline imports torch: lazily) ------------
    @property
    def executor(self) -> Executor:
        if self._executor is None:
            from worker.execute import execute

            self._executor = execute
        return self._executor

    @property
    def env(self) -> Any:
        if self._env is None:
            store = self.settings.resolved_store_dir
            if self._custom_executor is None:
                from worker.pipeline import WorkerEnv, resolve_device

                self._env = WorkerEnv(self.factory, store, resolve_device(self.device))
            else:
                self._env = RunnerEnv(self.factory, store, self.device)
        return self._env

    # -- one job -------------------------------------------------------------------------------
    def run_one(self, job_id: int) -> str | None:
        """Claim and run job ``job_id``; return its final state (None: skipped, not ours)."""
        with self.factory() as s:
            attempt = J.claim(s, job_id, self.name)
        if attempt is None:
            log.info("job %s skipped: not queued (claimed elsewhere, finished or cancelled)", job_id)
            return None
        ctx = DBJobContext(self.factory, job_id, self.name, attempt, log_lines=self.settings.log_tail_lines)
        try:
            with self.factory() as s:
                job = J.get_job(s, job_id)
                kind, raw_params, max_attempts = job.kind, dict(job.params), job.max_attempts
            log.info("job %s (%s) attempt %s on %s", job_id, kind, attempt, self.name)
            return self._run_claimed(ctx, kind, raw_params, max_attempts)
        except (KeyboardInterrupt, SystemExit):
            # Stopped at any point after the claim (even while validating or importing):
            # the job goes back to the queue rather than staying "running" until reaped. A
            # second Ctrl-C (the terminal's to every process, then the demo's to its worker)
            # must not interrupt the hand-back itself.
            with _stop_signals_ignored():
                self._release(ctx)
            raise

    def _run_claimed(self, ctx: DBJobContext, kind: str, raw_params: dict, max_attempts: int) -> str:
        # The heartbeat starts at the claim, before the params are validated and the executor is
        # loaded: a first job's imports (plugins' entry points, torch) take seconds on a loaded
        # machine, and a job must not look lost to the reaper meanwhile.
        beat = Heartbeat(ctx, interval=min(self.settings.heartbeat_seconds, 1.0))
        beat.start()
        try:
            outcome = self._outcome(ctx, kind, raw_params, max_attempts)
        finally:
            beat.stop()
        if isinstance(outcome, str):  # a suite job: fanned out (or failed) by _run_suite itself
            return outcome
        state, fields = outcome
        if state == J.QUEUED:
            return self._retry_later(ctx, **fields)
        return self._finish(ctx, state, **fields)

    def _outcome(
        self, ctx: DBJobContext, kind: str, raw_params: dict, max_attempts: int
    ) -> str | tuple[str, dict[str, Any]]:
        """Validate and run a claimed job: its final state and the fields to record with it."""
        try:
            params = self._validate(kind, raw_params)
        except ValidationError as exc:  # one line naming each field, as the CLI and the API word it
            return J.FAILED, dict(error=f"invalid params for {kind!r}: {validation_line(exc)}")
        except ValueError as exc:
            return J.FAILED, dict(error=f"invalid params for {kind!r}: {exc}")
        if kind == "suite":
            return self._run_suite(ctx, params, max_attempts)
        if (run_id := getattr(params, "run_id", None)) is not None:
            ctx.attach_run(run_id)  # a job on a stored run links to it while it runs
        try:
            ctx.progress(0.0, f"{kind} started on {self.name}")
            result = self.executor(kind, params, ctx, self.env) or {}
        except JobCancelled as exc:
            ctx.log(str(exc))
            return J.CANCELLED, dict(message="cancelled")
        except MeasureMemoryError as exc:  # a refusal before the work, already one line: no traceback
            ctx.log(str(exc))
            log.warning("job %s refused: %s (a worker's --measure-memory-gb sets it too)", ctx.job_id, exc)
            return J.FAILED, dict(error=str(exc), message=f"failed: over {MEMORY_SETTING}")
        except Exception as exc:  # recorded on the job (error text + log tail) and logged
            if (full := disk_full(exc)) is not None:  # retryable: back off while attempts remain
                if ctx.attempt < max_attempts:
                    delay = self.settings.retry_backoff_seconds * 2 ** (ctx.attempt - 1)
                    ctx.log(f"attempt {ctx.attempt} of {max_attempts}: {full}; retrying in {delay:g} s")
                    return J.QUEUED, dict(error=full, delay_s=delay)
                ctx.log("".join(traceback.format_exception(exc)))
                return J.FAILED, dict(
                    error=f"{full} on attempt {ctx.attempt} of {max_attempts}", message="failed: disk full"
                )
            log.exception("job %s failed", ctx.job_id)
            text = "".join(traceback.format_exception(exc))
            ctx.log(text)
            return J.FAILED, dict(
                error=f"{type(exc).__name__}: {exc}\n\n{text[-4000:]}", message=f"failed: {type(exc).__name__}"
            )
        run_id = result.get("run_id") if isinstance(result, dict) else None
        if kind == "rebuild" and isinstance(params, RebuildParams) and params.then is not None and result.get("agrees"):
            result["then_job_id"] = self._follow_up(ctx, params.then, max_attempts)
        return J.SUCCEEDED, dict(result=_jsonable(result), run_id=run_id)

    def _follow_up(self, ctx: DBJobContext, then: Any, max_attempts: int) -> int | None:
        """Queue a rebuild's follow-up job (``RebuildParams.then``: the jobs form's intervene on a
        run without weights) now that the weights are there, as a child of the rebuild job with its
        priority; its id (None: the queue was down, said in the log)."""
        from worker.queue import QueueUnavailable, submit

        with self.factory() as s:
            priority = J.get_job(s, ctx.job_id).priority
        try:
            job_id = submit(
                self.factory,
                self.queue,
                then.kind,
                then.params,
                max_attempts=max_attempts,
                parent_id=ctx.job_id,
                priority=priority,
            )
        except QueueUnavailable as exc:
            ctx.log(f"the {then.kind} job on run {then.params.run_id} was not queued: {exc}; submit it again")
            return None
        ctx.log(f"queued job {job_id}: {then.kind} on run {then.params.run_id}, its weights rebuilt")
        return job_id

    @staticmethod
    def _validate(kind: str, raw: dict) -> BaseModel:
        from worker.job_params import PARAMS_BY_KIND

        if kind not in PARAMS_BY_KIND:
            raise ValueError(f"unknown job kind {kind!r}")
        return PARAMS_BY_KIND[kind].model_validate(raw)

    def _run_suite(self, ctx: DBJobContext, params: BaseModel, max_attempts: int) -> str:
        try:
            from worker.presets import expand_suite
            from worker.suite_settings import check_one_run_per_seed, mixed_versions_warning

            children = expand_suite(params_of("suite", params, SuiteParams))
            check_one_run_per_seed(children, self.factory)  # one run per seed per suite, however it was queued
            if warning := mixed_versions_warning(children, self.factory):
                ctx.log(warning)  # the suite job's log: a suite is meant to be measured by one version
                ctx.flush()  # written before the fan-out finishes the job
        except Exception as exc:
            log.exception("suite job %s could not be expanded", ctx.job_id)
            return self._finish(ctx, J.FAILED, error=f"{type(exc).__name__}: {exc}")
        ids = fan_out_suite(self.factory, self.queue, ctx.job_id, children, self.name, ctx.attempt, max_attempts)
        log.info("suite job %s fanned out into %d train jobs", ctx.job_id, len(ids))
        return J.SUCCEEDED

    def _finish(self, ctx: DBJobContext, state: str, **kw: Any) -> str:
        with self.factory() as s:
            if kw.get("result") is None:
                kw.pop("result", None)
            owned = J.heartbeat(s, ctx.job_id, ctx.worker, ctx.attempt, log=ctx.log_text())[0]
            owned = owned and J.finish(s, ctx.job_id, ctx.worker, ctx.attempt, state, **kw)
            if owned and state == J.SUCCEEDED:  # a cancel answered 200 meanwhile ends it cancelled
                state = J.get_job(s, ctx.job_id).state
        if not owned:
            log.warning(
                "job %s: result %s not recorded, the job was re-queued away from %s", ctx.job_id, state, self.name
            )
        self.jobs_run += 1
        return state

    def _retry_later(self, ctx: DBJobContext, error: str, delay_s: float) -> str:
        """A retryable failure: re-queued with back-off (``store.jobs.retry_later``), else failed."""
        with self.factory() as s:
            J.heartbeat(s, ctx.job_id, ctx.worker, ctx.attempt, log=ctx.log_text())
            if J.retry_later(s, ctx.job_id, ctx.worker, ctx.attempt, error, delay_s):
                log.warning("job %s: %s; re-queued, taken again in %g s", ctx.job_id, error, delay_s)
                self.jobs_run += 1
                return J.QUEUED
            cancelled = J.cancel_flag(s, ctx.job_id)
        if cancelled:  # a cancel answered 200 meanwhile: honoured, not retried
            return self._finish(ctx, J.CANCELLED, message="cancelled")
        return self._finish(ctx, J.FAILED, error=error, message="failed: disk full")

    def _release(self, ctx: DBJobContext) -> None:
        with self.factory() as s:
            released = J.release(s, ctx.job_id, ctx.worker, ctx.attempt)
        if released:
            # ahead of its priority's others (store.jobs.wake_priority): the interrupted run, its
            # checkpoint on disk, is taken again before the runs queued behind it
            wake(self.factory, self.queue, [ctx.job_id])
            log.warning("job %s released back to the queue (worker stopping)", ctx.job_id)

    # -- the loop ------------------------------------------------------------------------------
    def reap_now(self) -> None:
        reap(self.factory, self.queue, self.settings.stale_after_seconds)
        requeue_orphans(self.factory, self.queue, grace_seconds=max(self.settings.stale_after_seconds, 5.0))

    def run_forever(self, *, max_jobs: int | None = None, idle_exit_s: float | None = None) -> int:
        """Consume job ids until stopped (``stop_event``, Ctrl-C), ``max_jobs`` jobs were run,
        or the queue stayed empty for ``idle_exit_s``. Returns the number of jobs run."""
        last_reap = 0.0
        idle_since = time.monotonic()
        log.info("worker %s consuming %s queue %r", self.name, self.queue.kind, self.settings.queue_name)
        while not self.stop_event.is_set():
            raise_if_stopping()
            now = time.monotonic()
            if now - last_reap >= self.settings.reap_every_seconds:
                last_reap = now
                try:
                    self.reap_now()
                except Exception as exc:  # noqa: BLE001 - the reaper is a safety net: say so and keep consuming
                    log.warning(
                        "reaper failed (%s: %s)",
                        type(exc).__name__,
                        " ".join(str(getattr(exc, "orig", None) or exc).split())[:300],
                    )
            try:
                job_id = self.queue.dequeue()
            except Exception as exc:  # noqa: BLE001 - the queue is down (Redis restarting), its file full: back off
                self.backoff.failed(f"dequeue from the {self.queue.kind} queue", exc)
                continue
            self.backoff.ok()
            if job_id is None:
                if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                    break
                if self.queue.kind != "redis":  # Redis blocks in dequeue; SQLite is polled
                    self.stop_event.wait(self.settings.worker_poll_seconds)
                continue
            try:
                self.run_one(job_id)
            except Exception as exc:  # noqa: BLE001 - the DB failed around the job (claim, finish): the job stays
                # queued or running for the reaper; back off rather than exit
                self.backoff.failed(f"job {job_id}", exc)
                continue
            idle_since = time.monotonic()
            if max_jobs is not None and self.jobs_run >= max_jobs:
                break
        return self.jobs_run


def disk_full(exc: BaseException) -> str | None:
    """One line naming the full disk's path when ``exc`` (or an error it was raised from) is an
    OSError ENOSPC / EDQUOT, else None: a failure a later attempt may get past."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" ({e.filename})" if e.filename else ""
            return f"disk full: {e.strerror or e}{where}"
        e = e.__cause__ or e.__context__
    return None


def _jsonable(obj: Any) -> Any:
    import json

    return json.loads(json.dumps(obj, default=str))


def _run_consumed_job(job_id: int) -> None:
    from store.settings import get_settings

    Runner(get_settings()).run_one(job_id)


set_job_handler(_run_consumed_job)  # a plain `huey_consumer` on the queue runs jobs through here
