"""A cancel answered 200 is honoured: the job ends ``cancelled`` with nothing
stored after it, or the API answers 409 "already storing its results"; never 200 and then
``succeeded``. The race is driven at the moment results are stored by hooks in the executor's
own thread (the cancel is sent from inside the step it races), never by sleeps."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from science.context import JobCancelled
from store import jobs as J
from store.models import Job, ProbeResult, Run
from tests.lab import fake_pipeline
from worker.job_params import TrainParams
from worker.queue import JobQueue, submit
from worker.runner import Runner


def _params() -> TrainParams:
    return TrainParams(family="lstm", task="parity", seed=0, n_layers=2, max_steps=2, measure={"eval_lengths": [40]})


@pytest.fixture
def lab(api):
    """The API's client and a runner on the same DB and queue; ``cancel()`` posts the cancel."""
    settings = api.settings.model_copy(update=dict(heartbeat_seconds=30.0))  # no heartbeat thread in the way
    queue = JobQueue.from_settings(settings)
    holder: dict = {}

    def run(executor) -> tuple[int, str | None]:
        job_id = submit(api.factory, queue, "train", _params())
        holder["id"] = job_id
        r = Runner(settings, device="cpu", name="w", executor=executor, session_factory=api.factory, queue=queue)
        return job_id, r.run_one(job_id)

    def cancel():
        return api.client.post(f"/api/jobs/{holder['id']}/cancel")

    return run, cancel, api.factory


def _stored(factory) -> tuple[int, int]:
    with factory() as s:
        return (
            s.execute(select(func.count()).select_from(Run)).scalar_one(),
            s.execute(select(func.count()).select_from(ProbeResult)).scalar_one(),
        )


def _job(factory, job_id) -> Job:
    with factory() as s:
        return s.get(Job, job_id)


def test_a_cancel_while_results_are_stored_is_a_409_and_the_job_succeeds(lab, monkeypatch) -> None:
    run, cancel, factory = lab
    answers = []
    write = fake_pipeline._write

    def write_after_a_cancel(*a, **kw):  # inside ctx.storing(): the job row says storing
        answers.append(cancel())
        return write(*a, **kw)

    monkeypatch.setattr(fake_pipeline, "_write", write_after_a_cancel)
    job_id, state = run(fake_pipeline.execute)
    (r,) = answers
    assert r.status_code == 409 and "already storing its results" in r.json()["detail"]
    j = _job(factory, job_id)
    assert (state, j.state, j.storing, j.cancel_requested) == ("succeeded", "succeeded", False, False)
    assert _stored(factory) == (1, 3)


def test_a_cancel_just_before_results_are_stored_stores_nothing(lab, monkeypatch) -> None:
    run, cancel, factory = lab
    answers = []
    begin = J.begin_storing

    def cancel_then_begin(*a, **kw):  # the cancel lands between the last step and the store
        answers.append(cancel())
        return begin(*a, **kw)

    monkeypatch.setattr(J, "begin_storing", cancel_then_begin)
    job_id, state = run(fake_pipeline.execute)
    (r,) = answers
    assert r.status_code == 200 and r.json()["state"] == "running"
    j = _job(factory, job_id)
    assert (state, j.state, j.storing, j.result, j.run_id) == ("cancelled", "cancelled", False, None, None)
    assert _stored(factory) == (0, 0)  # nothing stored
    assert "cancelled" in j.log and "before its results were stored" in j.log


def test_a_cancel_after_the_last_store_ends_cancelled_not_succeeded(lab) -> None:
    run, cancel, factory = lab
    answers = []

    def execute(kind, params, ctx, env):
        with ctx.storing():
            pass  # the job's last write: nothing
        answers.append(cancel())  # between the last write and the end of the job
        return {}

    job_id, state = run(execute)
    assert answers[0].status_code == 200
    assert (state, _job(factory, job_id).state) == ("cancelled", "cancelled")
    assert cancel().status_code == 409  # and a second cancel: it is already cancelled


def test_a_cancel_of_a_job_that_finished_meanwhile_is_a_409(lab) -> None:
    run, cancel, factory = lab
    job_id, state = run(lambda kind, params, ctx, env: {})
    r = cancel()
    assert state == "succeeded" and r.status_code == 409 and "already succeeded" in r.json()["detail"]


def test_storing_refused_raises_job_cancelled_in_the_worker_context(lab) -> None:
    run, cancel, factory = lab
    seen = []

    def execute(kind, params, ctx, env):
        cancel()
        try:
            with ctx.storing():
                seen.append("stored")
        except JobCancelled as exc:
            seen.append(str(exc))
            raise
        return {}

    _, state = run(execute)
    assert state == "cancelled" and seen and "stored" not in seen
