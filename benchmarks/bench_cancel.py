"""Cancel latency of an intervene job inside one INLP fit, on a paper-sized model.

    python benchmarks/bench_cancel.py                       # LSTM on dyck, cancels 2/5/10 s into INLP
    python benchmarks/bench_cancel.py --family gru --delays 1,3 --threads 2

What it does: trains the default 830K-parameter model for one step (its weights stored like any
run's), then, for each delay, submits an intervene job (``inlp`` at layer 0, L = 40, the paper
preset's 500 sequences) and runs it with the real job runner (heartbeat thread, DB context) in
this process while a second thread plays the API: it waits until the job's message says
"fitting inlp", waits the delay, sets the cancel flag on the row, then polls the row every 10 ms
until the job is ``cancelled``. Printed per delay: flag → row ``cancelled`` (s), the probe fits
INLP made after the flag, and rows stored. For comparison it times one uninterrupted INLP fit
on the same states: before a cancel was checked between rounds, a cancel waited for all of it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="lstm")
    ap.add_argument("--task", default="dyck")
    ap.add_argument("--delays", default="2,5,10", help="seconds into the INLP fit at which to cancel")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_cancel_") as folder:
        return _run(args, Path(folder))


def _run(args: argparse.Namespace, tmp: Path) -> int:
    import torch

    torch.set_num_threads(args.threads)
    factory, queue, runner = _worker(tmp)
    run_id = _trained_run(factory, queue, runner, args)
    _time_one_inlp_fit(runner, run_id, args)
    print("| cancel at (s into INLP) | flag → row cancelled (s) | probe fits after the flag | rows stored |")
    print("|---:|---:|---:|---:|")
    with _counted_probe_fits() as fits:
        for delay in [float(d) for d in args.delays.split(",")]:
            print(_cancel_once(factory, queue, runner, run_id, delay, fits))
    return 0


def _worker(tmp: Path):
    """(session factory, queue, job runner) over a fresh SQLite database and queue in ``tmp``."""
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker
    from store.settings import Settings
    from worker.queue import JobQueue
    from worker.runner import Runner

    settings = Settings(
        _env_file=None,
        home=tmp / "home",
        db_url=f"sqlite:///{tmp / 'db.db'}",
        queue_url=f"sqlite:///{tmp / 'queue.db'}",
        store_dir=tmp / "store",
        heartbeat_seconds=0.5,
    )
    init_db(settings.resolved_db_url)
    factory = make_sessionmaker(make_engine(settings.resolved_db_url))
    queue = JobQueue.from_settings(settings)
    runner = Runner(settings, device="cpu", name="bench", session_factory=factory, queue=queue)
    return factory, queue, runner


def _trained_run(factory, queue, runner, args: argparse.Namespace) -> int:
    """The id of a run of the default-sized model trained for one step (its weights stored)."""
    from store.models import Job
    from worker.job_params import TrainParams
    from worker.queue import submit

    train = TrainParams(family=args.family, task=args.task, max_steps=1, measure=None)
    train_id = submit(factory, queue, "train", train)
    assert runner.run_one(train_id) == "succeeded"
    with factory() as s:
        return s.get(Job, train_id).run_id


def _time_one_inlp_fit(runner, run_id: int, args: argparse.Namespace) -> None:
    """Print the time of one uninterrupted INLP fit on the job's own fit states: what a cancel used to wait for."""
    from science.interventions import fit_edit, n_fit_sequences
    from science.measure import capture
    from science.seeds import data_seed
    from worker.pipeline import load_run

    params, task, model = load_run(run_id, runner.env)
    n_fit = n_fit_sequences(model.d_model, params.train_length, 500)
    cap = capture(model, task.generate(params.train_length, n_fit, data_seed(0, "intervene_fit"), split="test"))
    x = cap.states[0].reshape(-1, model.d_model)
    y = cap.data.labels.reshape(-1)
    t0 = time.perf_counter()
    full = fit_edit("inlp", x[y >= 0], y[y >= 0], task.n_classes, seed=params.seed)
    whole = time.perf_counter() - t0
    print(
        f"{args.family} on {args.task}: d_model {model.d_model}, {sum(p.numel() for p in model.parameters()):,} "
        f"parameters; one INLP fit at layer 0 ({n_fit} sequences): {full.info['n_rounds']} rounds, {whole:.1f} s"
    )


@contextmanager
def _counted_probe_fits() -> Iterator[list[float]]:
    """The times of the probe fits INLP makes (``fit_design`` where its rounds call it, counted)."""
    import science.inlp as inlp

    fits: list[float] = []
    real_fit = inlp.fit_design

    def counted(*a, **k):
        fits.append(time.monotonic())
        return real_fit(*a, **k)

    inlp.fit_design = counted
    try:
        yield fits
    finally:
        inlp.fit_design = real_fit


def _cancel_when_fitting(factory, job_id: int, delay: float, out: dict[str, float]) -> None:
    """Play the API: wait until the job's message says the INLP fit began, wait ``delay``, set the
    cancel flag, then poll every 10 ms until the row says cancelled (``out``: "flag", "done")."""
    from store import jobs as J
    from store.models import Job

    while True:  # as a dashboard would: read the row until it says the fit began
        with factory() as s:
            if (s.get(Job, job_id).message or "").startswith("fitting inlp"):
                break
        time.sleep(0.05)
    time.sleep(delay)
    with factory() as s:
        J.request_cancel(s, job_id)
    out["flag"] = time.monotonic()
    while True:
        with factory() as s:
            if s.get(Job, job_id).state == J.CANCELLED:
                out["done"] = time.monotonic()
                return
        time.sleep(0.01)


def _cancel_once(factory, queue, runner, run_id: int, delay: float, fits: list[float]) -> str:
    """The measured section: an intervene job (INLP at layer 0, L 40) run by the job runner while a
    second thread cancels it ``delay`` s into the fit. Returns the table row."""
    from sqlalchemy import func, select

    from store import jobs as J
    from store.models import InterventionResult
    from worker.job_params import InterveneParams
    from worker.queue import submit

    fits.clear()
    job_id = submit(
        factory, queue, "intervene", InterveneParams(run_id=run_id, methods=["inlp"], layers=[0], eval_lengths=[40])
    )
    out: dict[str, float] = {}
    watcher = threading.Thread(target=_cancel_when_fitting, args=(factory, job_id, delay, out), daemon=True)
    watcher.start()
    state = runner.run_one(job_id)
    watcher.join(60)
    after = sum(t > out["flag"] for t in fits)
    with factory() as s:
        rows = s.scalar(select(func.count()).select_from(InterventionResult))
    assert state == J.CANCELLED, state
    return f"| {delay:g} | {out['done'] - out['flag']:.2f} | {after} | {rows} |"


if __name__ == "__main__":
    raise SystemExit(main())
