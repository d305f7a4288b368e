"""Packing several runs onto one device: ``layerscope worker --concurrency N`` on CPU, with real
worker processes on a SQLite DB + SQLite queue and the fake pipeline (``tests.lab.packing_pipeline``:
train jobs meet at a rendezvous, so they finish only if they really run at the same time).
Every wait has a deadline — a hang guard, never a timing assertion."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from sqlalchemy import func, select

from backend.cli import main
from store.migrate import init_db
from store.models import Job, ProbeResult, Run
from store.session import make_engine, make_sessionmaker
from store.settings import Settings, get_settings
from tests.conftest import FAKE_EXECUTOR, ROOT
from tests.lab.conftest import LAB_SETTINGS, wait_for
from worker import packing
from worker.job_params import TrainParams
from worker.queue import JobQueue, submit

PACKING_EXECUTOR = "tests.lab.packing_pipeline:execute"


class Deployment:
    """A SQLite DB + queue in ``tmp``, jobs submitted directly, supervisors as subprocesses."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        # a slow heartbeat on a loaded machine must not get a job reaped (the one test about
        # the reaper sets a short staleness itself)
        self.env = {
            **os.environ,
            **LAB_SETTINGS,
            "LAYERSCOPE_STALE_AFTER_SECONDS": "60",
            "PYTHONPATH": str(ROOT),
            "LAYERSCOPE_HOME": str(tmp / "home"),
            "LAYERSCOPE_STORE_DIR": str(tmp / "store"),
            "LAYERSCOPE_DB_URL": f"sqlite:///{tmp / 'lab.db'}",
            "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp / 'queue.db'}",
        }
        self.settings = Settings(
            _env_file=None,
            db_url=self.env["LAYERSCOPE_DB_URL"],
            queue_url=self.env["LAYERSCOPE_QUEUE_URL"],
            home=tmp / "home",
        )
        init_db(self.settings.resolved_db_url)
        self.engine = make_engine(self.settings.resolved_db_url)
        self.factory = make_sessionmaker(self.engine)
        self.queue = JobQueue.from_settings(self.settings)
        self.procs: list[subprocess.Popen] = []
        self.n_logs = 0

    def submit_train(self, seed: int, max_steps: int) -> int:
        params = TrainParams(
            family="lstm", task="parity", seed=seed, n_layers=2, max_steps=max_steps, measure={"eval_lengths": [40, 60]}
        )
        return submit(self.factory, self.queue, "train", params)

    def supervisor(self, *args: str, **env: str) -> subprocess.Popen:
        """``layerscope worker --concurrency 2 …`` in its own process group (as a shell runs it)."""
        self.n_logs += 1
        log = open(self.tmp / f"workers{self.n_logs}.log", "wb")  # noqa: SIM115 - owned by the process
        cmd = [
            sys.executable,
            "-m",
            "backend.cli",
            "worker",
            "--concurrency",
            "2",
            "--device",
            "cpu",
            "--executor",
            PACKING_EXECUTOR,
            *args,
        ]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(
            (self.tmp / f"workers{i}.log").read_text(errors="replace")[-4000:] for i in range(1, self.n_logs + 1)
        )

    def jobs(self, *ids: int) -> list[Job]:
        with self.factory() as s:
            return [s.get(Job, i) for i in ids]

    def count(self, model) -> int:
        with self.factory() as s:
            return s.execute(select(func.count()).select_from(model)).scalar_one()

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.engine.dispose()


@pytest.fixture
def dep(tmp_path: Path):
    d = Deployment(tmp_path)
    yield d
    d.close()


def wait_exit(dep: Deployment, proc: subprocess.Popen) -> int:
    wait_for(lambda: proc.poll() is not None, "the supervisor to exit", on_fail=dep.logs)
    return proc.returncode


def both_running(dep: Deployment, ids: tuple[int, int]) -> bool:
    jobs = dep.jobs(*ids)
    return all(j.state == "running" and j.progress > 0 for j in jobs) and len({j.worker for j in jobs}) == 2


# ----------------------------------------------------------------------------- units


def test_threads_per_slot_and_slot_names() -> None:
    assert [packing.slot_threads(n, cores=16) for n in (1, 2, 3, 8, 16, 32)] == [16, 8, 5, 2, 1, 1]
    assert packing.slot_threads(2, cores=2) == 1 and packing.slot_threads(3, cores=2) == 1
    with pytest.raises(ValueError, match="at least 1"):
        packing.slot_threads(0)
    assert packing.slot_name("gpu0", 3) == "gpu0-3"
    import socket

    assert packing.slot_name(None, 1) == f"{socket.gethostname()}-{os.getpid()}-1"
    sup = packing.Supervisor(4, name="w", device="cuda:1", executor="m:f", extra_args=["--max-jobs", "1"])
    cmd = sup.command(sup.slots[2])
    assert cmd[cmd.index("--name") + 1] == "w-2" and cmd[cmd.index("--device") + 1] == "cuda:1"
    assert cmd[cmd.index("--concurrency") + 1] == "1"  # an inherited LAYERSCOPE_WORKER_CONCURRENCY must not recurse
    assert cmd[cmd.index("--parent-pid") + 1] == str(os.getpid())
    assert cmd[cmd.index("--threads") + 1] == str(packing.slot_threads(4)) and cmd[-2:] == ["--max-jobs", "1"]


# ----------------------------------------------------------------------------- real processes


