"""A kernel test fails, not skips, when the compiled kernel should have built
(tests/compiled_kernels.py): every case of the rule, with the machine's state stood in for."""

from __future__ import annotations

import pytest

from models_store import fast_scan_cpu, scan
from tests.compiled_kernels import cpu_kernel_verdict


@pytest.fixture
def machine(monkeypatch):
    """``machine(loaded=, cxx=, required=, off=)`` sets what the rule reads (``required``: in CI)."""

    def set_up(*, loaded: bool, cxx: str | None, required: bool = False, off: bool = False) -> None:
        monkeypatch.setattr(scan, "kernel_available", lambda: loaded)
        monkeypatch.setattr(fast_scan_cpu, "compiler", lambda: cxx)
        monkeypatch.setattr(fast_scan_cpu, "load_error", lambda: None if loaded else "RuntimeError: g++ failed (1)")
        monkeypatch.setenv("CI", "true" if required else "")
        if off:
            monkeypatch.setenv("LAYERSCOPE_FAST_SCAN", "torch")
        else:
            monkeypatch.delenv("LAYERSCOPE_FAST_SCAN", raising=False)

    return set_up


def test_a_loaded_kernel_is_tested(machine) -> None:
    machine(loaded=True, cxx="g++")
    assert cpu_kernel_verdict()[0] == "ok"


def test_a_failed_build_with_a_compiler_here_fails(machine) -> None:
    machine(loaded=False, cxx="g++")
    verdict, why = cpu_kernel_verdict()
    assert verdict == "fail" and "g++" in why and "g++ failed (1)" in why


def test_no_compiler_skips_outside_ci_and_fails_in_it(machine) -> None:
    machine(loaded=False, cxx=None)
    assert cpu_kernel_verdict()[0] == "skip"
    machine(loaded=False, cxx=None, required=True)
    verdict, why = cpu_kernel_verdict()
    assert verdict == "fail" and "CI" in why


def test_turned_off_on_purpose_skips_outside_ci_and_fails_in_it(machine) -> None:
    machine(loaded=False, cxx="g++", off=True)
    assert cpu_kernel_verdict()[0] == "skip"
    machine(loaded=False, cxx="g++", off=True, required=True)
    verdict, why = cpu_kernel_verdict()
    assert verdict == "fail" and "LAYERSCOPE_FAST_SCAN" in why


def test_turned_off_is_read_from_the_environment(monkeypatch) -> None:
    for value, off in (("torch", True), ("OFF", True), ("0", True), ("", False), ("kernel", False)):
        monkeypatch.setenv("LAYERSCOPE_FAST_SCAN", value)
        assert fast_scan_cpu.turned_off() is off, value
