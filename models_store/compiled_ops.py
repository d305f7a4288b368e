"""Build, cache and load a library of typed torch ops from C++ sources shipped as package data.

Used by the compiled CPU kernels: the Mamba scan (``models_store.fast_scan_cpu``) and the probe's
one-pass objective (``science.probes.onepass``). Each library is compiled with the system's
``g++`` / ``c++`` (or ``$CXX``) against torch's headers and libraries
(``torch.utils.cpp_extension.include_paths()`` / ``library_paths()``), loaded with
``torch.ops.load_library``, and cached under ``$LAYERSCOPE_KERNEL_CACHE`` (default
``~/.cache/layerscope/kernels``), keyed by the sources, the flags, the compiler version, the torch
version and the CPU's instruction-set flags (``-march=native`` code never runs on a CPU it was not
built for). A library's environment variable set to ``torch`` (or ``0``, ``off``, ``none``) skips
it on purpose; a build or load failure does the same, with one warning: the caller's pure-PyTorch
path runs instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import torch

# -march=native: built and cached per CPU (the cache key holds the CPU's flags).
# No -ffast-math (it would link crtfastmath and flush denormals process-wide on some GCCs).
FLAGS = [
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

OFF_VALUES = ("torch", "0", "off", "none")
log = logging.getLogger(__name__)
_build_seconds = [0.0]  # wall seconds this process spent compiling (kept out of training times)


def seconds_building() -> float:
    """Wall seconds this process has spent compiling kernel libraries so far: a training loop that
    triggers a first build (a Mamba model's first forward on a CPU) subtracts them from its time."""
    return _build_seconds[0]


def cpu_flags() -> str:
    """The CPU's instruction-set flags (``/proc/cpuinfo``), or the platform's processor name."""
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


def cache_dir() -> Path:
    """Where built libraries are kept: ``$LAYERSCOPE_KERNEL_CACHE``, else ``~/.cache/layerscope/kernels``."""
    root = os.environ.get("LAYERSCOPE_KERNEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "layerscope" / "kernels"


def read_sources(csrc: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The exact texts that are compiled (read once, so the cache key covers them)."""
    return {name: (csrc / name).read_text(encoding="utf-8") for name in names}


def build(cxx: str, stem: str, sources: dict[str, str], main: str, what: str = "kernel") -> Path:
    """Compile ``sources`` (``main`` is the translation unit; the others are its headers) into
    ``<cache>/<stem>_<key>.so`` unless that file exists; returns its path.

    Raises:
        RuntimeError: the compiler failed (the end of its error output).
    """
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256(
        "\0".join([*sources.values(), " ".join(FLAGS), version, torch.__version__, cpu_flags(), sys.platform]).encode()
    ).hexdigest()[:16]
    out_dir = cache_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(out_dir, os.W_OK):
            raise PermissionError(out_dir)
    except OSError:  # read-only home: a per-user temp folder
        out_dir = Path(tempfile.gettempdir()) / f"layerscope-kernels-{os.getuid()}"
        out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{stem}_{key}.so"
    if target.exists():
        return target
    from torch.utils import cpp_extension  # here: it imports setuptools, which a runtime may lack

    log.warning("layerscope: building the compiled %s for this CPU with %s (once per machine, ~1 min)", what, cxx)
    began = time.perf_counter()

    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    libs = [a for p in cpp_extension.library_paths() for a in (f"-L{p}", f"-Wl,-rpath,{p}")]
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        for name, text in sources.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        tmp_so = Path(tmp) / target.name
        proc = subprocess.run(
            [cxx, *FLAGS, *includes, str(Path(tmp) / main), "-o", str(tmp_so), *libs, "-lc10", "-ltorch_cpu"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            _build_seconds[0] += time.perf_counter() - began
            raise RuntimeError(f"{cxx} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        os.replace(tmp_so, target)  # atomic: concurrent builders each install a complete file
    _build_seconds[0] += time.perf_counter() - began
    return target


class OpsLibrary:
    """One library of typed torch ops (``torch.ops.<namespace>``), built on first use.

    Args:
        what: how messages name it ("Mamba scan kernel", "probe objective kernel").
        env_var: the variable that turns it off (``torch``, ``0``, ``off``, ``none``).
        stem: the cached file's name before its key.
        sources: file name → text (:func:`read_sources`); ``main`` the one compiled.
        fallback: what runs instead, for the warning ("the pure-PyTorch scan").
        namespace: the ``TORCH_LIBRARY`` namespace the sources register their ops in.
    """

    def __init__(
        self, what: str, env_var: str, stem: str, sources: dict[str, str], main: str, fallback: str, namespace: str
    ) -> None:
        self.what, self.env_var, self.stem, self.sources, self.main = what, env_var, stem, sources, main
        self.fallback, self.namespace = fallback, namespace
        self._lock = threading.Lock()
        self._ops: Any = None
        self._error: str | None = None
        self._warned = False

    def turned_off(self) -> bool:
        """True when the library's variable turns it off on purpose (it is then neither built nor used)."""
        return os.environ.get(self.env_var, "").lower() in OFF_VALUES

    def load(self) -> Any:
        """``torch.ops.<namespace>`` with this library's ops registered, building it on first use;
        None if unavailable: turned off, no C++ compiler on PATH, or the build failed (then a
        warning is issued once and :meth:`error` says why)."""
        if self.turned_off():
            return None
        if self._ops is not None or self._error is not None:
            return self._ops
        with self._lock:
            if self._ops is not None or self._error is not None:
                return self._ops
            try:
                cxx = compiler()
                if cxx is None:
                    raise RuntimeError("no C++ compiler (g++, c++, clang++ or $CXX) on PATH")
                torch.ops.load_library(str(build(cxx, self.stem, self.sources, self.main, self.what)))
                self._ops = getattr(torch.ops, self.namespace)  # ops registered by the library just loaded
            except Exception as exc:  # noqa: BLE001 - any failure → the pure-PyTorch path, with a warning
                self._error = f"{type(exc).__name__}: {exc}"
                if not self._warned:
                    warnings.warn(
                        f"layerscope: the compiled {self.what} is unavailable, using {self.fallback} ({self._error})",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                    self._warned = True
        return self._ops

    def error(self) -> str | None:
        """Why :meth:`load` returned None (None if it has not failed)."""
        return self._error
