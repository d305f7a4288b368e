"""The compiled scan's C++ sources are files of their own in models_store/csrc/, shipped as package
data and compiled from exactly that text; the ops are bound with TORCH_LIBRARY, not ctypes."""

import tomllib
from pathlib import Path

from models_store import fast_scan_cpu

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_sources_are_csrc_files_declared_as_package_data():
    assert Path(fast_scan_cpu.__file__).parent / "csrc" == fast_scan_cpu.CSRC
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for name, text in fast_scan_cpu._SOURCES.items():
        src = fast_scan_cpu.CSRC / name
        assert src.read_text(encoding="utf-8") == text
        assert any(src.relative_to(ROOT / "models_store").match(pattern) for pattern in data["models_store"])


def test_ops_are_bound_with_typed_schemas_not_ctypes():
    ops = fast_scan_cpu._SOURCES["fast_scan_ops.cpp"]
    assert "TORCH_LIBRARY(layerscope, m)" in ops
    for op in ("conv_fwd(Tensor x", "conv_bwd(Tensor x", "scan_fwd(Tensor x", "scan_bwd(Tensor x"):
        assert op in ops
    assert 'extern "C"' not in ops + fast_scan_cpu._SOURCES["fast_scan_kernels.h"]
    assert "ctypes" not in Path(fast_scan_cpu.__file__).read_text()
