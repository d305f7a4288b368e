"""Probe benchmark: our L-BFGS probe vs scikit-learn's lbfgs on the same states.

For one run (a 4-layer model from ``models_store``, random-init by default, or synthetic
residual-stream-like states with ``--source synthetic``) it fits a probe at every layer
(emb + 4 blocks) and every eval length, exactly as ``science.probes.probe_layers`` does (80/20
split by sequence, every position), with

- ours: ``science.probes.fit_probe`` (defaults: tol 1e-4, max_iter 500);
- sklearn default: ``StandardScaler`` + ``LogisticRegression(C=1, lbfgs, max_iter=100)``;
- sklearn converged: the same with ``--sk-max-iter`` (default 5000) at ``--converged-lengths``
  (the accuracy reference; slow, so by default only at the first length).

It prints one row per (length, layer) and the totals: time ratio (sklearn / ours), largest
test-accuracy difference in pp against the converged reference, convergence flags, and our fits'
CPU seconds against their floor measured in the same run (``benchmarks/floors.py``: the minimal
computation's FLOPs and bytes at this CPU's measured matmul rate and memory bandwidth).
``--md PATH`` appends the table and the exact command to a Markdown file.

    python -m benchmarks.bench_probes --family transformer --task s3 --n-seq 500 \
        --lengths 40 60 80 100 120 --md benchmarks/PROBES.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from benchmarks.floors import FitCounter, Rates, counting_fits, design_floor, machine_rates
from science.probes import fit_probe, sklearn_probe, split_sequences


def model_states(
    family: str, task_name: str, n_seq: int, lengths: list[int], seed: int, task_kwargs: dict[str, Any]
) -> tuple[dict[int, tuple[dict[int, torch.Tensor], torch.Tensor]], int, str]:
    """Random-init 4-layer model of ``family``: ``{L: ({layer: [n, L, D]}, labels [n, L])}``."""
    from models_store import ModelConfig, build_model
    from models_store.capture import run_with_states
    from science.tasks import get_task

    task = get_task(task_name, **task_kwargs)
    torch.manual_seed(seed)
    model = build_model(
        ModelConfig(family=family, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=4)
    ).eval()
    out = {}
    for L in lengths:
        data = task.generate(length=L, n=n_seq, seed=seed + L, split="train")
        chunks: dict[int, list[torch.Tensor]] = {}
        with torch.no_grad():
            for i in range(0, n_seq, 250):
                _, st = run_with_states(model, data.tokens[i : i + 250])
                for k, v in st.items():
                    chunks.setdefault(k, []).append(v)
        out[L] = ({k: torch.cat(v) for k, v in chunks.items()}, data.labels)
    desc = f"random-init {family} (d={model.d_model}, {model.n_params:,} params) on {task_name} {task_kwargs or ''}"
    return out, task.n_classes, desc


def synthetic_states(
    n_seq: int, lengths: list[int], d: int, n_classes: int, seed: int
) -> tuple[dict[int, tuple[dict[int, torch.Tensor], torch.Tensor]], int, str]:
    """Residual-stream-like states: a running sum of layer updates with a label signal growing
    with depth, a few high-variance outlier dimensions and a shared low-rank component, so the
    standardised features are strongly correlated (correlation eigenvalues ~1e-4 … ~30)."""
    g = torch.Generator().manual_seed(seed)
    class_dirs = torch.randn(n_classes, d, generator=g) / d**0.5
    mix = [torch.randn(d, d, generator=g) / d**0.5 for _ in range(5)]
    low_rank = torch.randn(4, d, generator=g)
    scale = torch.ones(d)
    scale[torch.randperm(d, generator=g)[:3]] = 20.0  # outlier ("massive activation") dims
    out = {}
    for L in lengths:
        labels = torch.randint(0, n_classes, (n_seq, L), generator=g)
        prev = torch.cumsum(torch.randint(0, 7, (n_seq, L), generator=g), 1) % n_classes  # distractor
        h = torch.randn(n_seq, L, d, generator=g) * 0.5 + class_dirs[prev] * 2.0
        states = {}
        for i, layer in enumerate(range(-1, 4)):
            shared = torch.randn(n_seq, L, 4, generator=g) @ low_rank
            h = h + torch.tanh(h @ mix[i]) + 0.3 * (i + 1) * class_dirs[labels] * 2.0 + 0.2 * shared
            states[layer] = (h * scale).clone()
        out[L] = (states, labels)
    return out, n_classes, f"synthetic residual-stream states d={d}, {n_classes} classes"


def _fmt_s(x: float) -> str:
    return f"{x:.2f}"


HEADER = (
    "| L | layer | N train | ours acc | ours s | ours conv (iter) | sk100 acc | sk100 s | sk100 conv (iter) "
    "| sk-conv acc | sk-conv s | sk-conv conv (iter) | optimum acc | Δ ours−sk-conv pp | Δ ours−opt pp "
    "| Δ sk-conv−opt pp |"
)
NCOL = HEADER.count("|") - 1


@dataclass
class Totals:
    """Seconds per fitter summed over the probes, the largest accuracy gaps (pp), convergence."""

    ours: float = 0.0
    sk100: float = 0.0
    ours_c: float = 0.0  # ours, on the probes that have the converged sklearn reference
    skc: float = 0.0
    max_diff: float = 0.0  # ours vs converged sklearn
    max_opt: float = 0.0  # ours vs the optimum
    max_sk_opt: float = 0.0  # converged sklearn vs the optimum
    all_conv: bool = True
    ours_cpu: float = 0.0  # CPU seconds of our fits alone (what the floor is compared with)
    counted: list[tuple[int, int, FitCounter]] = field(default_factory=list)  # (N, D, its fits) per probe

    def floor(self, rates: Rates) -> float:
        """The floor of our fits (``benchmarks/floors.py``): a design and the evaluations, each probe."""
        return sum(design_floor(n, d, rates) + c.eval_floor(rates) for n, d, c in self.counted)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", choices=["model", "synthetic"], default="model")
    ap.add_argument("--family", default="transformer")
    ap.add_argument("--task", default="s3")
    ap.add_argument("--dyck-target", default=None, help="dyck target: top | depth (11 classes)")
    ap.add_argument("--classes", type=int, default=6, help="synthetic only")
    ap.add_argument("--d", type=int, default=128, help="synthetic only")
    ap.add_argument("--n-seq", type=int, default=500)
    ap.add_argument("--lengths", type=int, nargs="+", default=[40, 60, 80, 100, 120])
    ap.add_argument("--layers", type=int, nargs="*", default=None, help="default: all (emb..3)")
    ap.add_argument("--sk-max-iter", type=int, default=5000)
    ap.add_argument(
        "--converged-lengths",
        type=int,
        nargs="*",
        default=None,
        help="lengths with the converged sklearn reference (default: the first length)",
    )
    ap.add_argument(
        "--optimum-lengths",
        type=int,
        nargs="*",
        default=None,
        help="lengths with the optimum reference (ours, float64, tol 1e-8; slow on near-separable "
        "states); default: every length",
    )
    ap.add_argument("--skip-sklearn-default", action="store_true")
    ap.add_argument("--threads", type=int, default=2, help="torch and sklearn (threadpoolctl) threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--md", default=None, help="append the result table to this Markdown file")
    return ap.parse_args(argv)


def _timed_sklearn(Xtr: torch.Tensor, ytr: torch.Tensor, Xte: torch.Tensor, yte: torch.Tensor, max_iter: int) -> dict:
    t = time.perf_counter()
    r = sklearn_probe(Xtr, ytr, Xte, yte, max_iter=max_iter)
    r["s"] = time.perf_counter() - t
    return r


def _cell(r: dict | None) -> tuple[str, str, str]:
    if r is None:
        return "–", "–", "–"
    return f"{r['accuracy']:.4f}", _fmt_s(r["s"]), f"{r['converged']} ({r['n_iter']})"


def probe_row(
    args: argparse.Namespace,
    L: int,
    layer: int,
    H: torch.Tensor,
    labels: torch.Tensor,
    split: tuple[torch.Tensor, torch.Tensor],
    n_classes: int,
    tot: Totals,
) -> str:
    """The measured section for one (length, layer): ours timed, sklearn at max_iter 100 and (at
    the converged lengths) at ``--sk-max-iter`` timed, the optimum untimed; adds to ``tot`` and
    returns the table row."""
    conv_lengths = args.lengths[:1] if args.converged_lengths is None else args.converged_lengths
    tr, te = split
    D = H.shape[-1]
    Xtr, ytr = H[tr].reshape(-1, D).contiguous(), labels[tr].reshape(-1)
    Xte, yte = H[te].reshape(-1, D).contiguous(), labels[te].reshape(-1)
    t, cpu = time.perf_counter(), time.process_time()
    with counting_fits() as fits:
        p = fit_probe(Xtr, ytr, n_classes)
    tot.ours_cpu += time.process_time() - cpu
    tot.counted.append((Xtr.shape[0], D, fits))
    acc = p.accuracy(Xte, yte)
    t_ours = time.perf_counter() - t
    tot.ours += t_ours
    tot.all_conv &= p.converged
    r100 = None
    if not args.skip_sklearn_default:
        r100 = _timed_sklearn(Xtr, ytr, Xte, yte, 100)
        tot.sk100 += r100["s"]
    rc = None
    if L in conv_lengths:
        rc = _timed_sklearn(Xtr, ytr, Xte, yte, args.sk_max_iter)
        tot.skc += rc["s"]
        tot.ours_c += t_ours
    # the optimum of the shared objective: ours in float64 at tol 1e-8 (not timed)
    opt = acc_opt = None
    d_opt = float("nan")
    if args.optimum_lengths is None or L in args.optimum_lengths:
        opt = fit_probe(Xtr.double(), ytr, n_classes, tol=1e-8, max_iter=5000)
        acc_opt = opt.accuracy(Xte.double(), yte)
        d_opt = (acc - acc_opt) * 100
        tot.max_opt = max(tot.max_opt, abs(d_opt))
    diff = d_sk_opt = float("nan")
    if rc is not None:
        diff = (acc - rc["accuracy"]) * 100
        tot.max_diff = max(tot.max_diff, abs(diff))
        if acc_opt is not None:
            d_sk_opt = (rc["accuracy"] - acc_opt) * 100
            tot.max_sk_opt = max(tot.max_sk_opt, abs(d_sk_opt))
    return (
        f"| {L} | {layer} | {len(ytr)} | {acc:.4f} | {_fmt_s(t_ours)} | {p.converged} ({p.n_iter}) | "
        + " | ".join(_cell(r100))
        + " | "
        + " | ".join(_cell(rc))
        + (" | –" if opt is None else f" | {acc_opt:.4f}{'' if opt.converged else ' (unconv.)'}")
        + f" | {diff:+.2f} | {d_opt:+.2f} | {d_sk_opt:+.2f} |"
    ).replace("+nan", "–")


def summary_lines(
    args: argparse.Namespace, desc: str, n_rows: int, t_capture: float, tot: Totals, rates: Rates
) -> list[str]:
    conv_lengths = args.lengths[:1] if args.converged_lengths is None else args.converged_lengths
    floor = tot.floor(rates)
    evals = sum(c.evals for _, _, c in tot.counted)
    summary = [
        f"- states: {desc}; {args.n_seq} sequences per length, lengths {args.lengths}, "
        f"{n_rows} probes; capture {t_capture:.1f} s",
        f"- ours total: {tot.ours:.1f} s; all converged: {tot.all_conv}; "
        f"max |Δ test accuracy| vs the optimum (ours, float64, tol 1e-8"
        f"{'' if args.optimum_lengths is None else f', at L={args.optimum_lengths}'}): **{tot.max_opt:.2f} pp**",
        f"- ours against the floor (benchmarks/floors.py: {rates.gflops:.0f} GFLOP/s, {rates.gbps:.1f} GB/s "
        f"measured in this run; {evals} L-BFGS evaluations): {tot.ours_cpu:.2f} CPU s vs {floor:.2f} s → "
        f"**{tot.ours_cpu / floor:.2f}× the floor**",
    ]
    if not args.skip_sklearn_default:
        summary.append(f"- sklearn lbfgs max_iter=100 total: {tot.sk100:.1f} s → **ratio {tot.sk100 / tot.ours:.1f}×**")
    if tot.skc > 0:
        summary.append(
            f"- sklearn lbfgs max_iter={args.sk_max_iter} at L={conv_lengths}: {tot.skc:.1f} s vs ours "
            f"{tot.ours_c:.1f} s on the same probes → **ratio {tot.skc / tot.ours_c:.1f}×**; "
            f"max |Δ test accuracy| ours vs this converged reference: **{tot.max_diff:.2f} pp** "
            f"(the reference itself vs the optimum: {tot.max_sk_opt:.2f} pp)"
        )
    return summary


def append_markdown(
    args: argparse.Namespace, argv: list[str] | None, desc: str, summary: list[str], rows: list[str]
) -> None:
    cmd = "python -m benchmarks.bench_probes " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    with open(args.md, "a") as f:
        f.write(
            f"\n### {desc}\n\n```\n{cmd}\n```\n\nMachine: {platform.machine()}, "
            f"{os.cpu_count()} CPUs visible, torch {torch.__version__}, {args.threads} threads.\n\n"
        )
        f.write("\n".join(summary) + "\n\n" + HEADER + "\n|" + "---|" * NCOL + "\n" + "\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from threadpoolctl import threadpool_limits  # sklearn's OpenMP/BLAS pools: same thread count

    threadpool_limits(args.threads)
    t0 = time.perf_counter()
    if args.source == "model":
        kw = {"target": args.dyck_target} if args.dyck_target else {}
        data, n_classes, desc = model_states(args.family, args.task, args.n_seq, args.lengths, args.seed, kw)
    else:
        data, n_classes, desc = synthetic_states(args.n_seq, args.lengths, args.d, args.classes, args.seed)
    t_capture = time.perf_counter() - t0

    print(desc, f"(capture {t_capture:.1f} s)")
    print(HEADER)
    print("|" + "---|" * NCOL)
    # warm-up (first-call library initialisation), not timed
    wx, wy = torch.randn(200, 8), torch.randint(0, 2, (200,))
    fit_probe(wx, wy, 2)
    sklearn_probe(wx, wy, wx, wy)
    rates = machine_rates()
    tot = Totals()
    rows = []
    for L in args.lengths:
        states, labels = data[L]
        split = split_sequences(labels.shape[0], 0.2, args.seed)
        for layer in args.layers if args.layers else sorted(states):
            line = probe_row(args, L, layer, states[layer], labels, split, n_classes, tot)
            print(line, flush=True)
            rows.append(line)
    later = machine_rates()  # the better of before and after: load slows the floor as little as it can
    rates = Rates(max(rates.gflops, later.gflops), max(rates.gbps, later.gbps))
    summary = summary_lines(args, desc, len(rows), t_capture, tot, rates)
    print("\n".join(summary))
    if args.md:
        append_markdown(args, argv, desc, summary, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
