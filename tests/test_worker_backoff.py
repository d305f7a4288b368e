"""Disk full / queue down in the worker: the worker keeps running, backs off
exponentially, and logs one line per back-off — no traceback per second, no exit."""

from __future__ import annotations

import logging
import sqlite3

from sqlalchemy.exc import OperationalError

from tests.test_jobs_runner import env, runner  # noqa: F401 - fixtures
from worker.job_params import TrainParams
from worker.queue import submit


class FullQueue:
    """A queue whose storage answers "database or disk is full" ``failures`` times, then works."""

    def __init__(self, inner, failures: int) -> None:
        self.inner, self.failures, self.calls = inner, failures, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def dequeue(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise sqlite3.OperationalError("database or disk is full")
        return self.inner.dequeue()


def test_dequeue_failures_back_off_with_one_line_each(env, caplog) -> None:  # noqa: F811
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2))
    r = runner(env)
    r.queue = FullQueue(queue, failures=4)
    r.backoff.first, r.backoff.cap = 0.01, 0.04
    waits = []
    failed = r.backoff.failed
    r.backoff.failed = lambda what, exc: waits.append(failed(what, exc))
    with caplog.at_level(logging.WARNING, logger="worker.runner"):
        assert r.run_forever(max_jobs=1) == 1  # it kept going and ran the job once the queue worked
    lines = [rec for rec in caplog.records if "disk is full" in rec.getMessage()]
    assert len(lines) == 4 and all(rec.exc_info is None for rec in lines)
    assert all("\n" not in rec.getMessage() and "retrying in" in rec.getMessage() for rec in lines)
    assert waits == [0.01, 0.02, 0.04, 0.04]  # doubling, capped
    assert r.backoff.delay == 0.0  # reset once a dequeue worked
    with factory() as s:
        from store.models import Job

        assert s.get(Job, job_id).state == "succeeded"


def test_db_full_around_a_job_does_not_stop_the_worker(env, caplog) -> None:  # noqa: F811
    settings, factory, queue = env
    submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2))
    r = runner(env)
    r.backoff.first = 0.01
    calls = []
    real = r.run_one

    def flaky(job_id):
        calls.append(job_id)
        if len(calls) == 1:
            raise OperationalError("UPDATE jobs", {}, sqlite3.OperationalError("database or disk is full"))
        return real(job_id)

    r.run_one = flaky
    with caplog.at_level(logging.WARNING, logger="worker.runner"):
        r.run_forever(max_jobs=1, idle_exit_s=0.5)
    lines = [rec for rec in caplog.records if "disk is full" in rec.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and lines[0].getMessage().startswith(f"job {calls[0]} failed")
    assert r.stop_event.is_set() is False  # still running until it ran out of work


def test_a_second_ctrl_c_does_not_interrupt_the_hand_back(env, monkeypatch) -> None:  # noqa: F811
    """Ctrl-C reaches the demo's worker twice (the terminal's, then the demo's own): the job
    still goes back to the queue as queued, its attempt not spent."""
    import os
    import signal

    import pytest

    from store import jobs as J
    from store.models import Job

    settings, factory, queue = env
    job_id = submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2))
    assert queue.dequeue() == job_id

    def interrupted(kind, params, ctx, env):
        raise KeyboardInterrupt

    real_release = J.release

    def release_under_fire(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, while handing back
        return real_release(*args, **kwargs)

    monkeypatch.setattr(J, "release", release_under_fire)
    r = runner(env, executor=interrupted)
    with pytest.raises(KeyboardInterrupt):
        r.run_one(job_id)
    with factory() as s:
        job = s.get(Job, job_id)
        assert (job.state, job.attempt, job.worker) == ("queued", 0, None)
    assert queue.pending_ids() == {job_id}
