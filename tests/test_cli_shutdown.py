"""Stopping the worker / demo with SIGTERM is quiet: the job is handed back, and a late signal
while the interpreter exits prints no "Exception ignored in atexit callback … KeyboardInterrupt"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import httpx
import pytest

from backend.cli import supervision
from tests.conftest import FAKE_EXECUTOR, ROOT
from tests.lab.conftest import LAB_SETTINGS, free_port, wait_for


def _env(tmp_path) -> dict[str, str]:
    return {
        **os.environ,
        **LAB_SETTINGS,
        "PYTHONPATH": str(ROOT),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "LAYERSCOPE_DB_URL": f"sqlite:///{tmp_path / 'db.db'}",
        "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp_path / 'queue.db'}",
        "LAYERSCOPE_STORE_DIR": str(tmp_path / "store"),
    }


def test_sigterm_interrupts_once_then_is_ignored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, supervision.raise_interrupt)
        with pytest.raises(KeyboardInterrupt):
            supervision.raise_interrupt(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # a second one cannot break the release
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_worker_stops_on_its_first_signal_even_with_sigint_inherited_ignored() -> None:
    """A worker started by a demo that a script ran in the background inherits SIGINT ignored:
    it must still stop (and hand its job back) on the demo's SIGINT, then ignore any other."""
    from worker import packing

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited from the background shell
        packing.stop_on_first_signal()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # its handler runs before raise_signal returns
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # a second signal cannot break the release
    finally:
        packing.STOP_REQUESTED.clear()
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_stop_signal_swallowed_by_a_finalizer_still_stops_the_job(monkeypatch) -> None:
    """CI saw the demo's SIGINT land while SQLAlchemy's weakref callback ran: CPython printed
    "Exception ignored … KeyboardInterrupt" and the worker went on running jobs with later
    signals ignored. The signal's flag must make the job's next step raise it again."""
    from worker import packing
    from worker.runner import DBJobContext

    unraisable: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_value))

    class SignalledWhileFinalized:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs here, between bytecodes of the finalizer
                pass

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        packing.stop_on_first_signal()
        obj = SignalledWhileFinalized()
        del obj  # no KeyboardInterrupt reaches this frame: the finalizer swallowed it
        assert unraisable == [] and packing.STOP_REQUESTED.is_set()  # expected, so not printed as "Exception ignored"
        ctx = DBJobContext(None, job_id=1, worker="w", attempt=1)  # type: ignore[arg-type]  # no session factory: nothing is written
        with pytest.raises(KeyboardInterrupt):
            ctx.check_cancelled()  # the job's next step: handed back, not run to the end
    finally:
        packing.STOP_REQUESTED.clear()
        sys.unraisablehook = sys.__unraisablehook__
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.timeout(120)
def test_worker_exit_is_quiet_when_sigterm_arrives_during_atexit(tmp_path) -> None:
    script = textwrap.dedent(f"""
        import atexit, signal, sys

        def late_sigterm():  # registered first: runs last, as the demo's exit signal may arrive
            signal.raise_signal(signal.SIGTERM)  # its handler runs before raise_signal returns
            print("atexit done", file=sys.stderr)

        atexit.register(late_sigterm)
        from backend.cli import main
        sys.exit(main(["worker", "--executor", {FAKE_EXECUTOR!r}, "--idle-exit", "0"]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=110
    )
    assert out.returncode == 0, out.stderr
    assert "atexit done" in out.stderr, out.stderr
    assert "Exception ignored" not in out.stderr and "KeyboardInterrupt" not in out.stderr, out.stderr


@pytest.mark.timeout(300)  # a hang guard only
def test_demo_stops_quietly_on_sigterm(tmp_path) -> None:
    port = free_port()
    log_path = tmp_path / "demo.log"
    with open(log_path, "wb") as log:
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
            env=_env(tmp_path),
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def up() -> bool:
            assert demo.poll() is None, log_path.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(up, "the demo server", timeout=200, on_fail=log_path.read_text)
            wait_for(
                lambda: "consuming" in log_path.read_text(), "the demo's worker", timeout=60, on_fail=log_path.read_text
            )
        finally:
            demo.send_signal(signal.SIGTERM)
            rc = demo.wait(60)
    text = log_path.read_text(errors="replace")
    assert rc == 0, text
    assert "layerscope: stopped" in text, text  # the worker was stopped (its job handed back) first
    assert "Traceback" not in text and "Exception ignored" not in text, text


@pytest.mark.timeout(300)  # a hang guard only
def test_demo_started_with_sigint_ignored_still_hands_the_running_job_back(tmp_path) -> None:
    """A demo started in the background of a script (`layerscope demo &`: the shell sets SIGINT
    to ignored, and children inherit it) must still stop its worker with SIGINT: the running job
    goes back to the queue at once rather than the worker being killed after 30 s, the job left
    "running" until the reaper finds it."""
    port = free_port()
    log_path = tmp_path / "demo.log"
    env = {**_env(tmp_path), "LAYERSCOPE_FAKE_STEP_S": "2"}  # a train job stays running

    def as_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with open(log_path, "wb") as log:
        demo = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "demo", "--preset", "smoke", "--port", str(port)]
            + ["--executor", FAKE_EXECUTOR],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=as_background_job,
        )
        base = f"http://127.0.0.1:{port}"

        def running() -> list:
            # a train job (its steps check for the stop), not the suite job that fans them out: one
            # stopped mid-fan-out may finish it, leaving nothing running to hand back
            assert demo.poll() is None, log_path.read_text()
            try:
                items = httpx.get(f"{base}/api/jobs", params={"state": "running"}, timeout=2).json()["items"]
            except httpx.HTTPError:
                return []
            return [j for j in items if j["kind"] == "train"]

        try:
            wait_for(running, "a running train job", timeout=200, on_fail=log_path.read_text)
        finally:
            demo.send_signal(signal.SIGTERM)  # `kill %1`
            rc = demo.wait(60)
    text = log_path.read_text(errors="replace")
    assert rc == 0, text
    assert "released back to the queue (worker stopping)" in text, text
