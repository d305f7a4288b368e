"""The edits' fits, old code against new, on the same states: seconds and whether any number moved.

    OMP_NUM_THREADS=1 python benchmarks/bench_inlp.py                       # parity + S3, layer 1
    OMP_NUM_THREADS=1 python benchmarks/bench_inlp.py --layer-call          # + one whole layer
    OMP_NUM_THREADS=1 python benchmarks/bench_inlp.py --source synthetic --tasks parity
    python benchmarks/bench_inlp.py --tasks parity --max-rounds 10 --threads 2   # OpenMP's threads

Inputs (made once, in this process): the default LSTM (d_model 160, ~830K parameters) trained
``--train-steps`` steps on each ``--tasks`` task (parity: 2 classes, s3: 6), its states at
``--layer`` captured on the fit set an intervention job fits on (``n_fit_sequences``: 500
sequences × 40 = 20,000 tokens), and the eval set at L = 40. ``--source synthetic`` uses
Gaussian states with class means instead (no model, so no random removal or layer call).

Timed, each in a fresh process per code version (``--base`` checked out with ``git archive``
into a temporary folder = "old", this checkout = "new"), versions alternating, ``--repeats``
times, one thread: one probe (``fit_probe`` on INLP's 80 % training rows), one INLP fit
(``fit_edit('inlp')``, its default budget), one LEACE fit, one ``random_removal_effect`` (5
draws at INLP's rank), and with ``--layer-call`` one layer's whole intervention measurement at
L = 40 with the paper preset's settings (``measure_interventions``: 5 methods, the fit-size
rule, the random draws, the refits, the permutation tests). Printed: wall and CPU seconds
(medians), new / old, each version's probe and INLP fit against its floor measured in the same
process (``benchmarks/floors.py``: the minimal computation's FLOPs and bytes at this CPU's
measured matmul rate and memory bandwidth, for the L-BFGS evaluations that version made; INLP's
is the incremental algorithm's), and every output compared: ``identical`` (bit for bit) or the largest
absolute difference. Ratios, not seconds, carry across machines and loads. ``--threads``
sets the timed processes' torch threads, and ``OMP_WAIT_POLICY`` passes through to them (see
BENCHMARKS.md for what two spinning OpenMP threads cost on a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TREES = ("old", "new")
PACKAGES = ("science", "layerscope_core", "models_store")  # what the fits import
# the layer call's parts (CPU seconds of these functions, which do not nest in one another)
LAYER_PARTS = {
    "fitting the edits (fit_edit)": ("interventions.py", "fit_edit"),
    "random removal draws (random_removal_effect)": ("measure.py", "random_removal_effect"),
    "probes refit on edited states (probe_layers)": ("layerwise.py", "probe_layers"),
    "capturing fit and eval states (capture)": ("captured.py", "capture"),
}


def _inputs(args: argparse.Namespace, folder: Path) -> list[Path]:
    """One file per task: states, labels, and (model source) the model and eval data."""
    import torch

    from science.interventions import n_fit_sequences
    from science.seeds import data_seed

    torch.set_num_threads(1)
    paths = []
    for name in args.tasks:
        if args.source == "synthetic":
            blob = _synthetic(name, args.layer)
        else:
            from models_store import ModelConfig, build_model
            from science.captured import capture, per_sequence_accuracy
            from science.tasks import get_task
            from science.training import TrainConfig, train_model

            task = get_task(name)
            cfg = ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=4)
            torch.manual_seed(0)
            model = build_model(cfg)
            if args.train_steps:
                steps = args.train_steps
                train_model(
                    model,
                    task,
                    TrainConfig(max_steps=steps, eval_every=steps, n_eval_sequences=256, warmup_steps=min(100, steps)),
                    seed=0,
                )
            model.eval()
            n_fit = n_fit_sequences(model.d_model, 40, 500)
            fit = capture(model, task.generate(40, n_fit, data_seed(0, "intervene_fit", 0), split="test"))
            data = task.generate(40, 500, data_seed(0, "intervene_eval", 40), split="test")
            base = capture(model, data, layers=[args.layer])
            labels = fit.data.labels.reshape(-1)
            states = fit.states[args.layer].reshape(-1, model.d_model)
            blob = {
                "X": states[labels >= 0],
                "y": labels[labels >= 0],
                "n_classes": task.n_classes,
                "task": name,
                "config": cfg.to_dict(),
                "weights": model.state_dict(),
                "data": data,
                "base_acc": per_sequence_accuracy(base.predicted(), data.labels),
            }
        blob["layer"] = args.layer
        path = folder / f"inputs_{name}.pt"
        torch.save(blob, path)
        paths.append(path)
    return paths


def _synthetic(name: str, layer: int) -> dict[str, Any]:
    """``[20000, 160]`` correlated Gaussian states with class means spread over many directions."""
    import torch

    k = {"parity": 2, "s3": 6}.get(name, 2)
    g = torch.Generator().manual_seed(0)
    n, d = 20_000, 160
    mix = torch.randn(d, d, generator=g) * torch.logspace(0, -2, d)
    y = torch.randint(0, k, (n,), generator=g)
    means = torch.randn(k, d, generator=g) * torch.logspace(-0.5, -2, d)
    X = (torch.randn(n, d, generator=g) + means[y]) @ mix.T + 0.3
    return {"X": X.float(), "y": y, "n_classes": k, "task": f"synthetic {k}-class"}


def _timed(fn: Any) -> tuple[dict[str, float], Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}, out


def _edit_out(edit: Any) -> dict[str, Any]:
    return {"left": edit.left, "right": edit.right, "center": edit.center, "rank": edit.rank_removed, **edit.info}


def worker(inputs: Path, out: Path, layer_call: bool, max_rounds: int | None = None) -> None:
    """Time the fits on ``inputs`` with whichever ``science`` this process imports; save to ``out``."""
    import torch

    from science.interventions import fit_edit
    from science.probes import fit_probe

    sys.path.append(str(ROOT))  # benchmarks.floors; science stays the PYTHONPATH tree's
    from benchmarks.floors import counting_fits, design_floor, inlp_floor, machine_rates

    blob = torch.load(inputs, weights_only=False)
    X, y, C = blob["X"], blob["y"], blob["n_classes"]
    fit_probe(X[:2000], y[:2000], C)  # warm-up: the first fit of a process pays one-off start-up costs
    times: dict[str, dict[str, float]] = {}
    outs: dict[str, Any] = {}
    rates = machine_rates()
    perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(0))
    n_dev = max(1, X.shape[0] // 5)
    tr = perm[n_dev:]
    N, D = X[tr].shape
    with counting_fits() as probe_fits:
        times["probe"], p = _timed(lambda: fit_probe(X[tr], y[tr], C))
    outs["probe"] = {"W": p.W, "b": p.b, "n_iter": p.n_iter, "converged": p.converged}
    with counting_fits() as inlp_fits:
        times["inlp"], inlp = _timed(lambda: fit_edit("inlp", X, y, C, seed=0, max_rounds=max_rounds))
    outs["inlp"] = _edit_out(inlp)
    later = machine_rates()  # the better of before and after: load slows the floor as little as it can
    rates.gflops, rates.gbps = max(rates.gflops, later.gflops), max(rates.gbps, later.gbps)
    k = int(torch.unique(y).numel())
    floors = {
        "probe": design_floor(N, D, rates) + probe_fits.eval_floor(rates),
        "inlp": inlp_floor(inlp_fits, N, n_dev, D, k, rates),
        "inlp_evals": inlp_fits.evals,
        "probe_evals": probe_fits.evals,
        "gflops": rates.gflops,
        "gbps": rates.gbps,
    }
    times["leace"], leace = _timed(lambda: fit_edit("leace", X, y, C))
    outs["leace"] = _edit_out(leace)
    parts: dict[str, float] = {}
    if "weights" in blob:
        from models_store import ModelConfig, build_model
        from science.measure import random_removal_effect

        model = build_model(ModelConfig.from_dict(blob["config"]))
        model.load_state_dict(blob["weights"])
        model.eval()
        center = X.mean(0, dtype=torch.float64)
        rank = max(1, inlp.rank_removed)
        times["random"], outs["random"] = _timed(
            lambda: random_removal_effect(model, blob["layer"], center, rank, blob["data"], blob["base_acc"], 0)
        )
        if layer_call:
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            times["layer"], outs["layer"] = _timed(lambda: _layer_call(model, blob))
            prof.disable()
            # {(file, line, func): (cc, nc, tt, cumulative, callers)}
            stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # pstats' table, not in its stub
            for label, (file, func) in LAYER_PARTS.items():
                parts[label] = sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(file) and fn == func)
    torch.save({"times": times, "outs": outs, "parts": parts, "floors": floors}, out)


def _layer_call(model: Any, blob: dict[str, Any]) -> list[dict[str, Any]]:
    """One layer's intervention rows at L = 40 with the paper preset's measurement settings
    (``worker.job_params.MeasureParams``' defaults: 500 sequences, every method, pca k 8, INLP's
    default budget, 2,000 permutations)."""
    from science.interventions import METHODS
    from science.measure import measure_interventions
    from science.tasks import get_task

    rows = measure_interventions(
        model,
        get_task(blob["task"]),
        run_seed=0,
        eval_lengths=[40],
        n_sequences=500,
        methods=list(METHODS),
        layers=[blob["layer"]],
        pca_k=8,
        inlp_max_rounds=None,
        conv1d=False,
        fit_length=40,
        n_permutations=2000,
    )
    return [{k: v for k, v in vars(r).items() if k != "edit"} for r in rows]


def _diff(a: Any, b: Any) -> float:
    """0.0 when ``a`` and ``b`` are the same bit for bit, else the largest absolute difference
    (inf where they differ in shape, type, or a non-numeric value)."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.nan_to_num(), b.nan_to_num())):
            return 0.0
        return float((a.double() - b.double()).abs().nan_to_num(math.inf).max())
    if isinstance(a, dict) and isinstance(b, dict):
        return max((_diff(a[k], b.get(k)) for k in a), default=0.0) if a.keys() == b.keys() else math.inf
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return max((_diff(x, z) for x, z in zip(a, b)), default=0.0) if len(a) == len(b) else math.inf
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return 0.0 if a == b or (math.isnan(a) and math.isnan(b)) else abs(a - b)
    return 0.0 if a == b else math.inf


