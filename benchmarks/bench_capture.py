"""All-layer capture vs a plain forward, per model family (target ≤ 1.1×).

Capture is ``models_store.capture.run_with_states`` (forward hooks on the embedding and every
block, one pass, every layer -1..n-1 kept); the baseline is ``model(tokens)`` on the same
batch. Both in eval mode under ``torch.no_grad`` (how probes read states), interleaved
round-robin (order alternating) so a noisy, shared CPU slows both alike; each figure is the median of ``--reps``.
The table also counts forward passes per capture (a hook on the whole model): it must be 1.

Usage::

    python benchmarks/bench_capture.py                      # all families
    python benchmarks/bench_capture.py --families mamba,transformer --batch 500 --reps 30
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
from models_store import ModelConfig, build_model, fast_scan
from models_store.capture import run_with_states

FAMILIES = family_names()
VOCAB, CLASSES = 16, 6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--batch", type=int, default=500, help="sequences per forward (probe data is read in such batches)")
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions (median reported)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fast", action="store_true", help="install the fast Mamba mixers if the builder does not")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if set(families) - set(FAMILIES):
        ap.error(f"unknown families {sorted(set(families) - set(FAMILIES))}")

    tokens = torch.randint(0, VOCAB, (args.batch, args.length), generator=torch.Generator().manual_seed(0))
    print(
        f"# Capture (all layers, one pass) vs plain forward; batch {args.batch}, L {args.length}, "
        f"eval + no_grad, {args.threads} threads, torch {torch.__version__}"
    )
    print()
    print(
        "| family | layers captured | forwards per capture | plain ms (median) | capture ms (median) | × plain "
        "| × plain (min) | × plain (CPU) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fam in families:
        model = build_model(ModelConfig(family=fam, vocab_size=VOCAB, n_classes=CLASSES), seed=0).eval()
        if args.fast:
            fast_scan.install(model)
        calls: list[int] = []
        counter = model.register_forward_hook(lambda m, a, o, calls=calls: calls.append(1))
        with torch.no_grad():
            for _ in range(args.warmup):
                model(tokens)
                run_with_states(model, tokens)
            calls.clear()
            _, states = run_with_states(model, tokens)
            n_forwards = len(calls)
            plain: list[float] = []
            capture: list[float] = []
            plain_cpu: list[float] = []
            capture_cpu: list[float] = []
            for rep in range(args.reps):
                for kind in ("plain", "capture") if rep % 2 else ("capture", "plain"):  # alternate order
                    t0, c0 = time.perf_counter(), time.process_time()
                    if kind == "plain":
                        model(tokens)
                    else:
                        run_with_states(model, tokens)
                    (plain if kind == "plain" else capture).append(time.perf_counter() - t0)
                    (plain_cpu if kind == "plain" else capture_cpu).append(time.process_time() - c0)
        counter.remove()
        p, c = statistics.median(plain), statistics.median(capture)
        print(
            f"| {fam}{' (fast)' if fast_scan.installed(model) else ''} | {len(states)} | {n_forwards} | "
            f"{p * 1e3:,.1f} | {c * 1e3:,.1f} | **{c / p:.3f}** | {min(capture) / min(plain):.3f} | "
            f"{statistics.median(capture_cpu) / statistics.median(plain_cpu):.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
