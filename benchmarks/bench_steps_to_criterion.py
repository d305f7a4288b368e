"""Steps (and seconds) to the training criterion, per family × task × seed, for a training recipe.

Trains only (no measurements) and reports, per cell, the step at which held-out token accuracy
at the training length first reached the criterion (99% by default) — or "not reached" with
the best accuracy seen at the full length within the step cap.

    # before: today's recipe (constant lr 1e-3, no warm-up, no clipping, no curriculum, no START token)
    python benchmarks/bench_steps_to_criterion.py --recipe today --max-steps 3000 --jobs 8 --device cuda
    # after: the recipe of TrainParams' defaults (docs/SCIENCE.md#training-recipe), 3 seeds
    python benchmarks/bench_steps_to_criterion.py --recipe new --seeds 0 1 2 --max-steps 10000 --jobs 8 --device cuda

Cells run in parallel processes (``--jobs N``, one torch thread each; on CUDA they share the
GPU). Writes ``<out>.json`` (every cell, with its loss curve's evaluated points) and
``<out>.md`` (the table). Seconds are wall time of the training loop, evaluations included.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from layerscope_core.registry import STUDY_TASKS  # noqa: E402
from worker.job_params import FAMILIES, LEGACY_RECIPE, TrainParams  # noqa: E402

RECIPES = ("today", "new")


def cell_params(family: str, task: str, seed: int, recipe: str, args: argparse.Namespace) -> TrainParams:
    """The run of one cell: TrainParams' defaults (``new``) or the legacy recipe (``today``)."""
    extra: dict[str, Any] = dict(LEGACY_RECIPE) if recipe == "today" else {}
    if args.lr is not None:
        extra["lr"] = args.lr
    return TrainParams(
        family=family,
        task=task,
        seed=seed,
        measure=None,
        max_steps=args.max_steps,
        max_seconds=args.max_seconds,
        early_stop_acc=args.criterion,
        eval_every=args.eval_every,
        n_eval_sequences=args.n_eval,
        train_length=args.train_length,
        param_target=args.param_target,
        n_layers=args.n_layers,
        d_model=getattr(args, "d_model", None),
        **extra,
    )


def run_cell(params_json: dict[str, Any], device: str) -> dict[str, Any]:
    """Train one cell in this (worker) process; returns its row."""
    import torch

    torch.set_num_threads(1)
    from models_store import build_model
    from science.tasks import get_task
    from science.training import train_model

    p = TrainParams(**params_json)
    task = get_task(p.task, **p.task_params)
    torch.manual_seed(p.seed)
    model = build_model(p.scratch_config(task))
    r = train_model(model, task, p.train_config(), seed=p.seed, device=device)
    full = [
        pt
        for pt in r.loss_curve
        if pt["heldout_token_acc"] is not None and pt.get("length", p.train_length) == p.train_length
    ]
    accs = [pt["heldout_token_acc"] for pt in full] + ([r.final_heldout_acc] if r.final_heldout_acc is not None else [])
    return {
        "family": p.family,
        "task": p.task,
        "seed": p.seed,
        "n_params": model.n_params,
        "reached": r.stopped_early,
        "steps": r.steps,
        "seconds": round(r.seconds, 2),
        "steps_to_criterion": r.steps if r.stopped_early else None,
        "seconds_to_criterion": round(r.seconds, 2) if r.stopped_early else None,
        "best_acc": max(accs) if accs else None,
        "final_acc": r.final_heldout_acc,
        "curve": [
            {k: pt.get(k) for k in ("step", "length", "heldout_token_acc")}
            for pt in r.loss_curve
            if pt["heldout_token_acc"] is not None
        ],
        "config": p.run_config(),
    }


