"""The probe objective's sums in one pass over the rows: a compiled CPU kernel (measurement version 3).

One evaluation of the standardised softmax objective (:mod:`science.probes.solver`) needs, over
the centred rows ``Xt [D, N]``, the logits ``V·Xt`` (``V [K, D]``), a float64 log-softmax, the
residuals ``R = (P − Y)/N`` and the gradient product ``R·Xtᵀ``. In torch that is two matrix
products with K = 2–8 rows, which MKL runs far below its matmul rate, and ~10 float64 passes over
the ``[K, N]`` logits. ``csrc/probe_objective_kernel.h`` makes all of it per block of 64–512 rows
while the block is in cache: logits vectorised over rows in register tiles, the softmax on an
L1-resident buffer, the gradient's partial sums kept as float32 vectors over row lanes and added
into float64 every 1,024 rows (BENCHMARKS.md "Lab scale": 0.30–0.53 of the two products' time).
The same arithmetic as :meth:`science.probes.solver._Sums.add` — float32 products, float64 softmax
and sums — grouped differently, so the numbers agree to float rounding, not bit for bit
(``tests/test_probe_onepass.py``).

The same library holds ``lbfgs_fit`` (``csrc/probe_lbfgs.h``): a whole L-BFGS fit around the kernel
in one call (:meth:`science.probes.kernel_objective.KernelObjective.minimise`).

Built on first use like the scan kernel (:mod:`models_store.compiled_ops`); ``LAYERSCOPE_PROBE_KERNEL
=torch`` turns it off (the torch path runs: the same objective at float rounding). It takes float32
rows on the CPU with 2–8 classes; other fits run the torch path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from models_store.compiled_ops import OpsLibrary, read_sources

CSRC = Path(__file__).with_name("csrc")
MAX_CLASSES = 8  # csrc/probe_objective_kernel.h: MAX_CLASSES
_LIBRARY = OpsLibrary(
    "probe objective kernel",
    "LAYERSCOPE_PROBE_KERNEL",
    "ls_probe_objective_ops",
    read_sources(CSRC, ("probe_objective_kernel.h", "probe_lbfgs.h", "centred_transpose.h", "probe_objective_ops.cpp")),
    "probe_objective_ops.cpp",
    "the torch objective",
    "layerscope_probe",
)


def turned_off() -> bool:
    """True when ``LAYERSCOPE_PROBE_KERNEL`` is ``torch`` (or ``0``, ``off``, ``none``)."""
    return _LIBRARY.turned_off()


def load_error() -> str | None:
    """Why the kernel is unavailable (None if it loaded or was not tried)."""
    return _LIBRARY.error()


def applies(Xt: Tensor, K: int) -> bool:
    """Whether the kernel evaluates a fit on ``Xt`` (``[D, N]``) with ``K`` classes: float32 rows on
    the CPU, 2–8 classes, and the kernel built (built on the first call that could use it)."""
    return (
        Xt.device.type == "cpu" and Xt.dtype == torch.float32 and 2 <= K <= MAX_CLASSES and _LIBRARY.load() is not None
    )


def simd() -> bool:
    """Whether the loaded kernel is the SIMD (AVX2 + FMA) build, not the scalar one.

    Raises:
        RuntimeError: the kernel is unavailable (:func:`load_error`).
    """
    return bool(_ops().simd())


def add_sums(Xt: Tensor, V: Tensor, b: Tensor, y: Tensor, n: int, picked: Tensor, G: Tensor, gb: Tensor) -> None:
    """Add one evaluation's sums over the rows of ``Xt`` into ``picked``, ``G`` and ``gb``.

    Args:
        Xt: ``[D, m]`` float32 centred rows, unit stride along a row (a column slice of a wider
            ``[D, N]`` matrix is read in place).
        V: ``[K, D]`` raw weights (float32); ``b``: ``[K]`` intercepts (float64).
        y: ``[m]`` labels in ``0..K-1`` (int64).
        n: the objective's row count ``N`` (the residuals are divided by it).
        picked: ``[]`` float64, ``+= Σ log p[y]``; ``G``: ``[K, D]`` float64, ``+= R·Xtᵀ``;
            ``gb``: ``[K]`` float64, ``+= Σ R``.

    Raises:
        RuntimeError: a dtype, device, shape or layout the kernel does not take, or a label
            outside ``0..K-1`` (checked before anything is added), or the kernel is unavailable.
    """
    bound_sums(Xt, y, n)(V.contiguous(), b.contiguous(), picked, G, gb)


def _ops() -> Any:
    """``torch.ops.layerscope_probe``, built on first use; RuntimeError where it is unavailable."""
    ops = _LIBRARY.load()
    if ops is None:
        raise RuntimeError(f"the compiled probe objective is unavailable: {load_error() or 'turned off'}")
    return ops


def centred_transpose(X: Tensor, centre: Tensor, rows: Tensor | None = None) -> Tensor:
    """``(X[rows] − centre)ᵀ`` as a new contiguous ``[D, m]`` float32 tensor: a chunk of rows read
    back from disk (``X [n, D]``, contiguous float32; ``rows [m]`` int64 positions of the rows to take,
    None: all; ``centre [D]`` float32) in the layout the kernel reads, in one pass
    (``csrc/centred_transpose.h``). The same values bit for bit as ``index_select``, ``sub_(centre)``
    and ``.T.contiguous()`` (the same float32 subtraction), without torch's strided copy
    (BENCHMARKS.md "Lab scale"); ``X`` is left as it was.

    Raises:
        RuntimeError: a dtype, device, shape or layout the op does not take, a position outside
            ``X``'s rows, or the kernel is unavailable (:func:`load_error`).
    """
    return _ops().centred_transpose(X, centre, rows)


def kernel_rows(Xt: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """``Xt [D, N]`` with unit stride along its rows (a copy only where it has not) and ``y [N]``
    contiguous: the layout the ops take."""
    if Xt.dim() == 2 and Xt.shape[1] > 1 and Xt.stride(1) != 1:
        Xt = Xt.contiguous()
    return Xt, y.contiguous()


def lbfgs_fit_op() -> Any:
    """``torch.ops.layerscope_probe.lbfgs_fit``: a whole L-BFGS fit in C++
    (``csrc/probe_lbfgs.h``, :meth:`science.probes.kernel_objective.KernelObjective.minimise`).

    Raises:
        RuntimeError: the kernel is unavailable (:func:`load_error`).
    """
    return _ops().lbfgs_fit


def bound_sums(Xt: Tensor, y: Tensor, n: int) -> Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], None]:
    """:func:`add_sums` over all of one fit's rows, its constant arguments checked once:
    ``f(V, b, picked, G, gb)`` (contiguous ``V [K, D]`` float32, ``b [K]`` float64) adds one
    evaluation's sums. What an L-BFGS fit calls once an evaluation
    (:mod:`science.probes.kernel_objective`).

    Raises:
        RuntimeError: as :func:`add_sums` (the op checks every call's arguments).
    """
    Xt, y = kernel_rows(Xt, y)
    op, N = _ops().objective, float(n)

    def add(V: Tensor, b: Tensor, picked: Tensor, G: Tensor, gb: Tensor) -> None:
        op(Xt, V, b, y, N, picked, G, gb)

    return add
