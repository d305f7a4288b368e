"""One evaluation of the probe's objective on rows on disk, a training split of them selected by a
mask (``science.spill.SelectedRows``, what INLP's and every streamed probe's rounds read): the
product's evaluation (each chunk gathered, centred and transposed for the kernel in one compiled
pass, ``science.probes.onepass.centred_transpose``) against the code before it (torch's
``index_select``, ``sub_`` and the kernel's transposed copy), the same bits, and both against the
evaluation's floor (``benchmarks/floors.py``). CPU seconds, rates measured in this run.

    OMP_NUM_THREADS=1 python benchmarks/bench_streamed_objective.py --shapes 65560x1024x3 65560x768x2

Each shape is ``N x D x K`` (rows on disk, features, classes); 80 % of the rows are selected, as
INLP's 80/20 split selects them; medians of ``--repeats`` evaluations, the two interleaved.

A second table times the product's evaluation by the wall clock against the same evaluation with
the file read in turn (one buffer, each chunk read when asked for: the reading before
``SpilledRows`` read the next chunk in a reader thread): what overlapping the read with the
arithmetic saves where a second core is free.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.floors, run as a script

from benchmarks.floors import machine_rates
from science.probes import onepass
from science.probes.design import Design, standardise_rows
from science.probes.solver import _chunked_objective, _Sums
from science.spill import RowSource, SpilledRows

Evaluation = Callable[[torch.Tensor], tuple[torch.Tensor, ...]]


def _torch_steps(d: Design, source: RowSource, y: torch.Tensor, k: int, M: torch.Tensor, lam: float) -> Evaluation:
    """The evaluation as it was made before the compiled pass: each chunk gathered by ``index_select``
    (``source.chunks()``), centred in place, handed to the kernel as a transposed view (copied)."""
    D, centre = int(d.Xt.shape[0]), d.centre.float()
    kernel = onepass.applies(d.Xt, k)  # as the product decides it, once a fit

    def evaluate(th: torch.Tensor) -> tuple[torch.Tensor, ...]:
        W = th[: k * D].view(k, D) @ M
        V, b = d.raw_weights(W).float(), th[k * D :]
        sums, start = _Sums(k, D), 0
        for X in source.chunks():
            X.sub_(centre)
            sums.add(V, b, X.T, y[start : start + X.shape[0]], d.n, kernel)
            start += int(X.shape[0])
        return sums.result(d, W, lam)

    return evaluate


def _timed(evaluate: Evaluation, th: torch.Tensor, clock: Callable[[], float] = time.process_time) -> float:
    t = clock()
    evaluate(th)
    return clock() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["65560x1024x3", "65560x768x2"])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    rates = machine_rates()
    print(f"rates: {rates.gflops:.1f} GFLOP/s fp32 matmul, {rates.gbps:.1f} GB/s read (one thread, CPU seconds)")
    print(
        "| N × D × K (80 % selected) | torch steps ms | compiled pass ms | new / old | floor ms | new / floor | same bits |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    reading = []
    for shape in args.shapes:
        n, d, k = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        mask = torch.rand(n, generator=g) < 0.8
        y = torch.randint(0, k, (n,), generator=g)[mask]
        th = torch.randn(k * d + k, dtype=torch.float64, generator=g) * 1e-2
        M = torch.eye(d, dtype=torch.float64)
        with SpilledRows(d) as rows:
            for i in range(0, n, 4096):
                rows.append(torch.randn(min(4096, n - i), d, generator=g))
            source = rows.selected(mask)
            design = standardise_rows(source)
            before, now = _torch_steps(design, source, y, k, M, 1e-4), _chunked_objective(design, y, k, M, 1e-4)
            in_turn_rows = rows.selected(mask, read_ahead=False)
            in_turn = _chunked_objective(dataclasses.replace(design, rows=in_turn_rows), y, k, M, 1e-4)
            results = [before(th), now(th), in_turn(th)]  # also the warm-up
            same = all(torch.equal(a, b) for a, b in zip(results[0], results[1], strict=True))
            same_read = all(torch.equal(a, b) for a, b in zip(results[1], results[2], strict=True))
            old_t, new_t, turn_wall, ahead_wall = [], [], [], []
            for _ in range(args.repeats):
                old_t.append(_timed(before, th))
                new_t.append(_timed(now, th))
                turn_wall.append(_timed(in_turn, th, time.perf_counter))
                ahead_wall.append(_timed(now, th, time.perf_counter))
        old, new = statistics.median(old_t), statistics.median(new_t)
        floor = rates.evaluation(int(mask.sum()), d, k)
        print(
            f"| {n:,} × {d} × {k} | {old * 1e3:.1f} | {new * 1e3:.1f} | {new / old:.2f} "
            f"| {floor * 1e3:.1f} | {new / floor:.2f} | {same} |"
        )
        turn, ahead = statistics.median(turn_wall), statistics.median(ahead_wall)
        reading.append(
            f"| {n:,} × {d} × {k} | {turn * 1e3:.1f} | {ahead * 1e3:.1f} | {ahead / turn:.2f} "
            f"| {floor * 1e3:.1f} | {ahead / floor:.2f} | {same_read} |"
        )
    print("\nwall clock, the file read in turn against read ahead by the reader thread (compiled pass both):")
    print(
        "| N × D × K (80 % selected) | read in turn ms | read ahead ms | ahead / in turn | floor ms | ahead / floor | same bits |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    print("\n".join(reading))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
