"""``layerscope demo``: serves API + dashboard, starts a local worker beside it, submits the suite
as a job; results land while it runs; Ctrl-C (SIGINT) stops everything cleanly.

The worker runs the fake pipeline here (the real quick preset takes ~15 minutes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import psutil
import pytest

from tests.conftest import FAKE_EXECUTOR, ROOT
from tests.lab.conftest import LAB_SETTINGS, free_port, wait_for


@pytest.mark.timeout(900)  # a hang guard only
def test_demo_serves_runs_a_suite_and_stops_cleanly(tmp_path) -> None:
    port = free_port()
    env = {
        **os.environ,
        **LAB_SETTINGS,
        "PYTHONPATH": str(ROOT),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "LAYERSCOPE_DB_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp_path / 'queue.db'}",
        "LAYERSCOPE_STORE_DIR": str(tmp_path / "store"),
    }
    log = open(tmp_path / "demo.log", "wb")  # noqa: SIM115
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backend.cli",
            "demo",
            "--preset",
            "smoke",
            "--port",
            str(port),
            "--executor",
            FAKE_EXECUTOR,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def text() -> str:
        return (tmp_path / "demo.log").read_text(errors="replace")

    try:

        def up() -> bool:
            assert demo.poll() is None, text()
            try:
                return httpx.get(f"{base}/api/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, "the demo server", on_fail=text)
        assert f"Open {base}/" in text()
        page = httpx.get(f"{base}/", timeout=30)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "'unsafe-inline'" in page.headers["content-security-policy"]
        with httpx.Client(base_url=base, timeout=30) as c:
            suite = wait_for(lambda: c.get("/api/jobs", params={"kind": "suite"}).json()["items"], "the suite job")[0]

            def all_done() -> bool:
                d = c.get(f"/api/jobs/{suite['id']}").json()
                return d["state"] == "succeeded" and d["children"] == {"succeeded": 15}

            wait_for(all_done, "the smoke suite's 15 train jobs", timeout=300, on_fail=text)
            assert c.get("/api/runs").json()["total"] == 15
            assert len(c.get("/api/curves", params={"eval_length": 40}).json()) > 0
        children = psutil.Process(demo.pid).children(recursive=True)
        assert children, "the demo should run a worker process beside the server"
    finally:
        demo.send_signal(signal.SIGINT)
        rc = demo.wait(60)
    assert rc == 0, text()
    gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, alive
    assert "Traceback" not in text(), text()
    # a second demo finds the suite already run and does not train again
    log2 = open(tmp_path / "demo2.log", "wb")  # noqa: SIM115
    port2 = free_port()
    again = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backend.cli",
            "demo",
            "--preset",
            "smoke",
            "--port",
            str(port2),
            "--executor",
            FAKE_EXECUTOR,
            "--bundle",
            str(tmp_path / "first.zip"),
            "--bundle",
            str(tmp_path / "second.zip"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log2,
        stderr=subprocess.STDOUT,
    )

    def up2() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port2}/api/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return again.poll() is not None

    try:
        wait_for(up2, "the second demo", on_fail=lambda: (tmp_path / "demo2.log").read_text())
        said = (tmp_path / "demo2.log").read_text()
        assert "already ran here" in said
        for name in ("first.zip", "second.zip"):  # --bundle repeats: each is looked for
            assert f"no study bundle at {tmp_path / name} (absent)" in said
    finally:
        again.send_signal(signal.SIGINT)
        assert again.wait(60) == 0


def test_demo_on_a_busy_port_says_so_before_starting_anything(tmp_path, monkeypatch, capsys) -> None:
    """It started the worker and printed 'Open http://…' before uvicorn failed on the port."""
    import socket

    from backend.cli import main, supervision
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    started: list[bool] = []
    monkeypatch.setattr(supervision, "start_worker", lambda *a, **k: started.append(True))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--port", str(port), "--preset", "smoke"]) == 1
    out = capsys.readouterr()
    assert f"cannot listen on 127.0.0.1:{port}" in out.err and "Open" not in out.out and not started
    get_settings.cache_clear()
