"""Compiled CPU kernels for the Mamba / Mamba-2 mixers (forward + backward), loaded with ctypes.

Why: on CPU transformers' Mamba scan builds [B, D, L, N] tensors op by op (memory bound, ~10 s
per training step at batch 64 × L 40); fused loops that keep the state in registers / L1 do the
same arithmetic ~25× faster. The kernels are plain C++ in ``fast_scan_cpu.cpp`` beside this module
(package data; no torch headers, no pybind11), so they
build in a few seconds with the system's ``g++`` / ``c++`` (or ``$CXX``) and are cached under
``$LAYERSCOPE_KERNEL_CACHE`` (default ``~/.cache/layerscope/kernels``), keyed by the source, the
flags, the compiler version and the CPU's instruction-set flags (``-march=native`` code never
runs on a CPU it was not built for). Set ``LAYERSCOPE_FAST_SCAN=torch`` to skip them (the
pure-PyTorch paths in ``models_store.fast_scan`` are used instead); a build or load failure does
the same, with one warning.

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

import ctypes
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

import torch

# The kernel source lives beside this module (installed as package data); it is read here so the
# cache key below still covers the exact text that is compiled.
_SOURCE_PATH = Path(__file__).with_name("fast_scan_cpu.cpp")
_SOURCE = _SOURCE_PATH.read_text(encoding="utf-8")

# -march=native: built and cached per CPU (the cache key holds the CPU's flags).
# No -ffast-math (it would link crtfastmath and flush denormals process-wide on some GCCs).
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-ffp-contract=fast",
          "-fPIC", "-shared", "-std=c++17"]

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
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


def _compiler() -> str | None:
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return cand
    return None


def _cache_dir() -> Path:
    root = os.environ.get("LAYERSCOPE_KERNEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "layerscope" / "kernels"


def _build(cxx: str) -> Path:
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256("\0".join([_SOURCE, " ".join(_FLAGS), version, _cpu_flags(),
                                    sys.platform]).encode()).hexdigest()[:16]
    out_dir = _cache_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(out_dir, os.W_OK):
            raise PermissionError(out_dir)
    except OSError:  # read-only home: a per-user temp folder
        out_dir = Path(tempfile.gettempdir()) / f"layerscope-kernels-{os.getuid()}"
        out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"ls_fast_scan_{key}.so"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        src = Path(tmp) / "fast_scan.cpp"
        src.write_text(_SOURCE)
        tmp_so = Path(tmp) / target.name
        proc = subprocess.run([cxx, *_FLAGS, str(src), "-o", str(tmp_so)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"{cxx} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        os.replace(tmp_so, target)  # atomic: concurrent builders each install a complete file
    return target


def _bind(lib: ctypes.CDLL) -> None:
    P, I64, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    sigs = {
        "conv_fwd": [P, I64, P, P, P, I, I64, I64, I64, I64, I],
        "conv_bwd": [P, I64, P, P, P, I, P, I64, P, P, I64, I64, I64, I64, I],
        "scan_fwd": [P, I64, P, P, I, P, P, I64, P, P, I64, P, I64, I64, I64, I64, I],
        "scan_bwd": [P, I64, P, P, I, P, P, I64, P, P, I64, P, P, I64, P, P, P, P, I64, P, P, I64,
                     I64, I64, I64, I64, I],
    }
    for name, args in sigs.items():
        for suffix in ("f32", "f64"):
            fn = getattr(lib, f"ls_{name}_{suffix}")
            fn.argtypes = args
            fn.restype = None


def load() -> ctypes.CDLL | None:
    """The compiled kernel library, building it on first use; None if unavailable.

    Unavailable when ``LAYERSCOPE_FAST_SCAN=torch``, no C++ compiler is on PATH, or the build
    fails (then a warning is issued once and ``load_error()`` says why).
    """
    global _lib, _load_error, _warned
    if os.environ.get("LAYERSCOPE_FAST_SCAN", "").lower() in ("torch", "0", "off", "none"):
        return None
    if _lib is not None or _load_error is not None:
        return _lib
    with _lock:
        if _lib is not None or _load_error is not None:
            return _lib
        try:
            cxx = _compiler()
            if cxx is None:
                raise RuntimeError("no C++ compiler (g++, c++, clang++ or $CXX) on PATH")
            lib = ctypes.CDLL(str(_build(cxx)))
            _bind(lib)
            _lib = lib
        except Exception as exc:  # noqa: BLE001 - any failure → the pure-PyTorch path
            _load_error = f"{type(exc).__name__}: {exc}"
            if not _warned:
                warnings.warn(f"layerscope fast_scan: compiled CPU kernel unavailable, using the "
                              f"pure-PyTorch scan ({_load_error})", RuntimeWarning, stacklevel=2)
                _warned = True
    return _lib


def load_error() -> str | None:
    """Why ``load()`` returned None (None if it has not failed)."""
    return _load_error


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _nthreads() -> int:
    return torch.get_num_threads()


def _fn(name: str, dtype: torch.dtype):
    lib = load()
    if lib is None:
        raise RuntimeError(f"compiled fast-scan kernels unavailable: {_load_error}")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"fast-scan kernels take float32 or float64, got {dtype}")
    return getattr(lib, f"ls_{name}_{'f32' if dtype == torch.float32 else 'f64'}")


def rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(t', ld): t' equals t [B, L, C] with unit stride in C and rows t'[b, l] ld apart
    (t itself when it is such a view, e.g. a column slice of a contiguous [B, L, C'] tensor)."""
    Bsz, L, _ = t.shape
    if t.stride(2) == 1 and t.stride(0) == L * t.stride(1) and t.stride(1) >= t.shape[2]:
        return t, t.stride(1)
    t = t.contiguous()
    return t, t.shape[2]


