"""One evaluation of the probe's objective on rows over the CPU's cache: read a block of columns at
a time (``science.probes.solver._blocked_objective``), and in one pass by the compiled kernel
(``science.probes.onepass``, measurement version 3, with the algebra around it as a fit runs it:
``science.probes.kernel_objective.KernelObjective``), against the two-product evaluation, and all
against the evaluation's floor (``benchmarks/floors.py``), CPU seconds, rates measured in this run.

    OMP_NUM_THREADS=1 python benchmarks/bench_blocked_objective.py --shapes 39000x768x2 160000x160x2 100000x768x6

Each shape is ``N x D x K`` (rows, features, classes), random standardised rows; the printed
``blocked / whole`` and ``one-pass / whole`` are ratios of CPU seconds (medians of ``--repeats``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.floors, run as a script

import science.probes.solver as solver
from benchmarks.floors import machine_rates
from science.probes import onepass
from science.probes.design import standardise
from science.probes.kernel_objective import KernelObjective


def _seconds(evaluate, th: torch.Tensor, repeats: int) -> float:
    evaluate(th)  # warm
    times = []
    for _ in range(repeats):
        t = time.process_time()
        evaluate(th)
        times.append(time.process_time() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["39000x768x2", "160000x160x2", "100000x768x6"])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    rates = machine_rates()
    print(f"rates: {rates.gflops:.1f} GFLOP/s fp32 matmul, {rates.gbps:.1f} GB/s read (one thread, CPU seconds)")
    print(
        "| N × D × K | whole ms | blocked ms | one-pass ms | blocked / whole | one-pass / whole | floor ms "
        "| whole / floor | blocked / floor | one-pass / floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes:
        n, d, k = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        design = standardise(torch.randn(n, d, generator=g))
        y = torch.randint(0, k, (n,), generator=g)
        Y = torch.nn.functional.one_hot(y, k).double()
        M = torch.eye(d, dtype=torch.float64)
        th = torch.randn(k * d + k, dtype=torch.float64, generator=g) * 1e-2
        whole = _seconds(solver._objective(design, Y, M, 1e-4), th, args.repeats)  # two products, any size
        os.environ["LAYERSCOPE_PROBE_KERNEL"] = "torch"  # version 2's blocks
        blocked = _seconds(solver._blocked_objective(design, y, k, M, 1e-4), th, args.repeats)
        del os.environ["LAYERSCOPE_PROBE_KERNEL"]
        one = float("nan")
        if onepass.applies(design.Xt, k):  # what a fit runs: the kernel with the algebra around it
            one = _seconds(KernelObjective(design, y, k, M, 1e-4, 1.0), th, args.repeats)
        floor = rates.evaluation(n, d, k)
        print(
            f"| {n:,} × {d} × {k} | {whole * 1e3:.2f} | {blocked * 1e3:.2f} | {one * 1e3:.2f} | {blocked / whole:.2f} "
            f"| {one / whole:.2f} | {floor * 1e3:.2f} | {whole / floor:.2f} | {blocked / floor:.2f} | {one / floor:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