def _tree(base: str, folder: Path) -> Path:
    """``base``'s packages (``git archive``) in ``folder``/old."""
    old = folder / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, *PACKAGES], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    return old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["parity", "s3"])
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--source", choices=["model", "synthetic"], default="model")
    ap.add_argument("--train-steps", type=int, default=400, help="training steps of each model (0: random init)")
    ap.add_argument("--base", default="7f0ee46", help="the old code: a git revision (default: before the fast path)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--layer-call", action="store_true", help="also time one layer's whole measurement")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the timed processes")
    ap.add_argument("--max-rounds", type=int, default=None, help="INLP's budget in the timed fit (default: its own)")
    ap.add_argument("--worker", nargs=2, metavar=("INPUTS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), args.layer_call, args.max_rounds)
        return 0
    sys.path.insert(0, str(ROOT))
    import torch

    with tempfile.TemporaryDirectory(prefix="bench_inlp_") as tmp:
        folder = Path(tmp)
        trees = {"old": _tree(args.base, folder), "new": ROOT}
        load = os.getloadavg()[0]
        policy = os.environ.get("OMP_WAIT_POLICY", "unset")
        print(f"# edits' fits: {args.base} (old) vs this checkout (new); {args.threads} thread(s), ", end="")
        print(f"OMP_WAIT_POLICY {policy}, load {load:.1f}\n")
        for path in _inputs(args, folder):
            runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TREES}
            for i in range(args.repeats):
                for t in TREES if i % 2 == 0 else TREES[::-1]:
                    out = folder / f"out_{t}_{i}.pt"
                    env = {**os.environ, "PYTHONPATH": str(trees[t]), "OMP_NUM_THREADS": str(args.threads)}
                    cmd = [sys.executable, __file__, "--worker", str(path), str(out)]
                    cmd += ["--layer-call"] if args.layer_call else []
                    cmd += ["--max-rounds", str(args.max_rounds)] if args.max_rounds else []
                    subprocess.run(cmd, env=env, check=True)
                    runs[t].append(torch.load(out, weights_only=False))
            _report(torch.load(path, weights_only=False), runs)
    return 0


def _report(blob: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> None:
    old, new = runs["old"][0]["outs"], runs["new"][0]["outs"]
    inlp = old["inlp"]
    print(
        f"## {blob['task']}: X {tuple(blob['X'].shape)}, {blob['n_classes']} classes; INLP {inlp['n_rounds']} "
        f"rounds, rank {inlp['rank']} (old) / {new['inlp']['n_rounds']}, {new['inlp']['rank']} (new)\n"
    )
    print("| part | old wall s | new wall s | new / old | old CPU s | new CPU s | new / old (CPU) | outputs |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for part in runs["old"][0]["times"]:
        med = {t: {k: statistics.median(r["times"][part][k] for r in runs[t]) for k in ("wall", "cpu")} for t in TREES}
        d = _diff(old[part], new[part])
        same = "identical" if d == 0.0 else f"max abs diff {d:.3g}"
        o, n = med["old"], med["new"]
        print(
            f"| {part} | {o['wall']:.2f} | {n['wall']:.2f} | {n['wall'] / o['wall']:.2f} | {o['cpu']:.2f} | "
            f"{n['cpu']:.2f} | {n['cpu'] / o['cpu']:.2f} | {same} |"
        )
    print(
        "\n| fit | version | CPU s (median) | L-BFGS evaluations | floor s | CPU / floor |\n|---|---|---:|---:|---:|---:|"
    )
    for part in ("probe", "inlp"):
        for t in TREES:
            f = runs[t][0]["floors"]
            cpu = statistics.median(r["times"][part]["cpu"] for r in runs[t])
            print(f"| {part} | {t} | {cpu:.2f} | {f[part + '_evals']} | {f[part]:.3f} | **{cpu / f[part]:.2f}** |")
    f = runs["new"][0]["floors"]
    print(
        f"\nrates measured in the new code's process: {f['gflops']:.0f} GFLOP/s fp32 matmul, {f['gbps']:.1f} GB/s read"
    )
    if "layer" in old:
        for a, b in zip(old["layer"], new["layer"]):
            moved = [k for k in a if _diff(a[k], b.get(k)) != 0.0]
            print(f"\nlayer row {a['method']}: " + (f"changed {moved}" if moved else "every column identical"), end="")
        print(
            "\n\n| part of the layer call (CPU s, first repeat) | old | share | new | share |\n|---|---:|---:|---:|---:|"
        )
        tot = {t: runs[t][0]["times"]["layer"]["cpu"] for t in TREES}
        rest = dict(tot)
        for label in runs["old"][0]["parts"]:
            v = {t: runs[t][0]["parts"][label] for t in TREES}
            rest = {t: rest[t] - v[t] for t in TREES}
            print(
                f"| {label} | {v['old']:.1f} | {v['old'] / tot['old']:.2f} | {v['new']:.1f} | {v['new'] / tot['new']:.2f} |"
            )
        print(
            f"| the rest | {rest['old']:.1f} | {rest['old'] / tot['old']:.2f} | {rest['new']:.1f} | {rest['new'] / tot['new']:.2f} |"
        )
    print()


if __name__ == "__main__":
    raise SystemExit(main())
