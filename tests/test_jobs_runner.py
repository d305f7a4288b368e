"""The job runner in process, on a temp SQLite DB + SQLite queue, with the fake executor.

No sleeps: a test that needs the heartbeat thread to have written waits for its flushes
(:func:`beats`), one that needs a cancel seen waits for the flag to be set (an event); the reaper
is given stale heartbeats by back-dating ``heartbeat_at``. Waits carry a hang guard only."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from science.context import JobCancelled
from store import jobs as J
from store.models import Job, ProbeResult, Run, utcnow
from tests.conftest import FAKE_EXECUTOR
from worker.job_params import SuiteParams, TrainParams
from worker.queue import JobQueue, reap, requeue_orphans, submit
from worker.runner import DBJobContext, Heartbeat, Runner, load_executor

HANG_GUARD_S = 60.0  # a wait that runs out fails the test: a hang guard, never a timing assertion


def train_params(**kw) -> TrainParams:
    base = dict(family="lstm", task="parity", seed=0, n_layers=2, max_steps=3, measure={"eval_lengths": [40, 60]})
    base.update(kw)
    return TrainParams(**base)


@pytest.fixture
def env(db_factory):
    settings, factory = db_factory
    settings = settings.model_copy(
        update=dict(heartbeat_seconds=0.05, stale_after_seconds=1.0, reap_every_seconds=0.1, worker_poll_seconds=0.02)
    )
    queue = JobQueue.from_settings(settings)
    queue.flush()
    return settings, factory, queue


def runner(env, executor=None, name="w1") -> Runner:
    settings, factory, queue = env
    return Runner(
        settings,
        device="cpu",
        name=name,
        executor=executor or load_executor(FAKE_EXECUTOR),
        session_factory=factory,
        queue=queue,
    )


class Beats:
    """The heartbeat thread's writes, counted: :meth:`wait` blocks until ``n`` more flushes by a
    :class:`~worker.runner.Heartbeat` thread have completed (``DBJobContext.flush`` wrapped)."""

    def __init__(self) -> None:
        self.done = threading.Condition()
        self.count = 0

    def wait(self, n: int = 2) -> bool:
        """True once ``n`` more heartbeat flushes have completed. Two make sure one flush began
        after the call: the first may have read the job's progress just before it."""
        with self.done:
            target = self.count + n
            return self.done.wait_for(lambda: self.count >= target, timeout=HANG_GUARD_S)


@pytest.fixture
def beats(monkeypatch) -> Beats:
    counter = Beats()
    real_flush = DBJobContext.flush

    def flush(self: DBJobContext) -> None:
        real_flush(self)
        if isinstance(threading.current_thread(), Heartbeat):
            with counter.done:
                counter.count += 1
                counter.done.notify_all()

    monkeypatch.setattr(DBJobContext, "flush", flush)
    return counter


def job(factory, job_id) -> Job:
    with factory() as s:
        return s.get(Job, job_id)


