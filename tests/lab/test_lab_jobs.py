"""The whole flow on real processes: submit over HTTP → a separate worker process runs it →
the API serves the results; on SQLite + Huey-SQLite and on Postgres + Redis. Plus the faults:
a worker killed with SIGKILL mid-job, an API restarted with queued jobs."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from store.models import Job, ProbeResult, Run
from store.session import make_engine, make_sessionmaker
from tests.lab.conftest import job_state, wait_for, wait_job

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]  # timeout: a hang guard only

BACKENDS = ["sqlite", "postgres+redis"]


def train(max_steps: int = 5, seed: int = 0, family: str = "lstm") -> dict:
    return {
        "kind": "train",
        "params": {
            "family": family,
            "task": "parity",
            "seed": seed,
            "n_layers": 2,
            "max_steps": max_steps,
            "measure": {"eval_lengths": [40, 60]},
        },
    }


def db_counts(lab) -> dict[str, int]:
    engine = make_engine(lab.env["LAYERSCOPE_DB_URL"])
    try:
        with make_sessionmaker(engine)() as s:
            return {
                "runs": s.execute(select(func.count()).select_from(Run)).scalar_one(),
                "probes": s.execute(select(func.count()).select_from(ProbeResult)).scalar_one(),
                "jobs": s.execute(select(func.count()).select_from(Job)).scalar_one(),
            }
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_submit_over_http_runs_on_a_separate_worker(lab_factory, backend) -> None:
    lab = lab_factory(backend)
    lab.start_api()
    lab.start_worker("w1")
    with lab.client() as c:
        assert c.get("/api/health").json()["queue"] == ("redis" if backend != "sqlite" else "sqlite")
        job = c.post("/api/jobs", json=train()).json()
        done = wait_job(lab, c, job["id"])
        assert done["worker"] == "w1" and done["attempt"] == 1 and done["progress"] == 1.0
        assert "trained lstm on parity" in done["log_tail"]
        run_id = done["run_id"]
        probes = c.get(f"/api/runs/{run_id}/probes").json()
        assert len(probes) == 2 * 3 and {p["layer_name"] for p in probes} == {"emb", "0", "1"}
        assert c.get("/api/curves", params={"task": "parity"}).json()
        # a suite fans out into child jobs that the worker runs too
        suite = c.post(
            "/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "families": ["gru"], "tasks": ["parity"]}}
        ).json()
        wait_job(lab, c, suite["id"])
        children = c.get("/api/jobs", params={"parent_id": suite["id"]}).json()["items"]
        assert len(children) == 1
        wait_job(lab, c, children[0]["id"])
        assert job_state(c, suite["id"])["children"] == {"succeeded": 1}


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill9_worker_mid_job_reruns_once_elsewhere(lab_factory, backend) -> None:
    lab = lab_factory(backend)
    lab.start_api()
    victim = lab.start_worker("victim", LAYERSCOPE_FAKE_STEP_S="0.1")
    with lab.client() as c:
        job_id = c.post("/api/jobs", json=train(max_steps=40)).json()["id"]
        wait_for(lambda: job_state(c, job_id)["progress"] > 0.1, "the victim to be mid-job", on_fail=lab.logs)
        assert job_state(c, job_id)["worker"] == "victim"
        victim.kill9()
        rescuer = lab.start_worker("rescuer", LAYERSCOPE_FAKE_STEP_S="0.01")
        done = wait_job(lab, c, job_id)
        assert done["worker"] == "rescuer" and done["attempt"] == 2, done
        assert rescuer.alive()
        run_ids = {r["id"] for r in c.get("/api/runs").json()["items"]}
        assert run_ids == {done["run_id"]}
        assert len(c.get(f"/api/runs/{done['run_id']}/probes").json()) == 2 * 3  # exactly once
    assert db_counts(lab)["runs"] == 1 and db_counts(lab)["probes"] == 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_restarting_the_api_with_queued_jobs_loses_none(lab_factory, backend) -> None:
    from worker.queue import JobQueue, make_huey

    lab = lab_factory(backend)
    api = lab.start_api()
    with lab.client() as c:
        ids = [c.post("/api/jobs", json=train(seed=s)).json()["id"] for s in range(3)]
    api.stop()
    # the queue lost its messages while the API was down (Redis restarted without persistence,
    # a SQLite queue file deleted ...): the jobs table still has them queued
    queue = JobQueue(make_huey(lab.env["LAYERSCOPE_QUEUE_URL"], lab.env.get("LAYERSCOPE_QUEUE_NAME", "layerscope")))
    assert queue.pending_ids() == set(ids)
    queue.flush()
    lab.start_api()
    assert queue.pending_ids() == set(ids)  # re-enqueued on start, once each
    assert len(queue) == 3
    lab.start_worker("w1")
    with lab.client() as c:
        for job_id in ids:
            assert wait_job(lab, c, job_id)["attempt"] == 1
    assert db_counts(lab)["runs"] == 3


def test_cancel_a_running_job_over_http(lab_factory) -> None:
    lab = lab_factory("sqlite")
    lab.start_api()
    lab.start_worker("w1", LAYERSCOPE_FAKE_STEP_S="0.1")
    with lab.client() as c:
        job_id = c.post("/api/jobs", json=train(max_steps=400)).json()["id"]
        wait_for(lambda: job_state(c, job_id)["state"] == "running", "the job to start", on_fail=lab.logs)
        assert c.post(f"/api/jobs/{job_id}/cancel").json()["cancel_requested"] is True
        done = wait_job(lab, c, job_id, states=("cancelled",))
        assert done["error"] is None
        r = c.post(f"/api/jobs/{job_id}/retry")
        assert r.status_code == 200 and r.json()["state"] == "queued"


def test_worker_stopped_gracefully_hands_its_job_back(lab_factory) -> None:
    import signal

    lab = lab_factory("sqlite")
    lab.start_api()
    w = lab.start_worker("w1", LAYERSCOPE_FAKE_STEP_S="0.1")
    with lab.client() as c:
        job_id = c.post("/api/jobs", json=train(max_steps=400)).json()["id"]
        wait_for(lambda: job_state(c, job_id)["state"] == "running", "the job to start", on_fail=lab.logs)
        w.stop(signal.SIGTERM)
        j = job_state(c, job_id)
        assert j["state"] == "queued" and j["attempt"] == 0, (j, w.log())
