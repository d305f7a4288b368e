"""Where the interventions of one run spend their time: one layer at one eval length, the paper
preset's measurement settings, profiled with cProfile and summed per part of the work.

    LAYERSCOPE_HOME=... python benchmarks/measure_profile.py RUN_ID --layer 1 --length 40

Parts (cumulative seconds of these functions, which do not nest in one another):
fitting the edits (``science.interventions.fit_edit``: INLP's rounds, LEACE, PCA, …), the
rank-matched random removals (``science.measure.random_removal_effect``), the probes refit on
edited states (``science.probes.probe_layers``) and capturing the fit data
(``science.captured.capture``). The rest is the edited models' forward passes and bookkeeping.
Each part is printed as its share of the whole call measured in the same run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PARTS = {
    "fit the edits (fit_edit)": ("interventions.py", "fit_edit"),
    "random removal draws (random_removal_effect)": ("measure.py", "random_removal_effect"),
    "refit probes (probe_layers)": ("layerwise.py", "probe_layers"),
    "capture fit/eval states (capture)": ("captured.py", "capture"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_id", type=int)
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--length", type=int, default=40)
    args = ap.parse_args()

    from science.measure import measure_interventions
    from worker.job_params import MeasureParams
    from worker.pipeline import load_run, local_env

    env = local_env(device="cpu")
    params, task, model = load_run(args.run_id, env)
    mp = MeasureParams()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    rows = measure_interventions(
        model,
        task,
        run_seed=params.seed,
        eval_lengths=[args.length],
        n_sequences=mp.n_probe_sequences,
        methods=mp.methods,
        layers=[args.layer],
        pca_k=mp.pca_k,
        inlp_max_rounds=mp.inlp_max_rounds,
        conv1d=False,
        fit_length=params.train_length,
        n_permutations=mp.n_permutations,
    )
    prof.disable()
    total = time.perf_counter() - t0
    # {(file, line, func): (cc, nc, tt, ct, callers)}
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # pstats' table, not in its stub
    print(f"run {args.run_id} ({params.family} x {params.task}), layer {args.layer}, L={args.length}: ")
    print(f"{len(rows)} rows ({', '.join(mp.methods)}) in {total:.1f} s")
    print("| part | seconds | share of the call |\n|---|---:|---:|")
    accounted = 0.0
    for label, (file, func) in PARTS.items():
        secs = sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(file) and fn == func)
        accounted += secs
        print(f"| {label} | {secs:.1f} | {secs / total:.2f} |")
    print(
        f"| the rest (edited forward passes, permutation tests, bookkeeping) | {total - accounted:.1f} | "
        f"{(total - accounted) / total:.2f} |"
    )


if __name__ == "__main__":
    main()
