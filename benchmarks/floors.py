"""The floor of a probe fit and of an INLP fit, measured on this machine in the same run.

A floor is the time the minimal computation would take at this CPU's rates, measured here
(:func:`machine_rates`, one thread, in CPU seconds — as the fits are timed — and best of several
tries, so that other processes on a loaded machine, which stretch wall time, count on neither side):

- ``gflops``: fp32 matrix-product rate, a 1024³ product: the faster of ``torch.mm`` (torch's BLAS)
  and oneDNN's product (:func:`fp32_products`; on an AMD CPU with AVX-512, MKL's path runs at half
  the core's rate, which a floor must not inherit);
- ``gbps``: memory read rate, ``torch.sum`` over a 256 MiB float32 tensor (out of cache).

Each piece of work counts at ``max(FLOPs / rate, bytes / bandwidth)``. The solver's own
evaluations are counted (:class:`FitCounter` wraps ``science.probes.linear.minimise``): the
floor says how close each evaluation and the work around it come to the unavoidable, not
whether fewer evaluations would do. For N rows, D features, K classes:

- an evaluation: the logits and the gradient, 2 products of ``4·N·D·K`` FLOPs together, each
  reading the rows once (``2 · N·D·4`` bytes in float32);
- a design (the rows standardised once; a probe and its control twin share one): the mean and
  the covariance, ``2·N·D²`` FLOPs and one read of the rows;
- INLP: one design of its training rows, the evaluations of every round's probe, and per round
  one read of the held-out rows (``2·N_dev·D·K`` FLOPs) to score it — the incremental
  algorithm; its covariance and projection updates are ``O(D²)`` a round and not counted.

Rows small enough to stay in cache (``N·D·4`` below ~16 MB here) can be read faster than
``gbps``: a product then runs below its floor, and a ratio near or under 1 means "at the floor".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Rates:
    """This machine's measured rates: fp32 GFLOP/s and GB/s read, one thread."""

    gflops: float
    gbps: float

    def seconds(self, flops: float, nbytes: float) -> float:
        """The floor of work of ``flops`` FLOPs reading ``nbytes`` bytes."""
        return max(flops / (self.gflops * 1e9), nbytes / (self.gbps * 1e9))

    def evaluation(self, n: int, d: int, k: int, itemsize: int = 4) -> float:
        """The floor of one evaluation of the probe's objective on ``n × d`` rows, ``k`` classes:
        two products (``4·n·d·k`` FLOPs) that read the rows twice."""
        return self.seconds(4 * n * d * k, 2 * n * d * itemsize)


def fp32_products(a: Any, b: Any) -> list[Callable[[], Any]]:
    """The ways this machine's torch multiplies float32 ``a [M, K]`` by ``b [K, N]`` on the CPU:
    its BLAS (``torch.mm``) and, where torch has oneDNN, oneDNN's product
    (:func:`models_store.cpu_matmul.onednn_linear`, as a measurement's forwards may run it)."""
    import torch

    from models_store.cpu_matmul import onednn_linear

    products: list[Callable[[], Any]] = [lambda: torch.mm(a, b)]
    if a.device.type == "cpu" and a.dtype == torch.float32 and torch.backends.mkldnn.is_available():
        weight = b.T.contiguous()
        products.append(lambda: onednn_linear(a, weight))
    return products


def machine_rates(tries: int = 7) -> Rates:
    """Measure :class:`Rates` now (best of ``tries``)."""
    import torch

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    big = torch.ones(64 * 1024 * 1024)  # 256 MiB
    products = fp32_products(a, b)
    for product in products:
        product()
    big.sum()
    mm, rd = float("inf"), float("inf")
    for _ in range(tries):
        for product in products:
            t = time.process_time()
            product()
            mm = min(mm, time.process_time() - t)
        t = time.process_time()
        big.sum()
        rd = min(rd, time.process_time() - t)
    return Rates(gflops=2 * 1024**3 / mm / 1e9, gbps=big.numel() * 4 / rd / 1e9)


@dataclass
class FitCounter:
    """The probe fits made while active: ``(N, D, K, evaluations)`` each."""

    fits: list[tuple[int, int, int, int]] = field(default_factory=list)

    def eval_floor(self, rates: Rates, itemsize: int = 4) -> float:
        """Floor of every counted evaluation (module docstring)."""
        return sum(e * rates.evaluation(n, d, k, itemsize) for n, d, k, e in self.fits)

    @property
    def evals(self) -> int:
        return sum(f[3] for f in self.fits)


def design_floor(n: int, d: int, rates: Rates, itemsize: int = 4) -> float:
    """Floor of standardising ``n × d`` rows once: mean and covariance."""
    return rates.seconds(2 * n * d * d, n * d * itemsize)


def inlp_floor(counter: FitCounter, n_train: int, n_dev: int, d: int, k: int, rates: Rates) -> float:
    """The incremental INLP's floor: one design, every round's evaluations, a held-out read a round."""
    rounds = len(counter.fits)
    return (
        design_floor(n_train, d, rates)
        + counter.eval_floor(rates)
        + rounds * rates.seconds(2 * n_dev * d * k, n_dev * d * 4)
    )


@contextmanager
def counting_fits() -> Iterator[FitCounter]:
    """Count the solver's fits (any code version: the first argument of ``minimise`` is the
    standardised rows ``[N, D]`` or a design holding them transposed, ``Xt [D, N]``, or, for rows
    on disk, a design whose ``Xt`` is ``[D, 0]`` and whose ``n`` counts the rows)."""
    import science.probes.linear as linear

    counter = FitCounter()
    real = linear.minimise

    def counted(first: Any, y: Any, counts: Any, *args: Any, **kwargs: Any) -> Any:
        out = real(first, y, counts, *args, **kwargs)
        if hasattr(first, "Xt"):  # a design: its rows may be on disk (Xt empty), so N is its n
            d, n = int(first.Xt.shape[0]), int(getattr(first, "n", first.Xt.shape[1]))
        else:
            d, n = tuple(reversed(first.shape))
        counter.fits.append((int(n), int(d), int(counts.numel()), int(out.n_evals)))
        return out

    linear.minimise = counted  # type: ignore[assignment]  # the counting wrapper, put back below
    try:
        yield counter
    finally:
        linear.minimise = real
