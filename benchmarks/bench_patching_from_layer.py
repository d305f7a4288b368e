"""The transformer's activation-patching cells started at the patched block against full forwards.

    OMP_NUM_THREADS=1 python benchmarks/bench_patching_from_layer.py --layers 4 --d-model 768 --heads 12

One batch of ``--pairs`` clean/corrupted pairs at ``--length`` through a GPT-NeoX of the given shape
(random weights, from config, as ``bench_scale.py`` builds it), every block input × every position:
``science.patching._cells_hooks`` as the grid runs it (each patched forward from the patched block,
the layer before recorded once per layer) and with ``reference=True`` (the whole forward per group
of positions), interleaved ``--repeats`` times in one process. Prints both medians, their ratio,
the FLOP ratio the saved blocks predict, and whether every logit difference is equal bit for bit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.bench_scale, run as a script

from benchmarks.bench_scale import build
from science.context import SilentContext
from science.patching import _cells_hooks
from science.tasks import get_task


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    task = get_task("dyck")
    model = build("gpt_neox", args.layers, args.d_model, args.heads, task)
    clean, corr, _ = task.corruption_pairs(args.length, args.pairs, seed=1)
    labels = (clean.labels[:, -1], corr.labels[:, -1])
    cells = [("input", j, t) for j in range(args.layers + 1) for t in range(args.length)]
    times: dict[bool, list[float]] = {False: [], True: []}
    out: dict[bool, tuple] = {}
    with torch.no_grad():
        for _ in range(args.repeats):
            for reference in (True, False):
                t = time.perf_counter()
                out[reference] = _cells_hooks(
                    model, clean.tokens, corr.tokens, labels, cells, SilentContext(), reference=reference
                )
                times[reference].append(time.perf_counter() - t)
    same = all(np.array_equal(out[True][2][c], out[False][2][c]) for c in cells)
    full, fast = statistics.median(times[True]), statistics.median(times[False])
    n = args.layers
    # per group of positions the full forward runs n blocks for every block input j = 0..n; from
    # the patched block it runs n − j (the embedding, head and traces aside)
    predicted = sum(n - j for j in range(n + 1)) / (n * (n + 1))
    print(
        f"GPT-NeoX {n} × {args.d_model}, {args.pairs} pairs × L {args.length}, {len(cells)} cells: "
        f"full forwards {full:.2f} s, from the patched block {fast:.2f} s, ratio {fast / full:.2f} "
        f"(blocks run: {predicted:.2f} of the full forwards'); equal bit for bit: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