def _cell_text(rows: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(steps, seconds, best acc) of a cell over its seeds: medians of those that reached it."""
    reached = [r for r in rows if r["reached"]]
    best = max((r["best_acc"] for r in rows if r["best_acc"] is not None), default=None)
    best_s = f"{best:.3f}" if best is not None else "–"
    if not reached:
        return f"not reached (cap {max(r['steps'] for r in rows)})", "–", best_s
    steps = statistics.median(r["steps_to_criterion"] for r in reached)
    secs = statistics.median(r["seconds_to_criterion"] for r in reached)
    tag = "" if len(reached) == len(rows) else f" ({len(reached)}/{len(rows)} seeds)"
    return f"{steps:.0f}{tag}", f"{secs:.0f}", best_s


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"Steps to {meta['criterion']:.0%} held-out token accuracy at L = {meta['train_length']} "
        f"({meta['recipe']} recipe, seeds {meta['seeds']}, cap {meta['max_steps']} steps"
        + (f" / {meta['max_seconds']:.0f} s" if meta.get("max_seconds") else "")
        + f", {meta['device']}, {meta['jobs']} parallel job(s); median over the seeds that reached it)",
        "",
        "| task | family | steps | seconds | best acc |",
        "| --- | --- | --- | --- | --- |",
    ]
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["task"], r["family"]), []).append(r)
    for task, family in sorted(cells, key=lambda k: (STUDY_TASKS.index(k[0]), FAMILIES.index(k[1]))):
        steps, secs, best = _cell_text(cells[(task, family)])
        lines.append(f"| {task} | {family} | {steps} | {secs} | {best} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", choices=RECIPES, default="new")
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    ap.add_argument("--tasks", nargs="+", choices=STUDY_TASKS, default=list(STUDY_TASKS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--max-steps", type=int, default=3000, help="step cap per cell")
    ap.add_argument("--max-seconds", type=float, default=None, help="wall-time cap per cell (s)")
    ap.add_argument("--criterion", type=float, default=0.99, help="held-out token accuracy (0..1)")
    ap.add_argument("--train-length", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--n-eval", type=int, default=500, help="held-out sequences")
    ap.add_argument("--param-target", type=int, default=830_000)
    ap.add_argument("--n-layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=None, help="width (default: solved from --param-target)")
    ap.add_argument("--lr", type=float, default=None, help="peak lr for every family (default: the recipe's)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    ap.add_argument("--jobs", type=int, default=1, help="cells trained at once (processes, 1 torch thread each)")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "steps_to_criterion",
        help="output path without suffix (.json and .md are written)",
    )
    args = ap.parse_args(argv)

    cells = [cell_params(f, t, s, args.recipe, args) for t in args.tasks for f in args.families for s in args.seeds]
    meta = {
        "recipe": args.recipe,
        "seeds": args.seeds,
        "max_steps": args.max_steps,
        "max_seconds": args.max_seconds,
        "criterion": args.criterion,
        "train_length": args.train_length,
        "device": args.device,
        "jobs": args.jobs,
        "host": platform.node(),
        "python": platform.python_version(),
    }
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    ctx = mp.get_context("spawn")  # CUDA cannot be shared by forked processes
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx) as pool:
        futures = {pool.submit(run_cell, c.model_dump(mode="json"), args.device): c for c in cells}
        for fut in as_completed(futures):
            c = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # noqa: BLE001 - one failed cell is reported, the rest go on
                row = {
                    "family": c.family,
                    "task": c.task,
                    "seed": c.seed,
                    "reached": False,
                    "steps": 0,
                    "seconds": 0.0,
                    "best_acc": None,
                    "final_acc": None,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            rows.append(row)
            print(
                f"{row['task']:>10} {row['family']:>11} s{row['seed']}: "
                + (
                    f"{row['steps']} steps, {row['seconds']:.0f} s"
                    if row["reached"]
                    else f"not reached in {row['steps']} steps (best {row.get('best_acc')}) {row.get('error', '')}"
                ),
                flush=True,
            )
    meta["wall_seconds"] = round(time.perf_counter() - start, 1)
    rows.sort(key=lambda r: (r["task"], r["family"], r["seed"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "cells": rows}, indent=1))
    table = markdown(rows, meta)
    args.out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
