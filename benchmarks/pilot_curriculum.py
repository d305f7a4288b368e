"""The curriculum pilot (docs/SCIENCE.md#budgets, "The curriculum, decided by a pilot"): one seed per
family on S3, a few thousand steps, under three length-curriculum settings, before the study's S3
runs are made again under revision 3 of the plateau rule.

Settings (each otherwise the ``paper`` preset's run of that cell: its budget, cosine horizon, lr,
positions and plateau rule; the pilot stops at ``--steps`` with ``stop_at_step``, so its curve is
exactly the first steps of the run that setting would make):
- ``today``: the curriculum as the preset has it (start 8, +4 at 95% held-out accuracy);
- ``none``: no curriculum (the training length from the first step);
- ``slower``: start 8, +2 at 95% (half the length added per stage).

    python benchmarks/pilot_curriculum.py --steps 3000 --jobs 3 --out pilot_curriculum.json
    python benchmarks/pilot_curriculum.py --steps 40 --family mamba --setting none  # a smoke check

Writes ``--out`` (JSON): per family × setting, the settings used, the step it stopped at, why, the
held-out token accuracy at the training length at the end, the curriculum length reached and the
learning curve (every step: step, loss, lr, length; held-out accuracy at each evaluation); the stop
reason reads ``rebuild_step`` where ``--steps`` ended it (its ``stop_at_step``). Seconds
are wall time on the machine that ran it (a loaded machine makes them longer; compare settings run
side by side). Runs in parallel processes (``--jobs``, one torch thread each).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.job_params import SuiteParams, TrainParams  # noqa: E402
from worker.presets import expand_suite  # noqa: E402

FAMILIES = ("transformer", "mamba", "mamba2")
SETTINGS: dict[str, dict[str, Any]] = {
    "today": {},
    "none": {"curriculum_start": None},
    "slower": {"curriculum_step": 2},
}


def pilot_params(family: str, setting: str, task: str, seed: int) -> TrainParams:
    """The ``paper`` preset's run of (family, task, seed) with ``setting``'s curriculum, no measurements."""
    (params,) = [
        p
        for p in expand_suite(SuiteParams(preset="paper", families=[family], tasks=[task], seeds=[seed]))
        if p.control is None and p.family == family
    ]
    return params.twin(measure=None, **SETTINGS[setting])


def run_one(params_json: dict[str, Any], steps: int, device: str) -> dict[str, Any]:
    """Train one pilot run in this (worker) process up to ``steps``; its row."""
    import torch

    torch.set_num_threads(1)
    from models_store import build_model
    from science.tasks import get_task
    from science.training import train_model

    p = TrainParams(**params_json)
    task = get_task(p.task, **p.task_params)
    torch.manual_seed(p.seed)
    model = build_model(p.scratch_config(task))
    start = time.perf_counter()
    r = train_model(model, task, p.train_config(), seed=p.seed, device=device, stop_at_step=steps)
    return {
        "steps": r.steps,
        "stop_reason": r.stop_reason,
        "seconds": time.perf_counter() - start,
        "heldout_acc_at_train_length": r.final_heldout_acc,
        "length_reached": r.stop_length,
        "curve": r.loss_curve,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000, help="steps per pilot run (default 3,000)")
    ap.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default all three")
    ap.add_argument("--setting", action="append", choices=tuple(SETTINGS), help="repeatable; default all three")
    ap.add_argument("--task", default="s3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("pilot_curriculum.json"))
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps: at least 1")
    cells = [(f, s) for f in args.family or FAMILIES for s in args.setting or SETTINGS]
    params = {c: pilot_params(c[0], c[1], args.task, args.seed) for c in cells}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {c: pool.submit(run_one, params[c].model_dump(), args.steps, args.device) for c in cells}
        rows = []
        for (family, setting), fut in futures.items():
            row = fut.result()
            p = params[(family, setting)]
            rows.append(
                {
                    "family": family,
                    "setting": setting,
                    "task": args.task,
                    "seed": args.seed,
                    "curriculum": [p.curriculum_start, p.curriculum_step, p.curriculum_threshold],
                    "max_steps": p.max_steps,
                    **row,
                }
            )
            print(
                f"{family:12s} {setting:7s} step {row['steps']:>6,} ({row['stop_reason']}), "
                f"length {row['length_reached']}, held-out acc at L {p.train_length} "
                f"{row['heldout_acc_at_train_length']:.3f}, {row['seconds']:.0f} s"
            )
    args.out.write_text(
        json.dumps({"steps": args.steps, "device": args.device, "machine": platform.machine(), "runs": rows})
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
