"""When a test of a compiled kernel may skip, and when it must fail instead.

The CPU scan kernel (``models_store.fast_scan_cpu``) builds wherever a C++ compiler is on PATH, so
there a kernel that did not build is a failure, not a skip: a broken build must not pass CI
unseen. In CI (the ``CI`` variable, as for the lab services: ``tests.conftest.in_ci``) the kernel
is required even where no compiler is found (``make test`` installs g++ where none is). A kernel
test skips only outside CI where no compiler exists, or where ``LAYERSCOPE_FAST_SCAN=torch`` turns
the kernel off on purpose (in CI that fails too).

mamba-ssm's kernels need CUDA: their tests skip only where no CUDA device exists; on a machine with
one, mamba-ssm missing (the ``cuda`` extra not installed) is a failure.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import in_ci


def cpu_kernel_verdict() -> tuple[str, str]:
    """("ok" | "skip" | "fail", why) for the compiled CPU scan kernel (built here on first use)."""
    from models_store import fast_scan_cpu
    from models_store.scan import kernel_available

    required = in_ci()
    if fast_scan_cpu.turned_off():
        why = "LAYERSCOPE_FAST_SCAN turns the compiled kernel off"
        return ("fail", f"{why}, but CI requires it") if required else ("skip", why)
    if kernel_available():
        return "ok", "built and loaded"
    error = fast_scan_cpu.load_error()
    cxx = fast_scan_cpu.compiler()
    if cxx is not None:
        return "fail", f"the compiled kernel did not build although a C++ compiler ({cxx}) is here: {error}"
    if required:
        return "fail", f"CI requires the compiled kernel but it did not build: {error}"
    return "skip", f"no compiled kernel: {error}"


def require_cpu_kernel() -> None:
    """Skip or fail the calling test as :func:`cpu_kernel_verdict` says; return when the kernel is loaded."""
    verdict, why = cpu_kernel_verdict()
    if verdict == "fail":
        pytest.fail(why, pytrace=False)
    if verdict == "skip":
        pytest.skip(why)


def require_probe_kernel() -> None:
    """The compiled probe objective (``science.probes.onepass``) under the same rule as the scan
    kernel: it must build where a C++ compiler is, and in CI; skip otherwise, or where
    ``LAYERSCOPE_PROBE_KERNEL=torch`` turns it off outside CI."""
    import torch

    from models_store.compiled_ops import compiler
    from science.probes import onepass

    if onepass.turned_off():
        why = "LAYERSCOPE_PROBE_KERNEL turns the compiled probe objective off"
        if in_ci():
            pytest.fail(f"{why}, but CI requires it", pytrace=False)
        pytest.skip(why)
    if onepass.applies(torch.zeros(1, 1), 2):
        return
    if compiler() is not None or in_ci():
        pytest.fail(f"the compiled probe objective did not build: {onepass.load_error()}", pytrace=False)
    pytest.skip(f"no compiled probe objective: {onepass.load_error()}")


def require_cuda_kernels() -> None:
    """Skip where no CUDA device exists; fail where one does but mamba-ssm is not installed."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if importlib.util.find_spec("mamba_ssm") is None:
        pytest.fail("a CUDA device is here but mamba-ssm is not installed: pip install -e '.[cuda]'", pytrace=False)
