"""The real pipeline (smoke preset) through the lab path: Postgres + Redis, a worker process
running ``worker.pipeline.execute``, killed with SIGKILL mid-training; a second worker re-runs
the job and the run's results are stored exactly once."""

from __future__ import annotations

import pytest

from tests.lab.conftest import job_state, wait_for, wait_job

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(1800)]  # timeout: a hang guard


def smoke_train_params() -> dict:
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    p = expand_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"], name="lab-real"))[0]
    return p.model_dump(mode="json")


def test_real_smoke_train_survives_a_killed_worker(lab_factory) -> None:
    lab = lab_factory("postgres+redis")
    lab.env["LAYERSCOPE_STALE_AFTER_SECONDS"] = "10"  # real compute: leave the heartbeat thread slack
    lab.start_api()
    victim = lab.start_worker("victim", executor=None)
    with lab.client() as c:
        job_id = c.post("/api/jobs", json={"kind": "train", "params": smoke_train_params()}).json()["id"]
        wait_for(
            lambda: job_state(c, job_id)["message"].startswith("step"),
            "training to be under way",
            timeout=300,
            every=0.2,
            on_fail=lab.logs,
        )
        victim.kill9()
        lab.start_worker("rescuer", executor=None)
        done = wait_job(lab, c, job_id, timeout=600)
        assert (done["worker"], done["attempt"]) == ("rescuer", 2), done
        runs = c.get("/api/runs").json()
        assert runs["total"] == 1 and runs["items"][0]["status"] == "complete"
        run_id = done["run_id"]
        probes = c.get(f"/api/runs/{run_id}/probes").json()
        keys = [(p["eval_length"], p["layer"]) for p in probes]
        assert probes and len(keys) == len(set(keys))  # exactly once
        assert c.get(f"/api/runs/{run_id}/interventions").json()
        assert c.get(f"/api/runs/{run_id}/patching").json()
