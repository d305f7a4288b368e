"""Compiled CPU kernels for the Mamba / Mamba-2 mixers (forward + backward), bound as typed torch ops.

Why: on CPU transformers' Mamba scan builds [B, D, L, N] tensors op by op (memory bound, ~10 s
per training step at batch 64 × L 40); fused loops that keep the state in registers / L1 do the
same arithmetic ~25× faster (BENCHMARKS.md "The CPU scan kernel": ≥ 4× torch.compile of the
reference scan, ≥ 20× transformers' ``use_mambapy`` path, measured in one run).

The source lives in ``models_store/csrc/`` (package data): ``fast_scan_kernels.h``, plain C++
loops on raw pointers, and ``fast_scan_ops.cpp``, which registers them with ``TORCH_LIBRARY`` as
``torch.ops.layerscope.{conv_fwd, conv_bwd, scan_fwd, scan_bwd}``. Each op has a schema (named,
typed arguments; mutated outputs marked ``Tensor(a!)``) and checks dtypes, devices, shapes and
row layouts, so a wrong call raises a ``RuntimeError`` instead of reading out of bounds. They
are compiled with the system's ``g++`` / ``c++`` (or ``$CXX``) against torch's headers and
libraries (``torch.utils.cpp_extension.include_paths()`` / ``library_paths()``), loaded with
``torch.ops.load_library``, and cached under ``$LAYERSCOPE_KERNEL_CACHE`` (default
``~/.cache/layerscope/kernels``), keyed by the sources, the flags, the compiler version, the
torch version and the CPU's instruction-set flags (``-march=native`` code never runs on a CPU it
was not built for). Set ``LAYERSCOPE_FAST_SCAN=torch`` to skip them (the pure-PyTorch paths in
``models_store.fast_scan`` are used instead); a build or load failure does the same, with one
warning.

Kernels (float32 and float64; rows of x / z / B / C / gradients may be strided column slices of
a wider [B, L, C] tensor, so in_proj's output and its gradient are used in place):

- ``conv``: causal depthwise conv (kernel k, left zero padding k-1) + bias + optional SiLU.
- ``scan``: per batch b, channel d, state n (t = 0..L-1, h_{-1} = 0)::

      dt      = softplus(dt_raw)                       (optional, torch's threshold 20)
      h_t     = exp(dt_t A) * h_{t-1} + dt_t x_t B_t   (A [D, N], or [D]: one decay per channel)
      y_t     = sum_n C_t h_t
      out_t   = (y_t + Dskip x_t) * silu(z_t)          (Dskip, z optional)

  The backward recomputes the states per 16-channel block (nothing B·D·L·N-sized is stored).

exp / sigmoid / softplus are written so the compiler vectorises them (no libm calls): max
relative error ~2e-7 in float32, ~2e-16 in float64. Threads: OpenMP over batch rows, in the
libgomp that torch itself loaded (one thread pool, ``torch.get_num_threads()`` threads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, cast

import torch
from torch import Tensor

from models_store.compiled_ops import OpsLibrary, read_sources
from models_store.compiled_ops import compiler as compiler  # re-exported: tests ask which compiler builds it

# The kernel sources live in csrc/ beside this module (installed as package data); they are read
# here so the cache key below covers the exact text that is compiled.
CSRC = Path(__file__).with_name("csrc")
_SOURCE_FILES = ("fast_scan_kernels.h", "fast_scan_ops.cpp")
_SOURCES = read_sources(CSRC, _SOURCE_FILES)


class Kernels(Protocol):
    """``torch.ops.layerscope``: the four ops, their schemas as ``csrc/fast_scan.cpp`` declares them."""

    def conv_fwd(self, x: Tensor, w: Tensor, bias: Tensor | None, act: bool) -> Tensor: ...

    def conv_bwd(
        self, x: Tensor, w: Tensor, bias: Tensor | None, gout: Tensor, act: bool, gx: Tensor
    ) -> tuple[Tensor, Tensor]: ...

    def scan_fwd(
        self,
        x: Tensor,
        dt: Tensor,
        A: Tensor,
        B: Tensor,
        C: Tensor,
        Dskip: Tensor | None,
        z: Tensor | None,
        dt_softplus: bool,
    ) -> Tensor: ...

    def scan_bwd(
        self,
        x: Tensor,
        dt: Tensor,
        A: Tensor,
        B: Tensor,
        C: Tensor,
        gout: Tensor,
        Dskip: Tensor | None,
        z: Tensor | None,
        gx: Tensor,
        gBC: Tensor,
        gz: Tensor | None,
        dt_softplus: bool,
    ) -> tuple[Tensor, Tensor, Tensor]: ...


_LIBRARY = OpsLibrary(
    "Mamba scan kernel",
    "LAYERSCOPE_FAST_SCAN",
    "ls_fast_scan_ops",
    _SOURCES,
    "fast_scan_ops.cpp",
    "the pure-PyTorch scan",
    "layerscope",
)


def turned_off() -> bool:
    """True when ``LAYERSCOPE_FAST_SCAN`` is ``torch`` (or ``0``, ``off``, ``none``): the kernels are
    not built or used, on purpose."""
    return _LIBRARY.turned_off()


def load() -> Kernels | None:
    """``torch.ops.layerscope`` (the four kernel ops), building them on first use; None if unavailable.

    Unavailable when ``LAYERSCOPE_FAST_SCAN=torch``, no C++ compiler is on PATH, or the build
    fails (then a warning is issued once and ``load_error()`` says why).
    """
    return cast("Kernels | None", _LIBRARY.load())


def load_error() -> str | None:
    """Why ``load()`` returned None (None if it has not failed)."""
    return _LIBRARY.error()


def _ops_or_raise() -> Kernels:
    ops = load()
    if ops is None:
        raise RuntimeError(f"compiled fast-scan kernels unavailable: {load_error()}")
    return ops


def rows(t: torch.Tensor) -> torch.Tensor:
    """t [B, L, C] as the kernels read it: unit stride in C, rows t[b, l] one stride apart (t itself
    when it is such a view, e.g. a column slice of a contiguous [B, L, C'] tensor; else a copy)."""
    L = t.shape[1]
    if t.stride(2) == 1 and t.stride(0) == L * t.stride(1) and t.stride(1) >= t.shape[2]:
        return t
    return t.contiguous()


def _out_view(t: torch.Tensor, name: str) -> torch.Tensor:
    if rows(t) is not t:
        raise ValueError(f"{name} must be a row-strided [B, L, C] view (unit stride in C)")
    return t


def conv_forward(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, act: bool) -> torch.Tensor:
    """Causal depthwise conv (+ SiLU if ``act``) of x [B, L, D] (rows may be strided) with
    w [D, k], bias [D] or None → [B, L, D] contiguous. No autograd."""
    return _ops_or_raise().conv_fwd(rows(x), w.contiguous(), bias, bool(act))


def conv_backward(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, gout: torch.Tensor, act: bool, gx: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gradients of ``conv_forward``: writes dL/dx into ``gx`` (a [B, L, D] row-strided view,
    e.g. a column slice of the in_proj gradient) and returns (gw [D, k], gb [D] or None)."""
    gw, gb = _ops_or_raise().conv_bwd(rows(x), w.contiguous(), bias, gout.contiguous(), bool(act), _out_view(gx, "gx"))
    return gw, (None if bias is None else gb)


def _bc(B: torch.Tensor, C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B, C = rows(B), rows(C)
    if B.stride(1) != C.stride(1):  # the kernel reads B and C with one row stride
        B, C = B.contiguous(), C.contiguous()
    return B, C


def scan_forward(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    Dskip: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_softplus: bool = False,
) -> torch.Tensor:
    """out [Bsz, L, D] = (scan(x, dt, A, B, C) + Dskip·x) · silu(z) (Dskip, z optional). No autograd.

    With ``dt_softplus`` the kernel applies torch's ``softplus`` (threshold 20) to dt first.

    x [Bsz, L, D] (rows may be strided); dt [Bsz, L, D]; A [D, N], or [D] for one decay per
    channel (Mamba-2); B, C [Bsz, L, N] (rows may be strided); Dskip [D]; z [Bsz, L, D] (rows
    may be strided); all one float dtype, on the CPU. Raises RuntimeError naming the argument
    when a shape, dtype, device or layout does not fit.
    """
    B, C = _bc(B, C)
    return _ops_or_raise().scan_fwd(
        rows(x),
        dt.contiguous(),
        A.contiguous(),
        B,
        C,
        None if Dskip is None else Dskip.contiguous(),
        None if z is None else rows(z),
        bool(dt_softplus),
    )


def scan_backward(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    gout: torch.Tensor,
    Dskip: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    gx: torch.Tensor | None = None,
    gBC: torch.Tensor | None = None,
    gz: torch.Tensor | None = None,
    dt_softplus: bool = False,
) -> dict[str, torch.Tensor]:
    """Gradients of ``scan_forward`` for upstream gout [Bsz, L, D] ("dt" is w.r.t. the dt passed
    in, i.e. the raw dt when ``dt_softplus``).

    Returns {"x", "dt", "A", "B", "C"} (+ "Dskip", "z" when given); the A gradient has A's
    shape. Optional outputs written in place (row-strided views): ``gx`` [Bsz, L, D],
    ``gBC`` [Bsz, L, 2N] (B then C), ``gz`` [Bsz, L, D].
    """
    Bsz, L, D = x.shape
    N = B.shape[2]
    B, C = _bc(B, C)
    gx = torch.empty(Bsz, L, D, dtype=x.dtype) if gx is None else _out_view(gx, "gx")
    gBC = torch.empty(Bsz, L, 2 * N, dtype=x.dtype) if gBC is None else _out_view(gBC, "gBC")
    if gBC.shape[2] != 2 * N:
        raise ValueError("gBC must be [B, L, 2N]")
    if z is not None:
        gz = torch.empty(Bsz, L, D, dtype=x.dtype) if gz is None else _out_view(gz, "gz")
    gdt, gA, gD = _ops_or_raise().scan_bwd(
        rows(x),
        dt.contiguous(),
        A.contiguous(),
        B,
        C,
        gout.contiguous(),
        None if Dskip is None else Dskip.contiguous(),
        None if z is None else rows(z),
        gx,
        gBC,
        gz if z is not None else None,
        bool(dt_softplus),
    )
    out = {"x": gx, "dt": gdt, "A": gA, "B": gBC[..., :N], "C": gBC[..., N:]}
    if Dskip is not None:
        out["Dskip"] = gD
    if z is not None and gz is not None:  # gz: made above whenever z is given
        out["z"] = gz
    return out
