"""A measurement's float32 linear layers on the CPU through oneDNN where torch's BLAS runs at half speed.

PyTorch's x86 builds multiply float32 matrices with Intel's MKL, which on AMD CPUs takes its AVX2
code path even where the core has AVX-512 (Zen 4, Zen 5): measured on a Zen 5 EPYC core, a
``[2624, 1024] × [1024, 4096]`` product ran at 85 GFLOP/s through MKL and 140–200 through oneDNN
(``torch._C._nn.mkldnn_linear``, the same library torch ships for its bfloat16 matmuls); a 4-block
GPT-NeoX forward at width 1024 took 0.57–0.61 of the time (``benchmarks/bench_cpu_matmul.py``,
BENCHMARKS.md "Lab scale"). On Intel CPUs MKL's own AVX-512 path runs at that rate already, and on
CPUs without AVX-512 there is nothing to gain.

:func:`linear_layers` is entered by every forward pass of a measurement at float32
(:func:`science.precision.forwards`): inside it, ``F.linear`` with a float32 CPU weight of at least
:data:`MIN_WEIGHT_ELEMENTS` elements, with gradients off, runs as oneDNN's product (the same
``x·Wᵀ + b``, its sums grouped otherwise: equal to the BLAS product within float rounding, not bit for
bit). Which route a layer takes depends on its weight alone, never on how many rows it is given, so
a row's output does not depend on its batch (oneDNN's rows are independent of the batch and of the
thread count from 2 rows up: ``tests/test_cpu_matmul.py``). Smaller layers (every model of the
paper-sized study) keep the BLAS route: there oneDNN's product and its per-call conversions were
slower about as often as faster.

``LAYERSCOPE_CPU_MATMUL``: ``auto`` (default: oneDNN on an AMD CPU with AVX-512, BLAS elsewhere),
``onednn`` or ``blas``. Rows made with oneDNN are measurement version 4's
(docs/SCIENCE.md#measurement-versions).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from models_store.compiled_ops import cpu_flags

ENV_VAR = "LAYERSCOPE_CPU_MATMUL"
CHOICES = ("auto", "onednn", "blas")  # store.settings.Settings.cpu_matmul declares the same
# 512 × 512: below it oneDNN was as often slower as faster on the Zen 5 (2.0–2.6× slower with 128
# input features, 9× on 8 rows; BENCHMARKS.md), and the ~830K-parameter models of the paper preset
# (largest linear weights 65,536–133,408) keep version 3's bits
MIN_WEIGHT_ELEMENTS = 512 * 512


def cpu_vendor() -> str:
    """The CPU's ``vendor_id`` from ``/proc/cpuinfo`` (``AuthenticAMD``, ``GenuineIntel``), or ``""``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def setting() -> str:
    """``LAYERSCOPE_CPU_MATMUL`` (``auto`` when unset or empty).

    Raises:
        ValueError: a value not in :data:`CHOICES` (the message names the setting and the choices).
    """
    value = os.environ.get(ENV_VAR, "") or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV_VAR}={value!r}: expected one of {list(CHOICES)}")
    return value


@functools.cache
def amd_with_avx512() -> bool:
    """Whether this CPU is an AMD one with AVX-512 (``/proc/cpuinfo``, read once a process: a
    measurement enters :func:`linear_layers` once a batch)."""
    return cpu_vendor() == "AuthenticAMD" and "avx512f" in cpu_flags().split()


def uses_onednn() -> bool:
    """Whether a measurement's large float32 CPU linear layers run through oneDNN here: the setting
    (``auto``: an AMD CPU with AVX-512), and torch built with oneDNN.

    Raises:
        ValueError: an unknown ``LAYERSCOPE_CPU_MATMUL`` value.
    """
    value = setting()
    if value == "blas" or not torch.backends.mkldnn.is_available():
        return False
    return value == "onednn" or amd_with_avx512()


def takes(x: Tensor, weight: Tensor) -> bool:
    """Whether :class:`OneDnnLinear` routes ``F.linear(x, weight)``: float32 CPU tensors, a 2-D
    weight of at least :data:`MIN_WEIGHT_ELEMENTS`, gradients off (oneDNN's op has no backward)."""
    return (
        not torch.is_grad_enabled()
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.device.type == "cpu"
        and weight.device.type == "cpu"
        and weight.dim() == 2
        and weight.numel() >= MIN_WEIGHT_ELEMENTS
        and x.layout == torch.strided
    )


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x · weightᵀ + bias`` by oneDNN: ``x [..., in]``, ``weight [out, in]``, ``bias [out]`` →
    ``[..., out]`` float32, a new dense tensor (the inputs are converted to oneDNN's tensors per
    call; nothing is cached, so no second copy of the weights outlives the call)."""
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch._C._nn.mkldnn_linear(
        rows.to_mkldnn(), weight.contiguous().to_mkldnn(), None if bias is None else bias.contiguous().to_mkldnn()
    ).to_dense()
    return out.view(*x.shape[:-1], weight.shape[0])


class OneDnnLinear(TorchFunctionMode):
    """A torch function mode: ``F.linear`` calls that :func:`takes` are computed by
    :func:`onednn_linear`; every other call runs as it would."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:  # nn.Linear's forward calls it (it is torch._C._nn.linear)
            x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(x, Tensor) and isinstance(weight, Tensor) and takes(x, weight):
                return onednn_linear(x, weight, bias)
        return func(*args, **kwargs)


@contextmanager
def linear_layers() -> Iterator[None]:
    """Inside the block, large float32 CPU linear layers run through oneDNN where
    :func:`uses_onednn`; elsewhere nothing changes.

    Raises:
        ValueError: an unknown ``LAYERSCOPE_CPU_MATMUL`` value (before the block runs).
    """
    if not uses_onednn():
        yield
        return
    with OneDnnLinear():
        yield


@contextmanager
def route(value: str) -> Iterator[None]:
    """``LAYERSCOPE_CPU_MATMUL`` set to ``value`` inside the block, as it was after it (to compare the
    two routes in one process: ``benchmarks/bench_cpu_matmul.py``, ``checks/cpu_matmul_rows.py``).

    Raises:
        ValueError: ``value`` not in :data:`CHOICES` (nothing is set).
    """
    if value not in CHOICES:
        raise ValueError(f"{ENV_VAR}={value!r}: expected one of {list(CHOICES)}")
    saved = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved
