"""One measurement's rows with the forwards' linear layers multiplied by torch's BLAS and by oneDNN
(``models_store.cpu_matmul``, measurement version 4), side by side: the largest difference per field
and every row whose verdict (an edit's significance) differs.

    python checks/cpu_matmul_rows.py                  # GPT-NeoX 2 × 512, random weights, dyck
    python checks/cpu_matmul_rows.py --layers 4 --d-model 768 --heads 12 --sequences 64

The model comes from config through the product's path (``benchmarks/bench_scale.build``); probes at
L 40 and the interventions (every in-memory method, INLP capped at 3 rounds) are measured twice in
this process, ``LAYERSCOPE_CPU_MATMUL=blas`` then ``onednn``. Exits 1 when a verdict differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scale import build
from models_store.cpu_matmul import route
from science.measure import measure_interventions, measure_probes
from science.tasks import get_task

FIELDS = {"p": ("accuracy", "control_accuracy"), "i": ("base_acc", "edited_acc", "delta_pp", "refit_acc", "p_value")}


def rows(model: Any, task: Any, n: int) -> dict[str, list[dict[str, Any]]]:
    probes = measure_probes(model, task, run_seed=0, eval_lengths=[40], n_sequences=n, config_hash="check")
    edits = measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[40],
        n_sequences=n,
        methods=["project_out", "mean", "leace", "inlp", "pca_top_k"],
        pca_k=2,
        inlp_max_rounds=3,
        fit_length=40,
        n_permutations=50,
    )
    return {"p": [dataclasses.asdict(r) for r in probes], "i": [dataclasses.asdict(r) for r in edits]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--sequences", type=int, default=48)
    args = ap.parse_args(argv)
    if not torch.backends.mkldnn.is_available():
        print("cpu_matmul_rows: this torch has no oneDNN", file=sys.stderr)
        return 2
    task = get_task("dyck")
    model = build("gpt_neox", args.layers, args.d_model, args.heads, task)
    with route("blas"):
        blas = rows(model, task, args.sequences)
    with route("onednn"):
        dnn = rows(model, task, args.sequences)
    print(f"GPT-NeoX {args.layers} × {args.d_model}, random weights, dyck, {args.sequences} sequences at L 40\n")
    print("| table | field | largest |blas − onednn| |")
    print("|---|---|---:|")
    for kind, fields in FIELDS.items():
        for field in fields:
            diffs = [
                abs(a[field] - b[field]) for a, b in zip(blas[kind], dnn[kind], strict=True) if a[field] is not None
            ]
            print(f"| {'probes' if kind == 'p' else 'interventions'} | {field} | {max(diffs, default=0.0):.3g} |")
    flipped = [
        (a["method"], a["layer"])
        for a, b in zip(blas["i"], dnn["i"], strict=True)
        if a["significant"] != b["significant"]
    ]
    print(f"\nedits whose significance differs: {flipped or 'none'}")
    return 1 if flipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
