"""The full activation-patching grid per family vs plain forwards (target ≤ 1.0).

Grid: every site (resid_pre, resid_post, state; the transformer has no state) × every layer ×
every position 0..L−1 at L 40, 128 pairs, one ~830K-parameter model per family (built with the
product's defaults: START token on, widths solved to the parameter target; weights untrained —
the cost does not depend on them). Time = ``science.patching.patching_grid`` wall time, pairs
drawn and recoveries bootstrapped included. Baseline = one plain ``model(tokens)`` forward over
the same 128 corrupted sequences (eval, no_grad; median of ``--reps``). Reported ratio =
grid seconds / (cells × plain forward seconds): below 1 means the grid costs less than
re-running the whole model once per cell (recurrent families re-run only blocks ℓ.. on
positions t.. from stored states; the transformer re-runs blocks ℓ.. from the corrupted run's
recorded output of the layer before, several positions per batch, and shares resid_pre ℓ with
resid_post ℓ−1).

Usage::

    python benchmarks/bench_patching.py                          # all families, CPU
    python benchmarks/bench_patching.py --device cuda --families mamba,lstm
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerscope_core.registry import family_names
from models_store import ModelConfig, build_model
from science.patching import patching_grid
from science.tasks import get_task


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(family_names()))
    ap.add_argument("--task", default="parity")
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--pairs", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10, help="plain forwards timed (median)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if set(families) - set(family_names()):
        ap.error(f"unknown families {sorted(set(families) - set(family_names()))}")
    task = get_task(args.task)
    dev = args.device
    name = torch.cuda.get_device_name(0) if dev.startswith("cuda") else f"CPU, {args.threads} threads"
    print(
        f"# Patching grid vs plain forwards: {args.task}, L {args.length}, {args.pairs} pairs, {name}, "
        f"torch {torch.__version__}"
    )
    print()
    print("| family | params | layers | cells | grid s | plain forward ms | cells × plain s | × (cells × plain) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fam in families:
        model = (
            build_model(
                ModelConfig(family=fam, vocab_size=task.vocab_size, n_classes=task.n_classes, start_token=True), seed=0
            )
            .to(dev)
            .eval()
        )
        tokens = task.generate(args.length, args.pairs, seed=1).tokens.to(dev)
        with torch.no_grad():
            for _ in range(2):
                model(tokens)
            times = []
            for _ in range(args.reps):
                _sync(dev)
                t0 = time.perf_counter()
                model(tokens)
                _sync(dev)
                times.append(time.perf_counter() - t0)
        plain = statistics.median(times)
        patching_grid(
            model, task, run_seed=0, eval_length=args.length, positions=[0, args.length - 1], n_pairs=8, device=dev
        )  # warm-up (kernels, caches)
        _sync(dev)
        t0 = time.perf_counter()
        rows = patching_grid(
            model, task, run_seed=0, eval_length=args.length, n_pairs=args.pairs, batch_size=args.pairs, device=dev
        )
        _sync(dev)
        grid = time.perf_counter() - t0
        cells = len(rows)
        print(
            f"| {fam} | {model.n_params:,} | {model.n_layers} | {cells} | {grid:.1f} | {1000 * plain:.1f} "
            f"| {cells * plain:.1f} | **{grid / (cells * plain):.2f}** |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
