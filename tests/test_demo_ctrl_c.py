"""Ctrl-C on ``layerscope demo`` hands its running job back: the row is ``queued`` again with its
attempt not spent, the job id is back on the queue, and a fresh worker runs it as attempt 1.

End to end: the demo (server + its worker process) in a temp LAYERSCOPE_HOME, the fast fake
pipeline with slow steps so a train job of the smoke suite is running when the signal comes.
Ctrl-C in a terminal signals the whole foreground process group (the demo and its worker at
once); ``kill -INT`` signals the demo alone, which then stops its worker. Both are checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
from sqlalchemy import select

from store.models import Job
from store.session import make_engine, make_sessionmaker
from tests.conftest import FAKE_EXECUTOR, ROOT
from tests.lab.conftest import LAB_SETTINGS, free_port, wait_for
from worker.queue import JobQueue, make_huey


def _env(tmp_path) -> dict[str, str]:
    return {
        **os.environ,
        **LAB_SETTINGS,
        "PYTHONPATH": str(ROOT),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "LAYERSCOPE_DB_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp_path / 'queue.db'}",
        "LAYERSCOPE_STORE_DIR": str(tmp_path / "store"),
        "LAYERSCOPE_FAKE_STEP_S": "0.5",  # a smoke train job runs for a while
    }


@pytest.mark.timeout(600)  # a hang guard only
def _sigint_ignored() -> None:  # as a non-interactive shell starts a background job
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("stop", ["ctrl-c in a terminal", "kill, started in the background"])
def test_stopping_the_demo_hands_the_running_job_back(tmp_path, stop) -> None:
    terminal = stop.startswith("ctrl-c")
    env = _env(tmp_path)
    port = free_port()
    log_path = tmp_path / "demo.log"
    with open(log_path, "wb") as log:
        demo = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "demo", "--preset", "smoke", "--port", str(port)]
            + ["--executor", FAKE_EXECUTOR],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
            preexec_fn=None if terminal else _sigint_ignored,
        )
    base = f"http://127.0.0.1:{port}"
    text = lambda: log_path.read_text(errors="replace")  # noqa: E731

    def running() -> list[dict]:
        assert demo.poll() is None, text()
        try:
            return httpx.get(f"{base}/api/jobs", params={"state": "running", "kind": "train"}, timeout=5).json()[
                "items"
            ]
        except httpx.HTTPError:
            return []

    try:
        job = wait_for(running, "a train job of the demo's suite to run", timeout=300, on_fail=text)[0]
        assert job["attempt"] == 1 and job["worker"] == "demo-worker", job
        wait_for(  # under way: a step or more done
            lambda: httpx.get(f"{base}/api/jobs/{job['id']}", timeout=5).json()["progress"] > 0,
            "the job to make progress",
            on_fail=text,
        )
    finally:
        if terminal:
            os.killpg(demo.pid, signal.SIGINT)
        else:
            demo.send_signal(signal.SIGTERM)
        rc = demo.wait(120)
    assert rc == 0, text()
    assert "Traceback" not in text(), text()

    factory = make_sessionmaker(make_engine(env["LAYERSCOPE_DB_URL"]))
    with factory() as s:
        row = s.get(Job, job["id"])
        assert (row.state, row.attempt, row.worker) == ("queued", 0, None), (row.state, row.attempt, row.worker, text())
        assert row.max_attempts == job["max_attempts"]
        assert not s.execute(select(Job.id).where(Job.state == "running")).all()  # nothing left "running"
    queue = JobQueue(make_huey(env["LAYERSCOPE_QUEUE_URL"], "layerscope"))
    assert job["id"] in queue.pending_ids()

    # a fresh worker picks it up as attempt 1 and finishes it
    fresh_log = tmp_path / "fresh.log"
    with open(fresh_log, "wb") as log:
        fresh = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "worker", "--name", "fresh", "--executor", FAKE_EXECUTOR],
            cwd=ROOT,
            env={**env, "LAYERSCOPE_FAKE_STEP_S": "0.01"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def finished() -> Job | None:
            with factory() as s:
                got = s.get(Job, job["id"])
                return got if got.state in ("succeeded", "failed", "cancelled") else None

        done = wait_for(
            finished, "the fresh worker to run the handed-back job", timeout=300, on_fail=fresh_log.read_text
        )
        assert (done.state, done.attempt, done.worker) == ("succeeded", 1, "fresh")
    finally:
        fresh.send_signal(signal.SIGINT)
        fresh.wait(60)
