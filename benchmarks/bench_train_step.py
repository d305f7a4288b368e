"""Training-step time per model family, as a ratio to the Transformer measured in the same run.

One AdamW step (lr 1e-3, weight decay 0.01) on a fresh batch of 64 random token
sequences of length 40 with a label at every position, at ~830K parameters per family
(``models_store.build_model`` solves each width). Steps of all variants are interleaved
(round-robin) so a noisy, shared CPU slows every variant alike; each figure is the median of
``--steps`` timed steps after ``--warmup`` untimed ones.

Variants: every family as the product builds it (``mamba`` / ``mamba2`` with
``models_store.fast_scan`` installed when the family builder does so, or with ``--fast``),
plus, for reference, ``mamba[hf]`` / ``mamba2[hf]``: transformers' own CPU forward (no fast
path). ``mamba[hf]`` takes ~10 s per step, so it gets ``--slow-steps`` steps (default 3).

Usage::

    python benchmarks/bench_train_step.py                       # all families, markdown table
    python benchmarks/bench_train_step.py --families transformer,mamba --steps 30
    python benchmarks/bench_train_step.py --no-hf               # skip transformers' slow paths
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerscope_core.registry import family_names, get_family
from models_store import ModelConfig, build_model, fast_scan, fast_scan_cpu

FAMILIES = family_names()
VOCAB, CLASSES = 16, 6


def make_model(family: str, fast: bool | None, seed: int = 0, d_model: int | None = None) -> torch.nn.Module:
    """An ~830K-parameter model of ``family`` (width solved by ``ModelConfig`` unless
    ``d_model``); ``fast`` True/False forces the fast mixer path on/off, None leaves the model
    as ``build_model`` made it."""
    model = build_model(ModelConfig(family=family, vocab_size=VOCAB, n_classes=CLASSES, d_model=d_model), seed=seed)
    if fast is True:
        fast_scan.install(model)
    elif fast is False:
        fast_scan.uninstall(model)
    return model.train()


def make_step(model: torch.nn.Module, batch: int, length: int, seed: int) -> Callable[[], float]:
    """One AdamW training step on a fresh random batch; returns the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)

    def step() -> float:
        tokens = torch.randint(0, VOCAB, (batch, length), generator=gen)  # (B, L)
        labels = torch.randint(0, CLASSES, (batch, length), generator=gen)  # (B, L)
        logits = model(tokens)  # (B, L, C)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, CLASSES), labels.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of " + ",".join(FAMILIES))
    ap.add_argument("--steps", type=int, default=20, help="timed steps per variant (median reported)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per variant first")
    ap.add_argument("--slow-steps", type=int, default=3, help="timed steps for mamba[hf] (~10 s each)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--no-hf", action="store_true", help="skip the transformers-default reference variants")
    ap.add_argument("--fast", action="store_true", help="force the fast mixer path even if the builder does not")
    ap.add_argument(
        "--profile",
        default="",
        metavar="VARIANT",
        help="after the table, torch.profiler's top ops (self CPU) over 5 steps of this variant",
    )
    ap.add_argument(
        "--mamba-d",
        default="",
        help="extra Mamba variants at these widths, e.g. 168,176 "
        "(GEMM-friendly multiples of 8, still within ±10%% of the parameter target)",
    )
    return ap


def build_variants(args: argparse.Namespace, families: list[str]) -> dict[str, tuple[torch.nn.Module, int]]:
    """Variant name → (model, timed steps): every family as built (or forced fast), the extra Mamba
    widths, and transformers' own SSM paths unless ``--no-hf``."""
    variants: dict[str, tuple[torch.nn.Module, int]] = {}
    for fam in families:
        ssm = get_family(fam).kind == "ssm"  # the Mamba mixers: fast CPU scan vs transformers' own
        fast = True if (args.fast and ssm) else None
        variants[fam] = (make_model(fam, fast), args.steps)
        if fam == "mamba":
            for d in (int(v) for v in args.mamba_d.split(",") if v.strip()):
                variants[f"mamba (d={d})"] = (make_model(fam, True if args.fast else None, d_model=d), args.steps)
        if ssm and not args.no_hf:
            variants[f"{fam}[hf]"] = (make_model(fam, False), args.slow_steps if fam == "mamba" else args.steps)
    return variants


def time_steps(
    variants: dict[str, tuple[torch.nn.Module, int]], steps: dict[str, Callable[[], float]], warmup: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The measured section: warm-up, then the variants' steps round-robin. Returns the wall and
    CPU seconds of each timed step, by variant."""
    for name, step in steps.items():
        for _ in range(warmup if not name.startswith("mamba[hf]") else 1):
            step()
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(max(n for _, n in variants.values())):
        for name, step in steps.items():
            if i < variants[name][1]:
                t0, c0 = time.perf_counter(), time.process_time()
                step()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    return times, cpu


def print_table(
    args: argparse.Namespace,
    variants: dict[str, tuple[torch.nn.Module, int]],
    times: dict[str, list[float]],
    cpu: dict[str, list[float]],
) -> None:
    base = statistics.median(times["transformer"])
    base_cpu = statistics.median(cpu["transformer"])
    print(
        f"# Training step, batch {args.batch}, L {args.length}, AdamW, {args.threads} threads, "
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; fast kernels: "
        f"{'yes' if fast_scan.kernel_available() else 'no (' + str(fast_scan_cpu.load_error()) + ')'}"
    )
    print()
    base_min = min(times["transformer"])
    print(
        "| variant | params | fast path | steps | ms/step (median) | × transformer | min ms | × transformer (min) "
        "| CPU ms/step | × transformer (CPU) |"
    )
    print("|---|---:|:---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (model, _) in variants.items():
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        n_params = sum(p.numel() for p in model.parameters())
        print(
            f"| {name} | {n_params:,} | {'yes' if fast_scan.installed(model) else '—'} | {len(times[name])} "
            f"| {med * 1e3:,.1f} | **{med / base:.2f}** | {min(times[name]) * 1e3:,.1f} "
            f"| {min(times[name]) / base_min:.2f} | {med_cpu * 1e3:,.1f} | {med_cpu / base_cpu:.2f} |"
        )
    print()
    print(
        "Wall-clock median ratios are the figure of merit. On a shared machine other processes "
        "stretch wall time unevenly, so the ratio of the fastest steps (min) and of CPU time "
        "(all threads of this process, medians) are shown too."
    )


def print_profile(name: str, step: Callable[[], float]) -> None:
    """torch.profiler's top ops (self CPU time) over 5 steps of one variant."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            step()
    print()
    print(f"## torch.profiler, 5 steps of {name} (self CPU time)")
    print()
    print("```")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=40))
    print("```")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown families {unknown}")
    if "transformer" not in families:
        families.insert(0, "transformer")  # the baseline of every ratio

    variants = build_variants(args, families)
    steps = {
        name: make_step(model, args.batch, args.length, seed=i) for i, (name, (model, _)) in enumerate(variants.items())
    }
    times, cpu = time_steps(variants, steps, args.warmup)
    print_table(args, variants, times, cpu)
    if args.profile:
        if args.profile not in steps:
            ap.error(f"--profile: no variant {args.profile!r} in {list(steps)}")
        print_profile(args.profile, steps[args.profile])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
