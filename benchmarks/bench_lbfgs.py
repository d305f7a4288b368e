"""The probe's flat L-BFGS against ``torch.optim.LBFGS``, its compiled loop against the Python one, or its one-pass objective against the torch one, interleaved in one process.

    OMP_NUM_THREADS=1 python benchmarks/bench_lbfgs.py --tasks parity s3 --repeats 3
    OMP_NUM_THREADS=1 python benchmarks/bench_lbfgs.py --compare loop --tasks parity s3 --repeats 5
    OMP_NUM_THREADS=1 python benchmarks/bench_lbfgs.py --compare objective --tasks parity s3 --repeats 5

``--compare loop`` times the whole fit in C++ (``KernelObjective.minimise``, the default where the
kernel applies) against the flat L-BFGS in Python around the same evaluation
(``minimise(python_loop=True)``); they give the same numbers bit for bit.

``--compare objective`` times the compiled one-pass objective (``science.probes.onepass``,
measurement version 3) against version 2's torch objective (``LAYERSCOPE_PROBE_KERNEL=torch``),
both on the flat L-BFGS; they agree at float rounding, not bit for bit, so it prints the ranks
and the largest weight difference instead.

On the synthetic states of ``benchmarks/bench_inlp.py`` (``[20000, 160]``, 2 or 6 classes) it
times one probe (``fit_probe`` on 80 % of the rows) and one INLP fit (``fit_edit('inlp')``)
with the solver's flat L-BFGS (``science.probes.lbfgs``, the default) and with
``torch.optim.LBFGS`` itself (``minimise(reference=True)``), alternating the two ``--repeats``
times in this process — on a loaded machine both see the same load — and prints CPU seconds
(medians), the L-BFGS evaluations, each fit against its floor (``benchmarks/floors.py``, rates
measured in this process) and whether the two give the same weights and rank bit for bit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_inlp import _synthetic
from benchmarks.floors import counting_fits, design_floor, inlp_floor, machine_rates
from science.interventions import fit_edit
from science.probes import (
    fit_probe,
    linear,
    solver,
)

# name → minimise's keyword arguments
SOLVERS: dict[str, dict[str, bool]] = {"torch.optim.LBFGS": {"reference": True}, "flat lbfgs": {"python_loop": True}}
LOOPS: dict[str, dict[str, bool]] = {"flat L-BFGS in Python": {"python_loop": True}, "compiled L-BFGS (C++)": {}}
OBJECTIVES = {"torch objective (version 2)": "torch", "one-pass kernel (version 3)": ""}  # → LAYERSCOPE_PROBE_KERNEL


def _use(reference: bool = False, python_loop: bool = False) -> None:
    linear.minimise = partial(solver.minimise, reference=reference, python_loop=python_loop)


def _use_objective(value: str) -> None:
    os.environ["LAYERSCOPE_PROBE_KERNEL"] = value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["parity", "s3"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", choices=["solver", "loop", "objective"], default="solver")
    args = ap.parse_args(argv)
    choices: dict[str, Callable[[], None]] = (
        {name: partial(_use_objective, value) for name, value in OBJECTIVES.items()}
        if args.compare == "objective"
        else {name: partial(_use, **kw) for name, kw in (SOLVERS if args.compare == "solver" else LOOPS).items()}
    )
    torch.set_num_threads(1)
    for task in args.tasks:
        blob = _synthetic(task, 1)
        X, y, C = blob["X"], blob["y"], blob["n_classes"]
        perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(0))
        n_dev = X.shape[0] // 5
        Xtr, ytr = X[perm[n_dev:]], y[perm[n_dev:]]
        fit_probe(X[:2000], y[:2000], C)  # one-off start-up costs out of the timings
        times: dict[str, dict[str, list[float]]] = {name: {"probe": [], "inlp": []} for name in choices}
        last = {}
        for rep in range(args.repeats):
            for name in list(choices) if rep % 2 == 0 else list(choices)[::-1]:
                choices[name]()
                with counting_fits() as pf:
                    t = time.process_time()
                    p = fit_probe(Xtr, ytr, C)
                    times[name]["probe"].append(time.process_time() - t)
                with counting_fits() as f:
                    t = time.process_time()
                    e = fit_edit("inlp", X, y, C, seed=0)
                    times[name]["inlp"].append(time.process_time() - t)
                last[name] = (pf, f, p, e)
        linear.minimise = solver.minimise
        _use_objective("")
        rates = machine_rates()
        print(f"## {blob['task']}: X {tuple(X.shape)}; rates {rates.gflops:.0f} GFLOP/s, {rates.gbps:.1f} GB/s\n")
        print(f"| {args.compare} | probe CPU s | evaluations | / floor | INLP CPU s | evaluations | / floor | rank |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in choices:
            pf, f, p, e = last[name]
            p_floor = design_floor(Xtr.shape[0], Xtr.shape[1], rates) + pf.eval_floor(rates)
            i_floor = inlp_floor(f, Xtr.shape[0], n_dev, X.shape[1], int(torch.unique(y).numel()), rates)
            tp, ti = statistics.median(times[name]["probe"]), statistics.median(times[name]["inlp"])
            print(
                f"| {name} | {tp:.3f} | {pf.evals} | {tp / p_floor:.2f} | {ti:.2f} | {f.evals} | "
                f"{ti / i_floor:.2f} | {e.rank_removed} |"
            )
        (_, _, p0, e0), (_, _, p1, e1) = last.values()
        if args.compare == "objective":
            print(
                f"\nlargest probe weight difference {float((p0.W - p1.W).abs().max()):.2e}; INLP ranks "
                f"{e0.rank_removed} / {e1.rank_removed}\n"
            )
            continue
        same = torch.equal(p0.W, p1.W) and e0.info == e1.info
        same = same and e0.left is not None and e1.left is not None and torch.equal(e0.left, e1.left)
        print(f"\nsame probe weights, INLP directions and rounds bit for bit: {same}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
