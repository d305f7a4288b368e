"""Intervention + patching benchmark: seconds per method on one 4-layer run.

For each ``--family`` it builds one study-sized 4-layer model (~830K parameters) on ``--task``,
trains it for ``--train-steps`` steps (0 = random init) with the pipeline's training loop,
then times, with the pipeline's own functions (``science.measure.measure_interventions``,
``science.patching.patching_grid``) and the ``quick`` preset's measurement sizes by default:

- every intervention method alone (fit at L=40 on every layer + apply at every eval length +
  probe refit on the edited states + permutation test) — one ``measure_interventions`` call
  per method, as ``layerscope intervene RUN --method M`` runs it; each such call also pays the
  shared state capture, shown on its own row ("capture only": the same call with no method);
- Conv1D removal (Mamba families): every layer at once + each layer alone;
- all of the above in ONE call, as the pipeline runs it (``total interventions``);
- the patching grid (every layer × the middle position) at each eval length;
- the baseline: one plain forward pass over the same evaluation data (``n-seq`` sequences at
  every eval length), so each row also reads as a multiple of a forward pass.

Wall-clock; on a shared machine compare ratios within one run, not seconds across runs.
``--md PATH`` appends the tables, the command and a machine note (with ``os.getloadavg()``).

    python -m benchmarks.bench_interventions --family lstm --family mamba --md benchmarks/INTERVENTIONS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from typing import Any

import torch

from layerscope_core.registry import EVAL_LENGTHS, METHODS, family_names, get_family
from models_store import ModelConfig, build_model
from science.measure import measure_interventions, predictions
from science.patching import patching_grid
from science.seeds import data_seed
from science.tasks import get_task
from science.training import TrainConfig, train_model


def timed(fn, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def bench_family(family: str, a: argparse.Namespace) -> dict[str, Any]:
    task = get_task(a.task)
    torch.manual_seed(a.seed)
    model = build_model(
        ModelConfig(
            family=family, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=4, param_target=a.param_target
        )
    )
    train_s, acc = 0.0, None
    if a.train_steps:
        res = train_model(
            model,
            task,
            TrainConfig(max_steps=a.train_steps, eval_every=a.train_steps, n_eval_sequences=256, early_stop_acc=1.01),
            seed=a.seed,
        )
        train_s, acc = res.seconds, res.final_heldout_acc
    model.eval()
    lengths = a.lengths
    common = dict(run_seed=a.seed, eval_lengths=lengths, n_sequences=a.n_seq, pca_k=a.pca_k, n_permutations=a.n_perm)

    # baseline: a plain forward pass over the evaluation data of every length
    datas = [task.generate(L, a.n_seq, data_seed(a.seed, "intervene_eval", L), split="test") for L in lengths]
    predictions(model, datas[0].tokens[:8])  # warm-up
    fwd = min(timed(lambda: [predictions(model, d.tokens) for d in datas])[0] for _ in range(a.repeats))

    rows: list[tuple[str, float]] = []
    cap, _ = timed(measure_interventions, model, task, methods=[], conv1d=False, **common)
    rows.append(("capture only (fit + base states, shared)", cap))
    for m in a.methods:
        s, out = timed(measure_interventions, model, task, methods=[m], conv1d=False, **common)
        assert all(r["refit_acc"] is not None for r in out)
        rows.append((m, s))
    has_conv = get_family(family).has_conv1d
    if has_conv:
        s, out = timed(measure_interventions, model, task, methods=[], conv1d=True, **common)
        assert {r["method"] for r in out} == {"conv1d_removal"}
        rows.append(("conv1d_removal (all + each layer)", s))
    total_int, out = timed(measure_interventions, model, task, methods=a.methods, conv1d=has_conv, **common)
    n_int_rows = len(out)
    patch_rows: list[tuple[int, float]] = []
    for L in lengths:
        s, _ = timed(patching_grid, model, task, run_seed=a.seed, eval_length=L, n_pairs=a.n_pairs)
        patch_rows.append((L, s))
    return {
        "family": family,
        "d_model": model.d_model,
        "n_params": model.n_params,
        "train_steps": a.train_steps,
        "train_s": train_s,
        "heldout_acc": acc,
        "forward_s": fwd,
        "rows": rows,
        "total_int": total_int,
        "n_int_rows": n_int_rows,
        "patch": patch_rows,
    }


def _x(s: float, f: float) -> str:
    r = s / f
    return f"{r:.1f}" if r < 10 else f"{r:.0f}"


def render(results: list[dict[str, Any]], a: argparse.Namespace, cmd: str) -> str:
    load = os.getloadavg()
    ncpu = os.cpu_count()
    shared = " — shared with other jobs" if load[0] > 0.5 * (ncpu or 1) else ""
    out = [
        f"```\n{cmd}\n```\n",
        f"Machine: {platform.machine()}, {ncpu} vCPU{shared}; load average (1/5/15 min) at the end: "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, Python {platform.python_version()}.\n",
        f"Task `{a.task}`, eval lengths {a.lengths} (fit at L=40), {a.n_seq} sequences per length, "
        f"pca_k {a.pca_k}, {a.n_perm} permutations, patching {a.n_pairs} pairs × (emb + 4 layers) at the "
        f"middle position.\n",
    ]
    for r in results:
        state = (
            f"trained {r['train_steps']} steps ({r['train_s']:.1f} s, held-out token acc {r['heldout_acc']:.3f})"
            if r["train_steps"]
            else "random init"
        )
        f = r["forward_s"]
        out.append(f"\n### {r['family']} (d={r['d_model']}, {r['n_params']:,} params, 4 layers), {state}\n")
        out.append(
            f"Baseline: one plain forward pass over the same eval data (all {len(a.lengths)} lengths): **{f:.3f} s**.\n"
        )
        out.append("| what | seconds | × forward |\n|---|---:|---:|")
        for name, s in r["rows"]:
            out.append(f"| {name} | {s:.2f} | {_x(s, f)} |")
        out.append(
            f"| **total interventions, one call** ({r['n_int_rows']} result rows) | **{r['total_int']:.2f}** | "
            f"{_x(r['total_int'], f)} |"
        )
        for L, s in r["patch"]:
            out.append(f"| patching grid, L={L} | {s:.2f} | {_x(s, f)} |")
        ptot = sum(s for _, s in r["patch"])
        out.append(f"| **patching, all {len(r['patch'])} lengths** | **{ptot:.2f}** | {_x(ptot, f)} |")
        out.append(
            f"| **total (interventions + patching)** | **{r['total_int'] + ptot:.2f}** | "
            f"{_x(r['total_int'] + ptot, f)} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", action="append", choices=list(family_names()))
    p.add_argument("--task", default="parity")
    p.add_argument("--train-steps", type=int, default=100, help="0 = random init")
    p.add_argument("--param-target", type=int, default=830_000)
    p.add_argument("--lengths", type=int, nargs="+", default=list(EVAL_LENGTHS))
    p.add_argument("--n-seq", type=int, default=160, help="sequences per eval length (quick preset: 160)")
    p.add_argument("--n-perm", type=int, default=1000)
    p.add_argument("--n-pairs", type=int, default=64)
    p.add_argument("--pca-k", type=int, default=8)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--repeats", type=int, default=3, help="forward-pass baseline: best of N")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--md", default=None, help="append the result to this Markdown file")
    a = p.parse_args(argv)
    a.family = a.family or ["lstm", "mamba"]
    if a.threads:
        torch.set_num_threads(a.threads)
    cmd = "python -m benchmarks.bench_interventions " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    results = []
    for fam in a.family:
        print(f"[{fam}] ...", file=sys.stderr, flush=True)
        results.append(bench_family(fam, a))
    text = render(results, a, cmd)
    print(text)
    if a.md:
        with open(a.md, "a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
