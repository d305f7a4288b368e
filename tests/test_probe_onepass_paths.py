"""The probe kernel's two paths (science/probes/csrc/probe_objective_kernel.h): the SIMD build
(AVX2 + FMA, what -march=native picks here) and the scalar one (what a CPU without AVX2 builds:
an ARM Mac, an old x86) give the same sums within float32 rounding on 63 problems (2–8 classes,
1–160 features, 7–3,000 rows, a row stride past the rows). Built standalone (no torch headers)
from tests/data/probe_kernel_harness.cpp."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest

from models_store.compiled_ops import compiler
from science.probes import onepass
from tests.conftest import in_ci

HARNESS = Path(__file__).with_name("data") / "probe_kernel_harness.cpp"


def _run(cxx: str, flags: list[str], out: Path) -> list[list[float]]:
    subprocess.run(
        [cxx, "-std=c++17", *flags, f"-I{onepass.CSRC}", str(HARNESS), "-o", str(out)], check=True, timeout=300
    )
    lines = subprocess.run([str(out)], check=True, capture_output=True, text=True, timeout=120).stdout.splitlines()
    return [[float(v) for v in line.split()] for line in lines]


def test_simd_and_scalar_builds_agree(tmp_path):
    cxx = compiler()
    if cxx is None:
        if in_ci():
            pytest.fail("CI requires a C++ compiler for the probe kernel", pytrace=False)
        pytest.skip("no C++ compiler")
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the SIMD path is x86's AVX2; this CPU builds the scalar one only")
    simd = _run(cxx, ["-O3", "-march=native", "-ffp-contract=fast"], tmp_path / "simd")
    scalar = _run(cxx, ["-O2", "-mno-avx2", "-mno-fma"], tmp_path / "scalar")
    assert len(simd) == len(scalar) == 63
    for a, b in zip(simd, scalar, strict=True):
        assert a[:3] == b[:3]  # the same problem (K, D, N)
        for u, v in zip(a[3:], b[3:], strict=True):
            assert abs(u - v) <= 1e-5 * max(abs(u), 1e-12), (a[:3], u, v)
