"""A queue outage at submit: with the queue unreachable, ``POST /api/jobs`` answers
503 with ``Retry-After`` and stores nothing (submitting again later makes exactly one job);
a retry answers 503 too, its job stays queued in the table and reaches the workers once the
queue is back. The queue here is a real Redis client pointed at a port where nothing listens.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from backend.api.main import create_app
from store.models import Job
from worker.job_params import TrainParams
from worker.queue import JobQueue, QueueUnavailable, make_huey, requeue_orphans, submit

TRAIN = {"kind": "train", "params": {"family": "lstm", "task": "parity", "max_steps": 3}}
DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def down(db_factory):
    """An API whose queue is unreachable, plus a working (SQLite) queue to bring back."""
    settings, factory = db_factory
    dead = JobQueue(make_huey(DEAD_REDIS, f"down{uuid.uuid4().hex[:8]}"))
    working = JobQueue.from_settings(settings)
    working.flush()
    app = create_app(settings, factory, queue=dead, background=False)
    with TestClient(app) as client:
        yield client, app, factory, settings, working


def _jobs(factory) -> list[Job]:
    with factory() as s:
        return list(s.query(Job).order_by(Job.id))


def test_submit_with_the_queue_down_is_503_with_retry_after_and_stores_nothing(down) -> None:
    client, app, factory, settings, working = down
    r = client.post("/api/jobs", json=TRAIN)
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) >= 1
    detail = r.json()["detail"]
    assert "not reachable" in detail and "nothing was stored" in detail
    assert _jobs(factory) == []
    assert client.get("/api/jobs").json()["total"] == 0

    # the queue is back: the client's retry makes exactly one job, on the queue
    app.state.queue = working
    r = client.post("/api/jobs", json=TRAIN)
    assert r.status_code == 201, r.text
    assert [j.id for j in _jobs(factory)] == [r.json()["id"]]
    assert working.pending_ids() == {r.json()["id"]}


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "suite", "params": {"preset": "smoke"}},
        {"kind": "train", "params": {"family": "gru", "task": "dyck", "seed": 3}},
    ],
)
def test_every_kind_is_refused_alike(down, body) -> None:
    client, _app, factory, _settings, _working = down
    r = client.post("/api/jobs", json=body)
    assert r.status_code == 503 and "Retry-After" in r.headers, r.text
    assert _jobs(factory) == []


def test_retry_with_the_queue_down_is_503_and_the_job_reaches_the_workers_later(down) -> None:
    client, app, factory, settings, working = down
    app.state.queue = working
    job_id = client.post("/api/jobs", json=TRAIN).json()["id"]
    working.flush()
    with factory() as s:
        s.execute(update(Job).where(Job.id == job_id).values(state="failed", error="boom"))
        s.commit()
    app.state.queue = JobQueue(make_huey(DEAD_REDIS, f"down{uuid.uuid4().hex[:8]}"))
    r = client.post(f"/api/jobs/{job_id}/retry")
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) >= 1
    assert f"job {job_id} is stored and queued" in r.json()["detail"]
    assert client.get(f"/api/jobs/{job_id}").json()["state"] == "queued"
    assert client.post(f"/api/jobs/{job_id}/retry").status_code == 409  # no duplicate retry
    # the queue is back: the reaper's orphan pass puts it on the queue
    assert requeue_orphans(factory, working) == [job_id]
    assert working.pending_ids() == {job_id}


def test_submit_keeps_the_row_when_it_cannot_be_withdrawn(db_factory, monkeypatch) -> None:
    """The database failing as well: the row stays queued (said so), for the reaper."""
    from worker import queue as Q

    _settings, factory = db_factory
    dead = JobQueue(make_huey(DEAD_REDIS, f"down{uuid.uuid4().hex[:8]}"))
    monkeypatch.setattr(Q, "_withdraw", lambda factory, job_id: False)
    with pytest.raises(QueueUnavailable) as info:
        submit(factory, dead, "train", TrainParams(family="lstm", task="parity"))
    assert info.value.stored and info.value.job_id is not None
    assert [j.state for j in _jobs(factory)] == ["queued"]


def test_openapi_documents_the_503(down) -> None:
    client, *_ = down
    paths = client.get("/api/openapi.json").json()["paths"]
    for path in ("/api/jobs", "/api/jobs/{job_id}/retry"):
        r503 = paths[path]["post"]["responses"]["503"]
        assert "Retry-After" in r503["headers"]


def test_the_api_starts_with_the_queue_down_and_queued_jobs_waiting(db_factory) -> None:
    """The start-up re-enqueue finds a queued job but no queue: the API starts anyway, and the
    job reaches the queue on a later pass once the queue is back."""
    settings, factory = db_factory
    working = JobQueue.from_settings(settings)
    working.flush()
    job_id = submit(factory, working, "train", TrainParams(family="lstm", task="parity"))
    working.flush()  # the message is lost: only the table knows the job
    dead = JobQueue(make_huey(DEAD_REDIS, f"down{uuid.uuid4().hex[:8]}"))
    assert requeue_orphans(factory, dead) == []
    app = create_app(settings, factory, queue=dead, background=True)
    with TestClient(app) as client:
        assert client.get("/api/health").status_code == 200
        assert client.get(f"/api/jobs/{job_id}").json()["state"] == "queued"
    assert requeue_orphans(factory, working) == [job_id]
    assert working.pending_ids() == {job_id}
