"""The compiled CPU scan kernel against the library alternatives, as ratios measured in the same run.

Whether ``models_store/fast_scan_cpu.cpp`` earns its place: if transformers'
``use_mambapy=True`` path or ``torch.compile`` of the reference scan comes within 2× of the
kernel, the kernel goes. Two levels, every variant timed round-robin (a noisy, shared CPU
slows each alike), each figure the median of ``--repeats`` timed calls after ``--warmup``:

1. **The scan**, forward + backward, at the Mamba training shape (batch 64, L 40, D = 352
   (2 × d_model 176), N 16, float32):

   - ``reference``: ``fast_scan.selective_scan_ref``, the plain sequential scan, eager (baseline);
   - ``torch.compile(reference)``: the same function through Inductor (compile time printed
     separately; timed after it);
   - ``transformers use_mambapy``: ``transformers.models.mamba.modeling_mamba.mamba_selective_scan``
     with ``use_mambapy=True`` (discretise, mamba.py's Blelloch ``pscan``, contract with C);
   - ``torch fallback``: ``fast_scan.selective_scan_torch`` (the project's pure-PyTorch path);
   - ``kernel``: ``fast_scan.selective_scan`` on the compiled kernel.

2. **One training step** of the ~830K-parameter Mamba (``models_store.build_model``; AdamW, a
   fresh random batch of 64 × 40): the fused kernel mixer the product installs, against
   transformers' own mixer with ``use_mambapy=True`` (``--no-step`` skips this level).

Every ratio is "× kernel" (the kernel's median = 1): the kernel stays unless an alternative
reads ≤ 2.0. Usage::

    python benchmarks/bench_scan_kernel.py --threads 1          # both levels, markdown tables
    python benchmarks/bench_scan_kernel.py --threads 1 --no-step --repeats 50

Needs ``mambapy`` (``pip install -e '.[bench]'``) for the ``use_mambapy`` rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models_store import ModelConfig, build_model, fast_scan

VOCAB, CLASSES = 16, 6


def scan_inputs(batch: int, length: int, d_inner: int, n_state: int, seed: int = 0) -> list[torch.Tensor]:
    """x, dt [b, L, D]; A [D, N] (negative, S4D-real); B, C [b, L, N]; leaf tensors with grads."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, d_inner, generator=g)
    dt = torch.nn.functional.softplus(torch.randn(batch, length, d_inner, generator=g) - 2)
    A = -torch.arange(1, n_state + 1, dtype=torch.float32).repeat(d_inner, 1)
    B = torch.randn(batch, length, n_state, generator=g)
    C = torch.randn(batch, length, n_state, generator=g)
    return [t.requires_grad_() for t in (x, dt, A, B, C)]


def mambapy_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """transformers' full-sequence scan with ``use_mambapy=True``, in the reference's [b, L, D] layout."""
    from transformers.models.mamba.modeling_mamba import mamba_selective_scan

    y = mamba_selective_scan(
        x.transpose(1, 2), dt.transpose(1, 2), A, B.transpose(1, 2), C.transpose(1, 2), use_mambapy=True
    )  # (b, D, L)
    return y.transpose(1, 2)


def fwd_bwd(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], gy: torch.Tensor) -> Callable[[], None]:
    def call() -> None:
        for t in inputs:
            t.grad = None
        fn(*inputs).backward(gy)

    return call


def timed(variants: Mapping[str, Callable[[], object]], repeats: int, warmup: int) -> dict[str, float]:
    """Median seconds per call of each variant, calls interleaved round-robin."""
    for call in variants.values():
        for _ in range(warmup):
            call()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, call in variants.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def check_agreement(fns: dict[str, Callable[..., torch.Tensor]], inputs: list[torch.Tensor]) -> dict[str, float]:
    """Max |y − y_ref| of each variant's forward against the eager reference (same inputs)."""
    with torch.no_grad():
        ref = fast_scan.selective_scan_ref(*inputs)
        return {k: float((f(*inputs) - ref).abs().max()) for k, f in fns.items()}


