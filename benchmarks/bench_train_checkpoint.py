"""What mid-run training checkpoints cost (docs/SCIENCE.md#resuming-training): the time to write
one (``science.train_checkpoint.save``: weights, AdamW moments, schedule, RNG, loop state) and
to read it back, as a ratio to the training steps between two checkpoints (100 by default),
measured in the same run for each paper-sized family (~830K parameters, batch 64, L = 40).

Usage::

    python benchmarks/bench_train_checkpoint.py                     # every family, markdown table
    python benchmarks/bench_train_checkpoint.py --families lstm,mamba2 --steps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerscope_core.registry import family_names
from models_store import ModelConfig, build_model
from science import train_checkpoint
from science.tasks import get_task
from science.train_checkpoint import LoopState
from science.training import TrainConfig, _DataStream, _train_step, make_scheduler


def measure(family: str, steps: int, repeats: int, every: int) -> dict[str, float]:
    """Median seconds of one training step and of one checkpoint write and read for ``family``."""
    task = get_task("parity")
    torch.manual_seed(0)
    model = build_model(ModelConfig(family=family, vocab_size=task.vocab_size, n_classes=task.n_classes))
    c = TrainConfig(curriculum_start=None)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
    sched = make_scheduler(opt, max_steps=c.max_steps, warmup_steps=c.warmup_steps, lr_schedule=c.lr_schedule)
    stream = _DataStream(task, c, seed=0)
    step_s = []
    for step in range(1, steps + 2):
        t0 = time.perf_counter()
        _train_step(model, opt, sched, c, stream.batch(step, c.train_length), "cpu")
        if step > 1:  # the first step warms up
            step_s.append(time.perf_counter() - t0)
    loop = LoopState(step=steps + 1, curve=[{"step": i, "loss": 0.5, "heldout_token_acc": None} for i in range(every)])
    save_s, load_s, size = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.pt"
        for _ in range(repeats):
            t0 = time.perf_counter()
            train_checkpoint.save(path, "id", model, opt, sched, loop)
            save_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            train_checkpoint.load(path, "id", model, opt, sched)
            load_s.append(time.perf_counter() - t0)
        size = path.stat().st_size
    step_median, save_median = statistics.median(step_s), statistics.median(save_s)
    return {
        "step_s": step_median,
        "save_s": save_median,
        "load_s": statistics.median(load_s),
        "mb": size / 1e6,
        "overhead": save_median / (every * step_median),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(f for f in family_names() if "_" not in f))
    ap.add_argument("--steps", type=int, default=5, help="timed training steps per family")
    ap.add_argument("--repeats", type=int, default=5, help="timed checkpoint writes/reads per family")
    ap.add_argument("--every", type=int, default=100, help="steps between checkpoints")
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"| family | one step (s) | write (s) | read (s) | file (MB) | write / {a.every} steps |")
    print("|---|---:|---:|---:|---:|---:|")
    for family in a.families.split(","):
        r = measure(family, a.steps, a.repeats, a.every)
        print(
            f"| {family} | {r['step_s']:.3f} | {r['save_s']:.4f} | {r['load_s']:.4f} | {r['mb']:.1f} | "
            f"{r['overhead']:.2%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