def test_two_slots_run_two_jobs_at_once(dep: Deployment) -> None:
    ids = (dep.submit_train(0, 5), dep.submit_train(1, 5))
    proc = dep.supervisor("--name", "pk", "--max-jobs", "1", LAYERSCOPE_FAKE_RENDEZVOUS="2", CUDA_VISIBLE_DEVICES="3")
    assert wait_exit(dep, proc) == 0, dep.logs()  # each slot ran one job, then the supervisor ended
    jobs = dep.jobs(*ids)
    assert [(j.state, j.attempt) for j in jobs] == [("succeeded", 1)] * 2, dep.logs()
    assert {j.worker for j in jobs} == {"pk-0", "pk-1"}
    assert jobs[0].result["pid"] != jobs[1].result["pid"]  # two processes ...
    assert max(j.started_at for j in jobs) < min(j.finished_at for j in jobs)  # ... running at the same time
    for j in jobs:
        assert j.result["device"] == "cpu" and j.result["cuda_visible_devices"] == "3"
        assert j.result["omp_threads"] == str(packing.slot_threads(2))
    assert dep.count(Run) == 2 and dep.count(ProbeResult) == 2 * 2 * 3  # results exactly once


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c to the process group", "kill -9 of the supervisor"])
def test_stopping_the_supervisor_stops_every_slot_and_hands_the_jobs_back(dep: Deployment, how: str) -> None:
    ids = (dep.submit_train(0, 400), dep.submit_train(1, 400))
    proc = dep.supervisor(LAYERSCOPE_FAKE_RENDEZVOUS="2", LAYERSCOPE_FAKE_STEP_S="0.1")
    wait_for(lambda: both_running(dep, ids), "both jobs to run", on_fail=dep.logs)
    slots = psutil.Process(proc.pid).children()
    assert len(slots) == 2
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif how == "ctrl-c to the process group":  # the terminal signals the supervisor and the slots
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.kill()
    rc = wait_exit(dep, proc)
    assert rc == (-signal.SIGKILL if how.startswith("kill") else 0), dep.logs()
    wait_for(
        lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in slots),
        "the slots to stop",
        on_fail=dep.logs,
    )
    jobs = dep.jobs(*ids)
    assert [(j.state, j.attempt, j.worker) for j in jobs] == [("queued", 0, None)] * 2, dep.logs()
    assert dep.queue.pending_ids() >= set(ids)
    # handed back, not lost: the next workers run each job once
    rerun = dep.supervisor("--max-jobs", "1", LAYERSCOPE_FAKE_STEP_S="0.001")
    assert wait_exit(dep, rerun) == 0, dep.logs()
    assert [(j.state, j.attempt) for j in dep.jobs(*ids)] == [("succeeded", 1)] * 2, dep.logs()
    assert dep.count(Run) == 2


def test_a_slot_killed_outright_is_started_again_and_its_job_reruns(dep: Deployment) -> None:
    job_id = dep.submit_train(0, 40)
    proc = dep.supervisor("--name", "pk", LAYERSCOPE_FAKE_STEP_S="0.1", LAYERSCOPE_STALE_AFTER_SECONDS="3")
    wait_for(lambda: dep.jobs(job_id)[0].progress > 0, "the job to run", on_fail=dep.logs)
    victim_name = dep.jobs(job_id)[0].worker
    slots = psutil.Process(proc.pid).children()
    victim = next(p for p in slots if victim_name in p.cmdline())
    victim.kill()  # an OOM kill
    wait_for(
        lambda: (
            len(psutil.Process(proc.pid).children()) == 2
            and victim.pid not in {p.pid for p in psutil.Process(proc.pid).children()}
        ),
        "the slot to be started again",
        on_fail=dep.logs,
    )
    wait_for(lambda: dep.jobs(job_id)[0].state == "succeeded", "the job to re-run", on_fail=dep.logs)
    assert dep.jobs(job_id)[0].attempt >= 2 and dep.count(Run) == 1, dep.logs()  # re-run, results once
    proc.send_signal(signal.SIGTERM)
    assert wait_exit(dep, proc) == 0


# ----------------------------------------------------------------------------- suite --submit


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_WORKER_POLL_SECONDS", "0.02")
    get_settings.cache_clear()
    yield make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'cli.db'}"))
    get_settings.cache_clear()


def test_suite_submit_enqueues_a_job_that_workers_run(cli_env, capsys) -> None:
    assert (
        main(["suite", "--preset", "smoke", "--family", "gru", "--family", "lstm", "--task", "parity", "--submit"]) == 0
    )
    out = capsys.readouterr()
    job_id = int(out.out.strip())
    assert f"job {job_id} (2 train job(s))" in out.err
    with cli_env() as s:
        job = s.get(Job, job_id)
        assert (job.kind, job.state, job.params["preset"]) == ("suite", "queued", "smoke")
    assert JobQueue.from_settings(get_settings()).pending_ids() == {job_id}
    assert main(["worker", "--executor", FAKE_EXECUTOR, "--idle-exit", "1"]) == 0  # the suite, then its 2 children
    with cli_env() as s:
        children = s.execute(select(Job).where(Job.parent_id == job_id)).scalars().all()
        assert sorted(c.state for c in children) == ["succeeded", "succeeded"]
        assert s.execute(select(func.count()).select_from(Run)).scalar_one() == 2


def test_suite_submit_refuses_a_device(cli_env, capsys) -> None:
    assert main(["suite", "--preset", "smoke", "--submit", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--device" in err and "workers" in err