def bench_scan(args: argparse.Namespace) -> list[tuple[str, float, float | None, str]]:
    inputs = scan_inputs(args.batch, args.length, args.d_inner, args.n_state)
    gy = torch.randn(args.batch, args.length, args.d_inner, generator=torch.Generator().manual_seed(1))
    fns: dict[str, Callable[..., torch.Tensor]] = {
        "reference (eager)": fast_scan.selective_scan_ref,
        "kernel": lambda x, dt, A, B, C: fast_scan.selective_scan(x, dt, A, B, C, backend="kernel"),
        "torch fallback": fast_scan.selective_scan_torch,
    }
    try:
        import mambapy.pscan  # noqa: F401

        fns["transformers use_mambapy"] = mambapy_scan
    except ImportError:
        print("mambapy not installed: no use_mambapy row (pip install -e '.[bench]')", file=sys.stderr)
    compile_s = None
    if not args.no_compile:
        compiled = torch.compile(fast_scan.selective_scan_ref)
        t0 = time.perf_counter()
        fwd_bwd(compiled, inputs, gy)()  # compiles forward and backward graphs
        compile_s = time.perf_counter() - t0
        fns["torch.compile(reference)"] = compiled
    errors = check_agreement(fns, inputs)
    med = timed({k: fwd_bwd(f, inputs, gy) for k, f in fns.items()}, args.repeats, args.warmup)
    rows: list[tuple[str, float, float | None, str]] = [(k, med[k], errors[k], "") for k in fns]
    if compile_s is not None:
        rows = [
            (k, s, e, f"compile {compile_s:.1f} s" if k == "torch.compile(reference)" else n) for k, s, e, n in rows
        ]
    return rows


def train_step(model: torch.nn.Module, batch: int, length: int) -> Callable[[], float]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)

    def step() -> float:
        tokens = torch.randint(0, VOCAB, (batch, length), generator=gen)  # (B, L)
        labels = torch.randint(0, CLASSES, (batch, length), generator=gen)  # (B, L)
        loss = torch.nn.functional.cross_entropy(model(tokens).reshape(-1, CLASSES), labels.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def bench_step(args: argparse.Namespace) -> list[tuple[str, float, float | None, str]]:
    def mamba(fast: bool, mambapy: bool) -> torch.nn.Module:
        model = build_model(ModelConfig(family="mamba", vocab_size=VOCAB, n_classes=CLASSES), seed=0)
        if not fast:
            fast_scan.uninstall(model)
        for m in model.modules():
            if hasattr(m, "use_mambapy"):  # transformers' MambaMixer
                m.use_mambapy = mambapy  # type: ignore[assignment]  # a flag, typed by nn.Module as a tensor or module
        return model.train()

    variants = {"kernel (fused mixer)": train_step(mamba(True, False), args.batch, args.length)}
    try:
        import mambapy.pscan  # noqa: F401

        variants["transformers use_mambapy"] = train_step(mamba(False, True), args.batch, args.length)
    except ImportError:
        pass
    med = timed(variants, args.step_repeats, 1)
    return [(k, s, None, "") for k, s in med.items()]


def table(title: str, rows: list[tuple[str, float, float | None, str]], base: str) -> str:
    ref = dict((k, s) for k, s, _, _ in rows)[base]
    out = [
        f"### {title}",
        "",
        "| variant | ms | × kernel | max abs Δ vs reference | note |",
        "|---|---:|---:|---:|---|",
    ]
    for k, s, err, note in rows:
        out.append(f"| {k} | {1e3 * s:.1f} | {s / ref:.2f} | {'' if err is None else f'{err:.1e}'} | {note} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--d-inner", type=int, default=352, help="D = expand × d_model (Mamba at ~830K: 2 × 176)")
    ap.add_argument("--n-state", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=20, help="timed scan calls per variant (median)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--step-repeats", type=int, default=10, help="timed training steps per variant (median)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (its compile takes a while)")
    ap.add_argument("--no-step", action="store_true", help="skip the training-step level")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not fast_scan.kernel_available():
        print("the compiled kernel is unavailable; nothing to compare against", file=sys.stderr)
        return 1
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} thread(s), "
        f"load {os.getloadavg()[0]:.1f}; batch {args.batch}, L {args.length}, D {args.d_inner}, N {args.n_state}\n"
    )
    print(table("Scan, forward + backward", bench_scan(args), "kernel"))
    if not args.no_step:
        print()
        print(table("Mamba training step (~830K parameters)", bench_step(args), "kernel (fused mixer)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
