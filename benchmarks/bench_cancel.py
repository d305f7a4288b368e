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
    from sqlalchemy import func, select

    import science.interventions as interventions
    from science.interventions import fit_edit, n_fit_sequences
    from science.measure import capture
    from science.seeds import data_seed
    from store import jobs as J
    from store.config import Settings
    from store.migrate import init_db
    from store.models import InterventionResult, Job
    from store.session import make_engine, make_sessionmaker
    from worker.params import InterveneParams, TrainParams
    from worker.pipeline import load_run
    from worker.queue import JobQueue, submit
    from worker.runner import Runner

    torch.set_num_threads(args.threads)

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
    train = TrainParams(family=args.family, task=args.task, max_steps=1, measure=None)
    train_id = submit(factory, queue, "train", train)
    assert runner.run_one(train_id) == "succeeded"
    with factory() as s:
        run_id = s.get(Job, train_id).run_id

    # one uninterrupted INLP fit on the job's own fit states: what a cancel used to wait for
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

    fits: list[float] = []
    real_fit = interventions.fit_probe

    def counted(*a, **k):
        fits.append(time.monotonic())
        return real_fit(*a, **k)

    interventions.fit_probe = counted
    print("| cancel at (s into INLP) | flag → row cancelled (s) | probe fits after the flag | rows stored |")
    print("|---:|---:|---:|---:|")
    for delay in [float(d) for d in args.delays.split(",")]:
        fits.clear()
        job_id = submit(
            factory, queue, "intervene", InterveneParams(run_id=run_id, methods=["inlp"], layers=[0], eval_lengths=[40])
        )
        out: dict[str, float] = {}

        def api(job_id: int = job_id, delay: float = delay, out: dict[str, float] = out) -> None:
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

        watcher = threading.Thread(target=api, daemon=True)
        watcher.start()
        state = runner.run_one(job_id)
        watcher.join(60)
        after = sum(t > out["flag"] for t in fits)
        with factory() as s:
            rows = s.scalar(select(func.count()).select_from(InterventionResult))
        assert state == J.CANCELLED, state
        print(f"| {delay:g} | {out['done'] - out['flag']:.2f} | {after} | {rows} |")
    interventions.fit_probe = real_fit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
