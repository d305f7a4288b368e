"""Readers polling the API while a worker writes to the same SQLite file never see
"database is locked" (WAL + busy timeout on every connection)."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.lab.conftest import job_state, wait_for, wait_job

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]  # timeout: a hang guard only

READ_PATHS = ("/api/runs", "/api/jobs", "/api/curves", "/api/profiles", "/api/export/probes.csv")


def test_readers_never_see_database_is_locked(lab_factory) -> None:
    lab = lab_factory("sqlite")
    # four readers of the heavy routes at once: above the default shedding limit (4), whose 503 is
    # load shedding, not a lock; this test is about locks
    lab.env["LAYERSCOPE_LIMIT_CONCURRENCY"] = "16"
    lab.start_api()
    # the worker rewrites its run and probe rows at every step and heartbeats every 0.3 s
    lab.start_worker("writer", LAYERSCOPE_FAKE_STEP_S="0.01", LAYERSCOPE_FAKE_WRITE_EVERY_STEP="1")
    body = {
        "kind": "train",
        "params": {
            "family": "lstm",
            "task": "parity",
            "n_layers": 4,
            "max_steps": 150,
            "measure": {"eval_lengths": [40, 60, 80, 100, 120]},
        },
    }
    with lab.client() as c:
        job_id = c.post("/api/jobs", json=body).json()["id"]
        wait_for(lambda: job_state(c, job_id)["state"] == "running", "the writer to start", on_fail=lab.logs)

    stop = threading.Event()
    failures: list[str] = []
    counts = [0] * 4

    def reader(i: int) -> None:
        with httpx.Client(base_url=lab.api_url, timeout=60) as rc:
            while not stop.is_set():
                for path in READ_PATHS:
                    r = rc.get(path)
                    counts[i] += 1
                    if r.status_code != 200 or "locked" in r.text:
                        failures.append(f"{path}: {r.status_code} {r.text[:300]}")
                runs = rc.get("/api/runs").json()["items"]
                if runs:
                    r = rc.get(f"/api/runs/{runs[0]['id']}/probes")
                    if r.status_code != 200:
                        failures.append(f"probes: {r.status_code} {r.text[:300]}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        with lab.client() as c:
            done = wait_job(lab, c, job_id)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert done["state"] == "succeeded"
    assert sum(counts) > 20, counts  # the readers really overlapped the writes
    assert not failures, failures[:5]
    assert "database is locked" not in lab.logs()