def test_submit_run_succeeds_and_writes_results(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    assert queue.pending_ids() == {job_id}
    assert runner(env).run_forever(max_jobs=1) == 1
    j = job(factory, job_id)
    assert (j.state, j.attempt, j.worker, j.progress) == ("succeeded", 1, "w1", 1.0)
    assert j.run_id is not None and j.result == {"run_id": j.run_id}
    assert "trained lstm on parity" in j.log
    assert j.started_at and j.finished_at and j.heartbeat_at
    with factory() as s:
        assert s.execute(select(func.count()).select_from(ProbeResult)).scalar_one() == 2 * 3


def test_a_claimed_or_finished_job_is_skipped(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    r = runner(env)
    assert r.run_one(job_id) == "succeeded"
    assert r.run_one(job_id) is None  # a duplicate message: skipped
    assert job(factory, job_id).attempt == 1


def test_rerun_replaces_results(env) -> None:
    settings, factory, queue = env
    a = submit(factory, queue, "train", train_params())
    b = submit(factory, queue, "train", train_params())  # same config: same run
    runner(env).run_forever(max_jobs=2)
    assert job(factory, a).run_id == job(factory, b).run_id
    with factory() as s:
        assert s.execute(select(func.count()).select_from(Run)).scalar_one() == 1
        assert s.execute(select(func.count()).select_from(ProbeResult)).scalar_one() == 6


def test_failure_records_error_text(env) -> None:
    settings, factory, queue = env

    def boom(kind, params, ctx, env):
        ctx.log("about to fail")
        raise RuntimeError("out of memory (simulated)")

    job_id = submit(factory, queue, "train", train_params())
    assert runner(env, executor=boom).run_one(job_id) == "failed"
    j = job(factory, job_id)
    assert j.state == "failed" and "RuntimeError: out of memory (simulated)" in j.error
    assert "about to fail" in j.log and "Traceback" in j.log


def test_invalid_stored_params_fail_the_job(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    with factory() as s:
        s.execute(update(Job).where(Job.id == job_id).values(params={"family": "rnn"}))
        s.commit()
    assert runner(env).run_one(job_id) == "failed"
    error = job(factory, job_id).error
    # one line naming each field, as the CLI and the API word it (not pydantic's multi-line text)
    assert error.startswith("invalid params for 'train': ") and "\n" not in error
    assert "family: " in error and "Value error, " not in error and "errors.pydantic.dev" not in error


def test_the_heartbeat_runs_while_the_params_are_validated(env, beats, monkeypatch) -> None:
    """A worker's first job validates its params and loads the executor (plugins' entry points,
    torch) right after the claim: seconds on a loaded machine. The heartbeat must already run, or
    the reaper takes a live job away (CI, 2026-12-03: a job failed after three such attempts)."""
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    beat_seen: list[bool] = []
    validate = Runner._validate

    def slow_validate(kind, raw):  # held until the heartbeat thread has written the job's row
        beat_seen.append(beats.wait(1))
        return validate(kind, raw)

    monkeypatch.setattr(Runner, "_validate", staticmethod(slow_validate))
    assert runner(env).run_one(job_id) == "succeeded"
    assert beat_seen == [True]


def test_cancel_a_running_job(env) -> None:
    settings, factory, queue = env
    started, flagged = threading.Event(), threading.Event()
    raised: list[str] = []

    def slow(kind, params, ctx, env):
        started.set()
        assert flagged.wait(HANG_GUARD_S)  # the job's next step comes after the cancel request
        try:
            ctx.check_cancelled()
        except JobCancelled as exc:
            raised.append(str(exc))
            raise
        return {}

    job_id = submit(factory, queue, "train", train_params())
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("state", runner(env, executor=slow).run_one(job_id)))
    t.start()
    assert started.wait(HANG_GUARD_S)
    with factory() as s:
        assert J.request_cancel(s, job_id).cancel_requested
    flagged.set()
    t.join(HANG_GUARD_S)
    assert raised == [f"job {job_id} cancelled"]  # the step's check stopped it, not the finish
    assert result["state"] == "cancelled"
    assert job(factory, job_id).state == "cancelled"


def test_cancel_a_queued_job_and_retry_it(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    with factory() as s:
        assert J.request_cancel(s, job_id).state == "cancelled"
    assert runner(env).run_one(job_id) is None  # its message is skipped
    with factory() as s:
        with pytest.raises(J.JobStateError):
            J.request_cancel(s, job_id)
        j = J.retry(s, job_id)
        assert (j.state, j.cancel_requested, j.attempt, j.max_attempts) == ("queued", False, 0, 3)
    assert runner(env).run_one(job_id) == "succeeded"


def test_progress_is_written_while_running(env, beats) -> None:
    settings, factory, queue = env
    seen = []

    def watch(kind, params, ctx, env):
        ctx.progress(0.25, "a quarter")
        assert beats.wait()  # the heartbeat thread writes it
        with factory() as s:
            j = s.get(Job, job_id)
            seen.append((j.progress, j.message))
        return {}

    job_id = submit(factory, queue, "train", train_params())
    runner(env, executor=watch).run_one(job_id)
    assert seen == [(0.25, "a quarter")]


def test_a_job_links_to_its_run_while_it_is_still_running(env, beats) -> None:
    """Found by a fresh-clone demo: jobs showed run "-" while their run was already listed."""
    settings, factory, queue = env
    with factory() as s:
        run = Run(
            name="r",
            suite="s",
            family="lstm",
            task="parity",
            seed=0,
            n_layers=2,
            d_model=8,
            n_params=1,
            config_hash="h" * 64,
        )
        s.add(run)
        s.commit()
        stored_id = run.id
    seen = []

    def measuring(kind, params, ctx, env):
        ctx.attach_run(stored_id)  # the pipeline does this once the run row exists
        assert beats.wait()  # the heartbeat thread writes it
        with factory() as s:
            seen.append(s.get(Job, job_id).run_id)
        return {}

    job_id = submit(factory, queue, "train", train_params())
    runner(env, executor=measuring).run_one(job_id)
    assert seen == [stored_id]
    assert job(factory, job_id).run_id == stored_id  # kept when the result names no run


def test_reaper_requeues_a_stale_job_and_fails_it_when_attempts_run_out(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    queue.flush()
    for attempt in (1, 2, 3):
        with factory() as s:
            assert J.claim(s, job_id, "dead-worker") == attempt
            s.execute(update(Job).where(Job.id == job_id).values(heartbeat_at=utcnow() - timedelta(seconds=10)))
            s.commit()
        requeued, failed = reap(factory, queue, stale_after_seconds=1.0)
        if attempt < 3:
            assert requeued == [job_id] and queue.pending_ids() == {job_id}
            assert job(factory, job_id).state == "queued"
            queue.flush()
        else:
            assert failed == [job_id]
    j = job(factory, job_id)
    assert j.state == "failed" and "no heartbeat" in j.error


def test_a_reaped_worker_cannot_overwrite_the_new_attempt(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    with factory() as s:
        assert J.claim(s, job_id, "slow") == 1
        s.execute(update(Job).where(Job.id == job_id).values(heartbeat_at=utcnow() - timedelta(seconds=10)))
        s.commit()
    reap(factory, queue, 1.0)
    assert runner(env, name="fresh").run_one(job_id) == "succeeded"
    with factory() as s:
        assert J.finish(s, job_id, "slow", 1, J.FAILED, error="late") is False
        assert s.get(Job, job_id).state == "succeeded"


def test_lost_ownership_stops_the_zombie(env, beats) -> None:
    settings, factory, queue = env
    raised: list[str] = []

    def slow(kind, params, ctx, env):
        with factory() as s:  # simulate the reaper handing the job to another worker
            s.execute(update(Job).where(Job.id == job_id).values(worker="other"))
            s.commit()
        assert beats.wait()  # a heartbeat after the hand-over finds the job no longer this worker's
        try:
            ctx.check_cancelled()
        except JobCancelled as exc:
            raised.append(str(exc))
            raise

    job_id = submit(factory, queue, "train", train_params())
    runner(env, executor=slow).run_one(job_id)
    assert raised == [f"job {job_id} was taken from this worker (stale heartbeat)"]
    assert job(factory, job_id).worker == "other"  # the zombie wrote nothing


def test_requeue_orphans_finds_queued_jobs_missing_from_the_queue(env) -> None:
    settings, factory, queue = env
    ids = [submit(factory, queue, "train", train_params(seed=i)) for i in range(3)]
    queue.flush()
    queue.enqueue(ids[0])
    assert requeue_orphans(factory, queue) == ids[1:]
    assert queue.pending_ids() == set(ids)
    assert requeue_orphans(factory, queue) == []


def test_suite_fans_out_into_train_jobs(env) -> None:
    settings, factory, queue = env
    job_id = submit(factory, queue, "suite", SuiteParams(preset="smoke", families=["lstm", "gru"], tasks=["parity"]))
    r = runner(env)
    assert r.run_one(queue.dequeue()) == "succeeded"
    with factory() as s:
        children = list(s.execute(select(Job).where(Job.parent_id == job_id)).scalars())
    assert len(children) == 2 and {c.kind for c in children} == {"train"}
    assert job(factory, job_id).result == {"child_job_ids": [c.id for c in children]}
    assert queue.pending_ids() == {c.id for c in children}
    # cancelling the suite cancels its queued children
    with factory() as s:
        J.request_cancel(s, job_id)
        assert {c.state for c in s.execute(select(Job).where(Job.parent_id == job_id)).scalars()} == {"cancelled"}


def test_a_suite_queued_before_runs_of_other_settings_landed_fails_with_the_reason(env) -> None:
    from worker import persist
    from worker.presets import expand_suite

    settings, factory, queue = env
    job_id = submit(factory, queue, "suite", SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"]))
    with factory() as s:  # meanwhile the same cell lands with another budget (an import, another client)
        for t in expand_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"], max_seconds=75)):
            persist.save_run(
                s,
                name="r",
                suite=t.suite,
                family=t.family,
                task=t.task,
                seed=t.seed,
                n_layers=t.n_layers,
                d_model=8,
                n_params=100,
                config_hash=t.run_hash(),
                train_config=t.run_config(),
                loss_curve=[],
                behaviour={},
            )
    assert runner(env).run_one(queue.dequeue()) == "failed"
    j = job(factory, job_id)
    assert "SuiteSettingsConflict" in j.error and "another suite name" in j.error
    with factory() as s:
        assert s.scalar(select(func.count()).select_from(Job).where(Job.parent_id == job_id)) == 0


def test_keyboard_interrupt_releases_the_job(env) -> None:
    settings, factory, queue = env

    def interrupted(kind, params, ctx, env):
        raise KeyboardInterrupt

    job_id = submit(factory, queue, "train", train_params())
    queue.flush()
    with pytest.raises(KeyboardInterrupt):
        runner(env, executor=interrupted).run_one(job_id)
    j = job(factory, job_id)
    assert (j.state, j.attempt, j.worker) == ("queued", 0, None)
    assert queue.pending_ids() == {job_id}


def test_a_released_job_is_taken_again_before_the_jobs_queued_behind_it(env) -> None:
    """Ctrl-C on the demo: the interrupted run goes on first when the worker comes back, not after
    every run queued behind it (a new user's report: "the interrupted run is pushed to the back")."""
    settings, factory, queue = env

    def interrupted(kind, params, ctx, env):
        raise KeyboardInterrupt

    first = submit(factory, queue, "train", train_params())
    behind = [submit(factory, queue, "train", train_params(seed=s)) for s in (1, 2)]
    assert queue.dequeue() == first  # the worker takes it, then is stopped
    with pytest.raises(KeyboardInterrupt):
        runner(env, executor=interrupted).run_one(first)
    assert [queue.dequeue() for _ in range(3)] == [first, *behind]


def test_db_context_raises_job_cancelled(env) -> None:
    from worker.runner import DBJobContext

    settings, factory, queue = env
    job_id = submit(factory, queue, "train", train_params())
    with factory() as s:
        attempt = J.claim(s, job_id, "w")
    ctx = DBJobContext(factory, job_id, "w", attempt, cancel_poll_s=0)
    ctx.check_cancelled()
    with factory() as s:
        J.request_cancel(s, job_id)
    with pytest.raises(JobCancelled):
        ctx.check_cancelled()


def test_a_suite_beside_rows_of_another_measurement_version_says_so_in_its_log(env) -> None:
    """docs/SCIENCE.md#measurement-versions: a warning in the suite job's log, and it fans out."""
    from worker import persist
    from worker.presets import expand_suite

    settings, factory, queue = env
    cell = SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"], seeds=[0, 1])
    job_id = submit(factory, queue, "suite", cell)
    t = expand_suite(cell)[0]
    with factory() as s:  # seed 0 measured by an older version (an imported bundle)
        run_id = persist.save_run(
            s,
            name="r",
            suite=t.suite,
            family=t.family,
            task=t.task,
            seed=t.seed,
            n_layers=t.n_layers,
            d_model=8,
            n_params=100,
            config_hash=t.run_hash(),
            train_config=t.run_config(),
        )
        row = dict(layer=0, eval_length=40, accuracy=0.9, majority_baseline=0.5, per_position=[], n_train=1)
        row.update(n_test=1, converged=True, n_iter=1, config_hash="c", measurement_version=1)
        persist.replace_probe_results(s, run_id, [row])
    assert runner(env).run_one(queue.dequeue()) == "succeeded"
    assert "1 result row(s) of measurement version 1" in job(factory, job_id).log
