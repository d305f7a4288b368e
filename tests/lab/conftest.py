"""Lab fixtures: real processes — ``layerscope serve`` and ``layerscope worker`` — on either
the embedded default (SQLite DB + SQLite queue) or the lab services (Postgres + Redis).

Workers run the fast fake pipeline (``tests.lab.fake_pipeline``) unless a test asks for the
real one. Every wait has a deadline (a hang guard that fails with the processes' logs), never a
timing assertion.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import FAKE_EXECUTOR, ROOT

LAB_SETTINGS = {
    "LAYERSCOPE_HEARTBEAT_SECONDS": "0.3",
    "LAYERSCOPE_STALE_AFTER_SECONDS": "10",  # slack for a loaded 2-core CI machine
    "LAYERSCOPE_REAP_EVERY_SECONDS": "0.5",
    "LAYERSCOPE_WORKER_POLL_SECONDS": "0.05",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    predicate: Callable[[], object],
    what: str,
    timeout: float = 120.0,
    every: float = 0.1,
    on_fail: Callable[[], str] | None = None,
) -> object:
    """Poll ``predicate`` until truthy; fail (with ``on_fail()``'s text) after ``timeout`` s — a
    hang guard, not a performance assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}" + (f"\n{on_fail()}" if on_fail else ""))
        time.sleep(every)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> None:
        if self.alive():
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def kill9(self) -> None:
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


@dataclass
class Lab:
    """One deployment: env vars for its processes, and the processes started."""

    kind: str
    env: dict[str, str]
    tmp: Path
    procs: list[Proc] = field(default_factory=list)
    api_url: str | None = None

    def _spawn(self, name: str, args: list[str], extra_env: dict[str, str] | None = None) -> Proc:
        log_path = self.tmp / f"{name}.log"
        env = {**os.environ, **self.env, **(extra_env or {})}
        fh = open(log_path, "ab")  # noqa: SIM115 - owned by the process
        popen = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", *args], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT
        )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def start_api(self, name: str = "api", port: int | None = None) -> Proc:
        port = port or (int(self.api_url.rsplit(":", 1)[1]) if self.api_url else free_port())
        proc = self._spawn(name, ["serve", "--no-dashboard", "--port", str(port)])
        self.api_url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if not proc.alive():
                pytest.fail(f"{name} exited:\n{proc.log()}")
            try:
                return httpx.get(f"{self.api_url}/api/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, f"{name} to answer", on_fail=proc.log)
        return proc

    def start_worker(self, name: str, executor: str | None = FAKE_EXECUTOR, **extra_env: str) -> Proc:
        args = ["worker", "--name", name, "--device", "cpu"]
        if executor:
            args += ["--executor", executor]
        return self._spawn(name, args, extra_env)

    def client(self) -> httpx.Client:
        assert self.api_url, "start_api first"
        return httpx.Client(base_url=self.api_url, timeout=30)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log()[-4000:]}" for p in self.procs)

    def stop_all(self) -> None:
        for p in self.procs:
            p.stop()


@pytest.fixture
def lab_factory(tmp_path: Path, request) -> Iterator[Callable[[str], Lab]]:
    """``make("sqlite")`` or ``make("postgres+redis")`` → a Lab (services skipped if absent)."""
    labs: list[Lab] = []

    def make(kind: str) -> Lab:
        env = {
            **LAB_SETTINGS,
            "PYTHONPATH": str(ROOT),
            "LAYERSCOPE_HOME": str(tmp_path / "home"),
            "LAYERSCOPE_STORE_DIR": str(tmp_path / "store"),
        }
        if kind == "sqlite":
            env["LAYERSCOPE_DB_URL"] = f"sqlite:///{tmp_path / 'lab.db'}"
            env["LAYERSCOPE_QUEUE_URL"] = f"sqlite:///{tmp_path / 'queue.db'}"
        elif kind == "postgres+redis":
            env["LAYERSCOPE_DB_URL"] = request.getfixturevalue("pg_url")
            env["LAYERSCOPE_QUEUE_URL"] = request.getfixturevalue("redis_url")
            env["LAYERSCOPE_QUEUE_NAME"] = request.getfixturevalue("queue_name")
        else:
            raise ValueError(kind)
        lab = Lab(kind, env, tmp_path)
        labs.append(lab)
        return lab

    yield make
    for lab in labs:
        lab.stop_all()


def job_state(client: httpx.Client, job_id: int) -> dict:
    return client.get(f"/api/jobs/{job_id}").json()


def wait_job(
    lab: Lab, client: httpx.Client, job_id: int, states: tuple[str, ...] = ("succeeded",), timeout: float = 180.0
) -> dict:
    def done() -> dict | None:
        j = job_state(client, job_id)
        return j if j["state"] in states else None

    return wait_for(
        done,
        f"job {job_id} to reach {states}",
        timeout=timeout,  # type: ignore[return-value]  # wait_for gives done()'s dict back
        on_fail=lambda: f"job: {job_state(client, job_id)}\n{lab.logs()}",
    )
