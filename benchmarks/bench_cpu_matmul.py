"""A measurement's float32 forward passes on this CPU with torch's BLAS against oneDNN
(``models_store.cpu_matmul``), interleaved in one process.

    python benchmarks/bench_cpu_matmul.py                       # torch's default threads
    OMP_NUM_THREADS=1 python benchmarks/bench_cpu_matmul.py --widths 768 1024 --layers 4

First the linear layers of a GPT-NeoX block at each width (``[B·T, D] × [D, 3D | D | 4D]`` and
``[B·T, 4D] × [4D, D]``, B·T = 64 sequences × 41 tokens): GFLOP/s of ``F.linear`` (BLAS) and of
``onednn_linear`` (the inputs converted per call, as a measurement's forwards run it), the ratio,
and the best rate of the two against the machine's FLOP rate as ``benchmarks/floors.py`` measures
it. Then a whole forward pass of a ``--layers``-block GPT-NeoX (random weights, from config)
inside ``science.precision.forwards``, ``LAYERSCOPE_CPU_MATMUL=blas`` against ``onednn``: wall
seconds (medians of ``--repeats``, the two alternated), the ratio, the largest difference of
the last hidden state, and whether ``auto`` picks oneDNN on this CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floors import machine_rates
from models_store import cpu_matmul
from science.precision import forwards


def _median_seconds(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times)


def layer_table(widths: list[int], rows: int, repeats: int) -> None:
    print("| layer `[rows, in] × [in, out]` | BLAS GFLOP/s | oneDNN GFLOP/s | oneDNN / BLAS time |")
    print("|---|---:|---:|---:|")
    g = torch.Generator().manual_seed(0)
    for d in widths:
        for n_in, n_out in [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)]:
            x, w, b = torch.randn(rows, n_in, generator=g), torch.randn(n_out, n_in, generator=g), torch.randn(n_out)
            inner = max(1, int(1e9 / (2 * rows * n_in * n_out)))
            blas = _median_seconds(partial(F.linear, x, w, b), repeats, inner)
            dnn = _median_seconds(partial(cpu_matmul.onednn_linear, x, w, b), repeats, inner)
            flop = 2 * rows * n_in * n_out
            print(
                f"| [{rows}, {n_in}] × [{n_in}, {n_out}] | {flop / blas / 1e9:.0f} | {flop / dnn / 1e9:.0f} | {dnn / blas:.2f} |"
            )


def forward_table(widths: list[int], layers: int, batch: int, length: int, repeats: int) -> None:
    from transformers import GPTNeoXConfig, GPTNeoXModel

    print("\n| model | BLAS s | oneDNN s | oneDNN / BLAS | max abs diff |")
    print("|---|---:|---:|---:|---:|")
    for d in widths:
        cfg = GPTNeoXConfig(
            hidden_size=d,
            num_hidden_layers=layers,
            num_attention_heads=d // 64,
            intermediate_size=4 * d,
            vocab_size=64,
            max_position_embeddings=256,
        )
        torch.manual_seed(0)
        model = GPTNeoXModel(cfg).eval()
        ids = torch.randint(0, 64, (batch, length), generator=torch.Generator().manual_seed(1))
        times: dict[str, list[float]] = {"blas": [], "onednn": []}
        out: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for rep in range(repeats + 1):
                for name in ("blas", "onednn") if rep % 2 == 0 else ("onednn", "blas"):
                    t = time.perf_counter()
                    with cpu_matmul.route(name), forwards("cpu"):
                        out[name] = model(ids).last_hidden_state
                    if rep:  # the first pass of each is a warm-up
                        times[name].append(time.perf_counter() - t)
        blas, dnn = statistics.median(times["blas"]), statistics.median(times["onednn"])
        diff = (out["blas"] - out["onednn"]).abs().max().item()
        print(
            f"| GPT-NeoX {layers} × {d}, {batch} × {length} tokens | {blas:.3f} | {dnn:.3f} | {dnn / blas:.2f} | {diff:.1e} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[768, 1024])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=41)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    if not torch.backends.mkldnn.is_available():
        print("bench_cpu_matmul: this torch has no oneDNN", file=sys.stderr)
        return 2
    with cpu_matmul.route("auto"):
        auto = cpu_matmul.uses_onednn()
    rates = machine_rates()
    print(
        f"## {cpu_matmul.cpu_vendor() or 'CPU'}, {torch.get_num_threads()} thread(s): auto picks "
        f"{'oneDNN' if auto else 'BLAS'}; floors.py rate {rates.gflops:.0f} GFLOP/s (one thread, the better product)\n"
    )
    layer_table(args.widths, args.batch * args.length, args.repeats)
    forward_table(args.widths, args.layers, args.batch, args.length, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