def conv_forward(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, act: bool) -> torch.Tensor:
    """Causal depthwise conv (+ SiLU if ``act``) of x [B, L, D] (rows may be strided) with
    w [D, k], bias [D] or None → [B, L, D] contiguous. No autograd."""
    x, ldx = rows(x)
    Bsz, L, D = x.shape
    w = w.contiguous()
    out = torch.empty(Bsz, L, D, dtype=x.dtype)
    _fn("conv_fwd", x.dtype)(_ptr(x), ldx, _ptr(w), _ptr(bias), _ptr(out), int(act), Bsz, L, D, w.shape[1],
                             _nthreads())
    return out


def conv_backward(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, gout: torch.Tensor, act: bool,
                  gx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gradients of ``conv_forward``: writes dL/dx into ``gx`` (a [B, L, D] row-strided view,
    e.g. a column slice of the in_proj gradient) and returns (gw [D, k], gb [D] or None)."""
    x, ldx = rows(x)
    Bsz, L, D = x.shape
    w = w.contiguous()
    gout = gout.contiguous()
    ldgx = _out_view(gx, "gx")
    gw = torch.empty_like(w)
    gb = None if bias is None else torch.empty_like(bias)
    _fn("conv_bwd", x.dtype)(_ptr(x), ldx, _ptr(w), _ptr(bias), _ptr(gout), int(act), _ptr(gx), ldgx, _ptr(gw),
                             _ptr(gb), Bsz, L, D, w.shape[1], _nthreads())
    return gw, gb


def _bc(B: torch.Tensor, C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    B, ldb = rows(B)
    C, ldc = rows(C)
    if ldb != ldc:
        B, C = B.contiguous(), C.contiguous()
        ldb = B.shape[2]
    return B, C, ldb


def _mode(A: torch.Tensor, dt_softplus: bool) -> int:
    return int(A.dim() == 1) | (2 if dt_softplus else 0)


def scan_forward(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                 Dskip: torch.Tensor | None = None, z: torch.Tensor | None = None,
                 dt_softplus: bool = False) -> torch.Tensor:
    """out [Bsz, L, D] = (scan(x, dt, A, B, C) + Dskip·x) · silu(z) (Dskip, z optional). No autograd.

    With ``dt_softplus`` the kernel applies torch's ``softplus`` (threshold 20) to dt first.

    x [Bsz, L, D] (rows may be strided); dt [Bsz, L, D]; A [D, N], or [D] for one decay per
    channel (Mamba-2); B, C [Bsz, L, N] (rows may be strided); Dskip [D]; z [Bsz, L, D] (rows
    may be strided); all one float dtype, on the CPU.
    """
    x, ldx = rows(x)
    Bsz, L, D = x.shape
    N = B.shape[2]
    B, C, ldbc = _bc(B, C)
    zv, ldz = (None, 0) if z is None else rows(z)
    dt = dt.contiguous()
    out = torch.empty(Bsz, L, D, dtype=x.dtype)
    _fn("scan_fwd", x.dtype)(_ptr(x), ldx, _ptr(dt), _ptr(A.contiguous()), _mode(A, dt_softplus), _ptr(B),
                             _ptr(C), ldbc, _ptr(Dskip), _ptr(zv), ldz, _ptr(out), Bsz, L, D, N, _nthreads())
    return out


def _out_view(t: torch.Tensor, name: str) -> int:
    v, ld = rows(t)
    if v is not t:
        raise ValueError(f"{name} must be a row-strided [B, L, C] view (unit stride in C)")
    return ld


def scan_backward(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                  gout: torch.Tensor, Dskip: torch.Tensor | None = None, z: torch.Tensor | None = None,
                  gx: torch.Tensor | None = None, gBC: torch.Tensor | None = None,
                  gz: torch.Tensor | None = None, dt_softplus: bool = False) -> dict[str, torch.Tensor]:
    """Gradients of ``scan_forward`` for upstream gout [Bsz, L, D] ("dt" is w.r.t. the dt passed
    in, i.e. the raw dt when ``dt_softplus``).

    Returns {"x", "dt", "A", "B", "C"} (+ "Dskip", "z" when given); the A gradient has A's
    shape. Optional outputs written in place (row-strided views): ``gx`` [Bsz, L, D],
    ``gBC`` [Bsz, L, 2N] (B then C), ``gz`` [Bsz, L, D].
    """
    x, ldx = rows(x)
    Bsz, L, D = x.shape
    N = B.shape[2]
    B, C, ldbc = _bc(B, C)
    zv, ldz = (None, 0) if z is None else rows(z)
    if gx is None:
        gx = torch.empty(Bsz, L, D, dtype=x.dtype)
    ldgx = _out_view(gx, "gx")
    if gBC is None:
        gBC = torch.empty(Bsz, L, 2 * N, dtype=x.dtype)
    if gBC.shape[2] != 2 * N:
        raise ValueError("gBC must be [B, L, 2N]")
    ldg = _out_view(gBC, "gBC")
    if z is not None and gz is None:
        gz = torch.empty(Bsz, L, D, dtype=x.dtype)
    ldgz = 0 if z is None else _out_view(gz, "gz")
    gdt, gA = torch.empty(Bsz, L, D, dtype=x.dtype), torch.empty_like(A)
    gD = None if Dskip is None else torch.empty_like(Dskip)
    gB, gC = gBC[..., :N], gBC[..., N:]
    _fn("scan_bwd", x.dtype)(_ptr(x), ldx, _ptr(dt.contiguous()), _ptr(A.contiguous()), _mode(A, dt_softplus),
                             _ptr(B), _ptr(C), ldbc, _ptr(Dskip), _ptr(zv), ldz, _ptr(gout.contiguous()), _ptr(gx), ldgx,
                             _ptr(gdt), _ptr(gA), _ptr(gB), _ptr(gC), ldg, _ptr(gD),
                             _ptr(gz if z is not None else None), ldgz, Bsz, L, D, N, _nthreads())
    out = {"x": gx, "dt": gdt, "A": gA, "B": gB, "C": gC}
    if Dskip is not None:
        out["Dskip"] = gD
    if z is not None:
        out["z"] = gz
    return out
