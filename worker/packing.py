"""Packing several small runs onto one device: ``layerscope worker --concurrency N``.

A study's models are small: one training run leaves a GPU mostly idle. The
:class:`Supervisor` starts N ordinary worker processes (``layerscope worker --parent-pid …``,
"slots") on the same device; each claims, heartbeats and finishes its own jobs exactly as a lone
worker does, under its own name (``<host>-<supervisor pid>-<slot>``, or ``<name>-<slot>``).
``--device`` and ``CUDA_VISIBLE_DEVICES`` pass through to every slot; each slot gets
``cores // N`` CPU threads (at least 1) so N slots do not oversubscribe the CPU.

Stopping: Ctrl-C or SIGTERM stops every slot; each hands its running job back to the queue
(``Runner._release``). A second signal kills the slots outright (the reaper re-queues their jobs).
A slot that dies on its own (an OOM kill) is started again; a slot that keeps dying within
:data:`FAST_FAILURE_S` of its start is given up after :data:`MAX_FAST_FAILURES` tries.
A slot whose supervisor vanished (``kill -9``) notices and stops, handing its job back.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
FAST_FAILURE_S = 30.0
MAX_FAST_FAILURES = 3


def cpu_cores() -> int:
    """CPU cores this process may run on (the affinity mask, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS / Windows have no affinity mask
        return os.cpu_count() or 1


def slot_threads(n_slots: int, cores: int | None = None) -> int:
    """CPU threads per slot: ``cores // n_slots``, at least 1."""
    if n_slots < 1:
        raise ValueError(f"concurrency must be at least 1, got {n_slots}")
    return max(1, (cores if cores is not None else cpu_cores()) // n_slots)


def slot_name(base: str | None, slot: int) -> str:
    """``<name>-<slot>``, default ``<host>-<supervisor pid>-<slot>``."""
    return f"{base or f'{socket.gethostname()}-{os.getpid()}'}-{slot}"


def configure_threads(threads: int, *, torch_now: bool) -> None:
    """Limit this process to ``threads`` CPU threads: the OpenMP/MKL variables (read by libraries
    loaded later) and, when ``torch_now`` or torch is already loaded, ``torch.set_num_threads``."""
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    for var in THREAD_ENV_VARS:
        os.environ[var] = str(threads)
    if torch_now or "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)


# Set by the first stop signal. The KeyboardInterrupt the handler raises is lost when the signal
# lands while a finalizer or a weakref callback runs (CPython prints "Exception ignored in …" and
# goes on; seen in CI inside SQLAlchemy's ``_collection_gced``): the worker then kept running
# with every later signal ignored. The flag survives that; :func:`raise_if_stopping` re-raises.
STOP_REQUESTED = threading.Event()


def raise_if_stopping() -> None:
    """Raise KeyboardInterrupt if a stop signal arrived (called between steps and between jobs).

    Raises:
        KeyboardInterrupt: after :func:`stop_on_first_signal`'s handler ran."""
    if STOP_REQUESTED.is_set():
        raise KeyboardInterrupt("stop signal received")


def stop_on_first_signal() -> None:
    """The first SIGINT or SIGTERM raises KeyboardInterrupt (the worker hands its job back and
    exits) and later ones are ignored, so a terminal's Ctrl-C plus the parent's own stop signal
    (the demo's, a supervisor's) cannot interrupt the hand-back or the exit. Both handlers are
    set explicitly: a process started in the background by a script inherits SIGINT *ignored*,
    and a worker of such a demo ignored the demo's SIGINT until it was killed, its job left
    ``running``. The signal also sets :data:`STOP_REQUESTED`, so a KeyboardInterrupt swallowed
    by a finalizer is raised again at the next :func:`raise_if_stopping`. Main thread only
    (``signal.signal``)."""

    def first_signal(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        STOP_REQUESTED.set()
        raise KeyboardInterrupt

    STOP_REQUESTED.clear()
    previous_hook = sys.unraisablehook

    def quiet_swallowed_stop(unraisable: Any) -> None:
        # the stop signal's KeyboardInterrupt lost in a finalizer is expected and handled by the
        # flag: no "Exception ignored … Traceback" in the log; anything else is reported as before
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and STOP_REQUESTED.is_set():
            return
        previous_hook(unraisable)

    sys.unraisablehook = quiet_swallowed_stop
    signal.signal(signal.SIGINT, first_signal)
    signal.signal(signal.SIGTERM, first_signal)


def become_slot(parent_pid: int, poll_s: float = 0.5) -> None:
    """Run as one slot of a supervisor: :func:`stop_on_first_signal`; if the supervisor
    disappears (``kill -9``) the slot stops itself the same way."""
    stop_on_first_signal()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        log.warning("supervisor %s is gone: stopping this slot", parent_pid)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


@dataclass
class Slot:
    index: int
    name: str
    popen: subprocess.Popen | None = None
    started: float = 0.0
    fast_failures: int = 0
    returncode: int | None = None  # set once the slot is finished for good


class Supervisor:
    """Starts and watches ``n`` worker processes; ``run()`` blocks until they all finished."""

    def __init__(
        self,
        n: int,
        *,
        name: str | None = None,
        device: str | None = None,
        executor: str | None = None,
        threads: int | None = None,
        extra_args: Sequence[str] = (),
        python: str = sys.executable,
        grace_s: float = 120.0,
        poll_s: float = 0.2,
    ) -> None:
        self.n = n
        self.threads = threads if threads is not None else slot_threads(n)
        self.device, self.executor, self.extra_args = device, executor, list(extra_args)
        self.python, self.grace_s, self.poll_s = python, grace_s, poll_s
        self.slots = [Slot(i, slot_name(name, i)) for i in range(n)]
        self.stopping = False

    def command(self, slot: Slot) -> list[str]:
        cmd = [
            self.python,
            "-m",
            "backend.cli",
            "worker",
            "--name",
            slot.name,
            "--parent-pid",
            str(os.getpid()),
            "--threads",
            str(self.threads),
            "--concurrency",
            "1",
        ]  # 1: LAYERSCOPE_WORKER_CONCURRENCY is inherited
        if self.device:
            cmd += ["--device", self.device]
        if self.executor:
            cmd += ["--executor", self.executor]
        return cmd + self.extra_args

    def _spawn(self, slot: Slot) -> None:
        env = {**os.environ, **{var: str(self.threads) for var in THREAD_ENV_VARS}}
        slot.popen = subprocess.Popen(self.command(slot), env=env)
        slot.started = time.monotonic()
        log.info("slot %s started (pid %s, %s thread(s))", slot.name, slot.popen.pid, self.threads)

    def pids(self) -> list[int]:
        return [s.popen.pid for s in self.slots if s.popen is not None and s.popen.poll() is None]

    def run(self) -> int:
        """Start the slots and watch them until all finished; returns the exit status (0 when
        every slot ended cleanly). KeyboardInterrupt (Ctrl-C, SIGTERM via the CLI) → :meth:`stop`."""
        for slot in self.slots:
            self._spawn(slot)
        try:
            while self._watch():
                time.sleep(self.poll_s)
        except KeyboardInterrupt:
            self.stop()
            raise
        return next((s.returncode for s in self.slots if s.returncode), 0)

    def _watch(self) -> bool:
        """Restart slots that died; True while any slot is alive."""
        alive = False
        for slot in self.slots:
            if slot.returncode is not None or slot.popen is None:
                continue
            rc = slot.popen.poll()
            if rc is None:
                alive = True
            elif rc == 0 or self.stopping:
                slot.returncode = rc
            else:
                alive = self._restart(slot, rc) or alive
        return alive

    def _restart(self, slot: Slot, rc: int) -> bool:
        uptime = time.monotonic() - slot.started
        slot.fast_failures = slot.fast_failures + 1 if uptime < FAST_FAILURE_S else 0
        if slot.fast_failures >= MAX_FAST_FAILURES:
            log.error(
                "slot %s exited with status %s %d times in a row within %.0f s of its start: giving up on it",
                slot.name,
                rc,
                slot.fast_failures,
                FAST_FAILURE_S,
            )
            slot.returncode = rc if rc > 0 else 1
            return False
        log.warning(
            "slot %s exited with status %s after %.1f s: starting it again (its job, if any, is "
            "re-queued by the reaper)",
            slot.name,
            rc,
            uptime,
        )
        self._spawn(slot)
        return True

    def stop(self) -> None:
        """Ask every slot to stop (SIGINT: each hands its running job back); kill those still
        running after ``grace_s`` or at a second Ctrl-C / SIGTERM."""
        self.stopping = True
        live = [(s, proc) for s in self.slots if (proc := s.popen) is not None and proc.poll() is None]
        for _, proc in live:
            try:
                proc.send_signal(signal.SIGINT)
            except ProcessLookupError:  # exited between poll and signal
                continue
        deadline = time.monotonic() + self.grace_s
        try:
            while any(proc.poll() is None for _, proc in live) and time.monotonic() < deadline:
                time.sleep(0.05)
        except KeyboardInterrupt:
            log.warning("second interrupt: killing the slots (the reaper re-queues their jobs)")
        for slot, proc in live:
            if proc.poll() is None:
                log.warning("slot %s did not stop: killed", slot.name)
                proc.kill()
            slot.returncode = proc.wait()
