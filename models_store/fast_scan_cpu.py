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

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Protocol, cast

import torch
from torch import Tensor

# The kernel sources live in csrc/ beside this module (installed as package data); they are read
# here so the cache key below covers the exact text that is compiled.
CSRC = Path(__file__).with_name("csrc")
_SOURCE_FILES = ("fast_scan_kernels.h", "fast_scan_ops.cpp")
_SOURCES = {name: (CSRC / name).read_text(encoding="utf-8") for name in _SOURCE_FILES}

# -march=native: built and cached per CPU (the cache key holds the CPU's flags).
# No -ffast-math (it would link crtfastmath and flush denormals process-wide on some GCCs).
_FLAGS = [
    "-O3",
    "-march=native",
    "-fopenmp",
    "-fno-math-errno",
    "-ffp-contract=fast",
    "-fPIC",
    "-shared",
    "-std=c++17",
    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
]


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


_lock = threading.Lock()
_ops: Kernels | None = None  # torch.ops.layerscope once loaded
_load_error: str | None = None
_warned = False


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compiler() -> str | None:
    """The C++ compiler the kernels are built with: ``$CXX``, else the first of ``g++``, ``c++``,
    ``clang++`` on PATH; None when there is none (the kernels cannot be built here)."""
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return cand
    return None


def _cache_dir() -> Path:
    root = os.environ.get("LAYERSCOPE_KERNEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "layerscope" / "kernels"


def _build(cxx: str) -> Path:
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256(
        "\0".join(
            [*_SOURCES.values(), " ".join(_FLAGS), version, torch.__version__, _cpu_flags(), sys.platform]
        ).encode()
    ).hexdigest()[:16]
    out_dir = _cache_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(out_dir, os.W_OK):
            raise PermissionError(out_dir)
    except OSError:  # read-only home: a per-user temp folder
        out_dir = Path(tempfile.gettempdir()) / f"layerscope-kernels-{os.getuid()}"
        out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"ls_fast_scan_ops_{key}.so"
    if target.exists():
        return target
    from torch.utils import cpp_extension  # here: it imports setuptools, which a runtime may lack

    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    libs = [a for p in cpp_extension.library_paths() for a in (f"-L{p}", f"-Wl,-rpath,{p}")]
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        for name, text in _SOURCES.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        tmp_so = Path(tmp) / target.name
        proc = subprocess.run(
            [
                cxx,
                *_FLAGS,
                *includes,
                str(Path(tmp) / "fast_scan_ops.cpp"),
                "-o",
                str(tmp_so),
                *libs,
                "-lc10",
                "-ltorch_cpu",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{cxx} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        os.replace(tmp_so, target)  # atomic: concurrent builders each install a complete file
    return target


def turned_off() -> bool:
    """True when ``LAYERSCOPE_FAST_SCAN`` is ``torch`` (or ``0``, ``off``, ``none``): the kernels are
    not built or used, on purpose."""
    return os.environ.get("LAYERSCOPE_FAST_SCAN", "").lower() in ("torch", "0", "off", "none")


def load() -> Kernels | None:
    """``torch.ops.layerscope`` (the four kernel ops), building them on first use; None if unavailable.

    Unavailable when ``LAYERSCOPE_FAST_SCAN=torch``, no C++ compiler is on PATH, or the build
    fails (then a warning is issued once and ``load_error()`` says why).
    """
    global _ops, _load_error, _warned
    if turned_off():
        return None
    if _ops is not None or _load_error is not None:
        return _ops
    with _lock:
        if _ops is not None or _load_error is not None:
            return _ops
        try:
            cxx = compiler()
            if cxx is None:
                raise RuntimeError("no C++ compiler (g++, c++, clang++ or $CXX) on PATH")
            torch.ops.load_library(str(_build(cxx)))
            _ops = cast(Kernels, torch.ops.layerscope)  # ops registered by the library just loaded
        except Exception as exc:  # noqa: BLE001 - any failure → the pure-PyTorch path, with a warning
            _load_error = f"{type(exc).__name__}: {exc}"
            if not _warned:
                warnings.warn(
                    f"layerscope fast_scan: compiled CPU kernel unavailable, using the "
                    f"pure-PyTorch scan ({_load_error})",
                    RuntimeWarning,
                    stacklevel=2,
                )
                _warned = True
    return _ops


def load_error() -> str | None:
    """Why ``load()`` returned None (None if it has not failed)."""
    return _load_error


def _ops_or_raise() -> Kernels:
    ops = load()
    if ops is None:
        raise RuntimeError(f"compiled fast-scan kernels unavailable: {_load_error}")
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
