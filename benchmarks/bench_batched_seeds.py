"""Batched seeds: 3 seeds of one cell one after another vs the same 3 seeds as one vmapped model.

Per family, at ~830K parameters (``ModelConfig`` solves each width; ``--param-target`` or
``--d-model`` for another size), the recipe's step (AdamW, global-norm clipping at 1.0, the
warm-up + cosine schedule) on parity batches of 64 × L 40 (each seed's own ``train_model``
stream, generated before timing):

- **one after another**: ``science.batched.SeedTrainer`` on each seed's model in turn — the
  study's path, models as built (the fast CPU Mamba / Mamba-2 mixers included);
- **batched**: ``science.batched.BatchedSeeds`` — one vmapped forward/backward over the three
  seeds' stacked parameters (plain-op LSTM/GRU, transformers' torch path for Mamba/Mamba-2);
- **same function, one after another**: ``SeedTrainer`` on ``science.batched.vmappable`` copies
  (the plain-op LSTM/GRU, transformers' Mamba path; the Transformer is unchanged): what
  vmap itself buys, apart from the cost of the formulation it needs.

Rounds interleave the three (3 sequential steps, 1 batched step, 3 same-function steps) so a shared, noisy CPU
slows both alike; each figure is the median over ``--steps`` rounds after ``--warmup``. The
ratio is sequential ÷ batched time for the same 3 seed-steps: > 1 means batching pays.
``mamba``'s batched step runs transformers' slow CPU scan, so it gets ``--slow-steps`` rounds.

Usage::

    python benchmarks/bench_batched_seeds.py --threads 1               # every family, markdown table
    python benchmarks/bench_batched_seeds.py --families lstm,gru --steps 10
    python benchmarks/bench_batched_seeds.py --device cuda --steps 20     # on a lent GPU
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models_store import ModelConfig, build_model
from science.batched import BatchedSeeds, SeedTrainer, seed_batch, vmappable
from science.tasks import get_task

DEFAULT_FAMILIES = "transformer,mamba,mamba2,lstm,gru"
RECIPE: dict[str, Any] = {
    "lr": 1e-3,
    "weight_decay": 0.01,
    "max_steps": 1000,
    "warmup_steps": 100,
    "lr_schedule": "cosine",
    "grad_clip": 1.0,
}


def measure(family: str, args: argparse.Namespace) -> dict:
    """Median wall and CPU ms per round (3 seed-steps) of both paths for ``family``."""
    task = get_task("parity")
    kw: dict[str, Any] = {
        "family": family,
        "vocab_size": task.vocab_size,
        "n_classes": task.n_classes,
        "start_token": True,
    }
    if args.d_model:
        kw["d_model"] = args.d_model
    else:
        kw["param_target"] = args.param_target
    cfg = ModelConfig(**kw)
    seeds = list(range(args.seeds))
    rounds = args.warmup + (args.slow_steps if family == "mamba" else args.steps)
    caches: list[dict] = [{} for _ in seeds]
    batches = [
        [
            seed_batch(task, s, t, length=args.length, batch_size=args.batch, block=50, cache=caches[s])
            for t in range(1, rounds + 1)
        ]
        for s in seeds
    ]  # batches[s][t] = (x, y) [B, L]
    dev = torch.device(args.device)
    batches = [[(x.to(dev), y.to(dev)) for x, y in per_seed] for per_seed in batches]
    sequential = [SeedTrainer(build_model(cfg, seed=s).to(dev), **RECIPE) for s in seeds]
    batched = BatchedSeeds([build_model(cfg, seed=s).to(dev) for s in seeds], **RECIPE)
    plain = [SeedTrainer(vmappable(build_model(cfg, seed=s)).to(dev), **RECIPE) for s in seeds]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    wall: dict[str, list[float]] = {"seq": [], "bat": [], "plain": []}
    cpu: dict[str, list[float]] = {"seq": [], "bat": [], "plain": []}

    def timed(name: str, t: int, fn, *fn_args):  # fn(*fn_args), timed from round `warmup` on
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(*fn_args)
        sync()
        if t >= args.warmup:
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
        return out

    def one_by_one(trainers: list[SeedTrainer], t: int) -> list[float]:
        return [tr.step(*batches[i][t]) for i, tr in enumerate(trainers)]

    for t in range(rounds):
        seq_losses = timed("seq", t, one_by_one, sequential, t)
        x = torch.stack([batches[i][t][0] for i in seeds])  # (S, B, L)
        y = torch.stack([batches[i][t][1] for i in seeds])  # (S, B, L)
        bat_losses = timed("bat", t, batched.step, x, y)
        timed("plain", t, one_by_one, plain, t)
        gap = (bat_losses - torch.tensor(seq_losses)).abs().max().item()
    n_params = sum(p.numel() for p in sequential[0].model.parameters())
    return {
        "family": family,
        "d_model": cfg.d_model,
        "params": n_params,
        "rounds": len(wall["bat"]),
        "gap": gap,
        **{k: statistics.median(v) for k, v in wall.items()},
        **{f"{k}_cpu": statistics.median(v) for k, v in cpu.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=DEFAULT_FAMILIES)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="timed rounds per family (median reported)")
    ap.add_argument("--slow-steps", type=int, default=2, help="timed rounds for mamba (its batched step is slow)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--param-target", type=int, default=830_000)
    ap.add_argument("--d-model", type=int, default=None, help="a fixed width instead of the parameter target")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (a lent GPU)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*batching rule.*")  # SDPA: vmap loops over seeds (noted in docs)
    rows = [measure(f.strip(), args) for f in args.families.split(",") if f.strip()]
    print(
        f"# {args.seeds} seeds, batch {args.batch}, L {args.length}, AdamW + clip 1.0 + cosine, "
        f"{args.threads} thread(s), torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else "")
    )
    print()
    print(
        f"| family | d_model | params | rounds | {args.seeds} seeds one after another, ms | batched, ms "
        "| **ratio** (sequential / batched) | CPU ratio | same function one after another, ms "
        "| vmap alone (same function / batched) | max loss gap |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['family']} | {r['d_model']} | {r['params']:,} | {r['rounds']} | {r['seq'] * 1e3:,.0f} "
            f"| {r['bat'] * 1e3:,.0f} | **{r['seq'] / r['bat']:.2f}** | {r['seq_cpu'] / r['bat_cpu']:.2f} "
            f"| {r['plain'] * 1e3:,.0f} | {r['plain'] / r['bat']:.2f} | {r['gap']:.1e} |"
        )
    print()
    print(
        "ratio > 1: the batched model trains the seeds faster; < 1: one after another is faster. "
        "Times are per round (one step of every seed), medians. "
        "max loss gap: the largest |batched − sequential| per-seed loss of the last round (the two "
        "paths train the same runs)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
