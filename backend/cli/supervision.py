"""Process supervision for ``worker``, ``demo`` and ``serve``: signals, exit handlers and child
worker processes.

- SIGTERM (``kill``, ``docker stop``) is read as Ctrl-C once (:func:`raise_interrupt`), so a
  worker hands its job back to the queue; a late signal while the interpreter exits is ignored
  (:func:`quiet_exit`).
- ``worker --concurrency N`` runs N slot processes under ``worker.packing.Supervisor``
  (:func:`supervise_slots`).
- ``demo`` starts one worker process beside its server (:func:`start_worker`), which on Linux gets
  SIGTERM when the demo dies however it dies (``prctl(PR_SET_PDEATHSIG)``), and stops it with
  SIGINT (:func:`stop_worker`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import typer

from backend.cli.common import CliError
from backend.cli.common import settings as get_settings


def raise_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C, once: a second SIGTERM (the demo's worker also gets one when the demo
    exits) must not interrupt the job's release or the interpreter's exit (atexit callbacks)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def quiet_exit() -> None:
    """The work is handed back: a late SIGTERM/SIGINT while the interpreter exits is ignored
    (no "Exception ignored in atexit callback … KeyboardInterrupt" traceback). Registered last,
    this atexit callback runs before the others (LIFO); nothing changes before the exit."""
    import atexit

    atexit.unregister(_ignore_stop_signals)
    atexit.register(_ignore_stop_signals)


def _ignore_stop_signals() -> None:
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def supervise_slots(
    n: int,
    name: str | None,
    device: str | None,
    executor: str | None,
    threads: int | None,
    max_jobs: int | None,
    idle_exit: float | None,
) -> int:
    """Run ``n`` worker slot processes on one device until Ctrl-C / SIGTERM (then 0).

    Raises:
        CliError: a slot failed (its exit status).
    """
    from worker.packing import Supervisor

    extra = (["--max-jobs", str(max_jobs)] if max_jobs else []) + (
        ["--idle-exit", str(idle_exit)] if idle_exit is not None else []
    )
    sup = Supervisor(n, name=name, device=device, executor=executor, threads=threads, extra_args=extra)
    signal.signal(signal.SIGTERM, raise_interrupt)  # `docker stop`: every slot hands its job back
    typer.echo(
        f"layerscope: {n} worker slots on {device or get_settings().device}, {sup.threads} CPU thread(s) "
        f"each (Ctrl-C to stop)",
        err=True,
    )
    try:
        rc = sup.run()
    except KeyboardInterrupt:
        typer.echo(f"layerscope: {n} worker slots stopped", err=True)
        return 0
    finally:
        quiet_exit()
    if rc:
        raise CliError(f"worker slot(s) failed (exit status {rc}); see the log above")
    return 0


def start_worker(settings, device: str | None, executor: str | None = None) -> subprocess.Popen:
    """``layerscope worker --name demo-worker`` as a child process on ``settings``' DB, queue and store."""
    env = dict(os.environ)
    env.update(
        LAYERSCOPE_DB_URL=settings.resolved_db_url,
        LAYERSCOPE_QUEUE_URL=settings.resolved_queue_url,
        LAYERSCOPE_STORE_DIR=str(settings.resolved_store_dir),
        LAYERSCOPE_QUEUE_NAME=settings.queue_name,
    )
    cmd = [sys.executable, "-m", "backend.cli", "worker", "--name", "demo-worker"]
    if device:
        cmd += ["--device", device]
    if executor:
        cmd += ["--executor", executor]
    return subprocess.Popen(cmd, env=env, preexec_fn=_worker_child_setup if sys.platform == "linux" else None)


def _worker_child_setup() -> None:
    """In the demo's worker (Linux): get SIGTERM when the demo process dies, however it dies
    (uvicorn re-raises SIGTERM, so the demo's ``finally`` may never run); the worker then hands
    its job back to the queue. SIGINT, which the worker may inherit ignored (a script's
    ``layerscope demo &``), is set by the worker itself (``worker.packing.stop_on_first_signal``)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_worker(proc: subprocess.Popen) -> None:
    """Stop a worker started by :func:`start_worker`: SIGINT (it hands its job back), then kill
    after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # the worker releases its job back to the queue
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    typer.echo("layerscope: stopped", err=True)
