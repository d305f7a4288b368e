"""One evaluation of the probe's objective on rows on disk, a training split of them selected by a
mask (``science.spill.SelectedRows``, what INLP's and every streamed probe's rounds read): the rows
gathered by ``index_select`` (the product) against a bool mask (the code before), the same bits,
and both against the evaluation's floor (``benchmarks/floors.py``). CPU seconds, rates measured in
this run.

    OMP_NUM_THREADS=1 python benchmarks/bench_streamed_objective.py --shapes 65560x1024x3 65560x768x2

Each shape is ``N x D x K`` (rows on disk, features, classes); 80 % of the rows are selected, as
INLP's 80/20 split selects them; medians of ``--repeats`` evaluations.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.floors, run as a script

from benchmarks.floors import machine_rates
from science.probes.design import standardise_rows
from science.probes.solver import _chunked_objective
from science.spill import SelectedRows, SpilledRows


class _MaskedRows(SelectedRows):
    """The code before: each chunk's selected rows gathered by a bool mask."""

    def chunks(self) -> Iterator[torch.Tensor]:
        start = 0
        for chunk in self.rows.chunks():
            m = int(chunk.shape[0])
            yield chunk[self.mask[start : start + m]]
            start += m


def _evaluations(source, y: torch.Tensor, k: int, th: torch.Tensor, repeats: int) -> tuple[float, tuple]:
    d = standardise_rows(source)
    evaluate = _chunked_objective(d, y, k, torch.eye(source.width, dtype=torch.float64), 1e-4)
    out = evaluate(th)  # warm
    times = []
    for _ in range(repeats):
        t = time.process_time()
        evaluate(th)
        times.append(time.process_time() - t)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["65560x1024x3", "65560x768x2"])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    rates = machine_rates()
    print(f"rates: {rates.gflops:.1f} GFLOP/s fp32 matmul, {rates.gbps:.1f} GB/s read (one thread, CPU seconds)")
    print(
        "| N × D × K (80 % selected) | bool mask ms | index_select ms | new / old | floor ms | new / floor | same bits |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for shape in args.shapes:
        n, d, k = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        mask = torch.rand(n, generator=g) < 0.8
        y = torch.randint(0, k, (n,), generator=g)[mask]
        th = torch.randn(k * d + k, dtype=torch.float64, generator=g) * 1e-2
        with SpilledRows(d) as rows:
            for i in range(0, n, 4096):
                rows.append(torch.randn(min(4096, n - i), d, generator=g))
            old, out_old = _evaluations(_MaskedRows(rows, mask), y, k, th, args.repeats)
            new, out_new = _evaluations(rows.selected(mask), y, k, th, args.repeats)
        same = all(torch.equal(a, b) for a, b in zip(out_old, out_new, strict=True))
        floor = rates.evaluation(int(mask.sum()), d, k)
        print(
            f"| {n:,} × {d} × {k} | {old * 1e3:.1f} | {new * 1e3:.1f} | {new / old:.2f} "
            f"| {floor * 1e3:.1f} | {new / floor:.2f} | {same} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
