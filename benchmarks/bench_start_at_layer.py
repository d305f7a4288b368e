"""Edited forward passes that start at the edited layer (``models_store.capture.start_at_layer``)
against full forward passes: one run's interventions at one eval length, both ways, same process.

    OMP_NUM_THREADS=1 python benchmarks/bench_start_at_layer.py --family mamba --family lstm

For each ``--family``: a paper-sized 4-block model at initialisation (the paper preset's
parameter target; timing does not depend on training), ``measure_interventions`` at ``--length``
with the paper preset's measurement settings (every method, 500 sequences, the fit-size rule, 5
rank-matched random draws, refits, 2,000-permutation tests), run ``--repeats`` times each way,
alternating: "full" keeps no module outputs (every edited forward pass runs every block, the code
before this change), "start" is the default. Printed per family: the median seconds of the whole
call and of its edited forward passes alone (``_Interventions.edit_rows``: the fits are the same
both ways), start / full, and whether every row is identical (it must be: the same modules on the
same inputs). Ratios, not seconds, carry across machines and loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

import science.measure as measure
from models_store import build_model
from science.tasks import get_task
from worker.job_params import SuiteParams
from worker.presets import expand_suite


def _paper_job(family: str, task: str):
    return next(
        j
        for j in expand_suite(SuiteParams(preset="paper", name="bench", families=[family], tasks=[task], seeds=[0]))
        if not getattr(j, "control", None)
    )


def _once(model, task, job, length: int, keep: bool) -> tuple[float, float, list[dict]]:
    """(seconds of the call, seconds in edit_rows, rows) of one measure_interventions call."""
    spent = [0.0]
    real_rows, real_capture = measure._Interventions.edit_rows, measure.capture

    def edit_rows(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return real_rows(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    measure._Interventions.edit_rows = edit_rows  # type: ignore[method-assign]  # timed, put back below
    measure.capture = lambda *a, **k: real_capture(*a, **{**k, "keep_outputs": keep and k.get("keep_outputs", False)})
    try:
        t = time.perf_counter()
        rows = measure.measure_interventions(
            model,
            task,
            run_seed=0,
            eval_lengths=[length],
            n_sequences=job.measure.n_probe_sequences,
            methods=job.measure.methods,
            pca_k=job.measure.pca_k,
            fit_length=job.train_length,
            n_permutations=job.measure.n_permutations,
            conv1d=False,
        )
        total = time.perf_counter() - t
    finally:
        measure._Interventions.edit_rows, measure.capture = real_rows, real_capture  # type: ignore[method-assign]  # back
    return total, spent[0], [dataclasses.asdict(r) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", action="append", default=None, help="repeat (default: mamba, lstm, transformer)")
    ap.add_argument("--task", default="parity")
    ap.add_argument("--length", type=int, default=40, help="the eval length measured (default 40)")
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    task = get_task(a.task)
    print(
        "| family | task | L | full: call s | start: call s | ratio | full: edited forwards s | start: s | ratio | rows |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for family in a.family or ["mamba", "lstm", "transformer"]:
        job = _paper_job(family, a.task)
        model = build_model(job.scratch_config(task), seed=0).eval()
        times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        rows: dict[bool, list[dict]] = {}
        for _ in range(a.repeats):
            for keep in (False, True):
                total, edits, rows[keep] = _once(model, task, job, a.length, keep)
                times[keep].append((total, edits))
        med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in times.items()}
        same = "identical" if rows[True] == rows[False] else "DIFFER"
        print(
            f"| {family} | {a.task} | {a.length} | {med[False][0]:.1f} | {med[True][0]:.1f} | "
            f"{med[True][0] / med[False][0]:.2f} | {med[False][1]:.1f} | {med[True][1]:.1f} | "
            f"{med[True][1] / med[False][1]:.2f} | {same} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
