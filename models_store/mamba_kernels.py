"""Which path runs our Mamba / Mamba-2 mixers on CUDA, and a way to force the pure-PyTorch one.

transformers (5.20-5.24) binds each of its Mamba kernels when ``modeling_mamba`` /
``modeling_mamba2`` is imported (``use_kernel_func_from_hub_with_fallback``): ``mamba_ssm``'s and
``causal_conv1d``'s functions where those packages import (the ``gpu`` / ``cuda`` extra on a CUDA
machine), its own PyTorch functions otherwise. On CPU our mixers take the compiled fast path
(``models_store.fast_scan``); on CUDA transformers' forward runs, on the kernels when they were
bound. Each bound function keeps the PyTorch one as ``__wrapped__`` (``functools.wraps``), which
:func:`torch_path` puts in its place for a while: the two paths on the same weights and inputs
(``tests/test_mamba_kernels_cuda.py``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from torch import nn

KERNEL_PACKAGES = ("mamba_ssm", "causal_conv1d")


def cuda_kernels_importable() -> bool:
    """Whether ``mamba_ssm`` and ``causal_conv1d`` are installed (found, not imported)."""
    return all(importlib.util.find_spec(p) is not None for p in KERNEL_PACKAGES)


def _modules() -> list[ModuleType]:
    from transformers.models.mamba import modeling_mamba
    from transformers.models.mamba2 import modeling_mamba2

    return [modeling_mamba, modeling_mamba2]


def _bound(module: ModuleType) -> dict[str, object]:
    """The module's kernel-bound functions: its own functions that wrap a PyTorch one."""
    return {
        name: f
        for name, f in vars(module).items()
        if callable(f) and hasattr(f, "__wrapped__") and getattr(f, "__module__", None) == module.__name__
    }


def mixer_path(model: nn.Module, precision: str = "fp32") -> str | None:
    """What runs ``model``'s Mamba / Mamba-2 mixers where its parameters are, at ``precision`` (the
    forward passes', ``science.precision``): ``"cpu fast path"`` (the compiled kernels, fp32 only:
    under bf16 autocast they step aside), ``"mamba-ssm kernels"``, ``"pure PyTorch"``; None for a
    model without such mixers."""
    from transformers.models.mamba.modeling_mamba import MambaMixer
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

    mixers = [m for m in model.modules() if isinstance(m, (MambaMixer, Mamba2Mixer))]
    if not mixers:
        return None
    device = next(mixers[0].parameters()).device.type
    if device == "cpu":
        from models_store.scan import kernel_available

        return "cpu fast path" if precision == "fp32" and kernel_available() else "pure PyTorch"
    if device == "cuda" and cuda_kernels_importable():
        return "mamba-ssm kernels"
    return "pure PyTorch"


@contextmanager
def torch_path() -> Iterator[int]:
    """Inside the block transformers' Mamba / Mamba-2 mixers call their PyTorch functions, not the
    kernels bound at import; yields how many functions were swapped (each kernel-bound function
    of the two modules, whatever it was bound to). Process-wide while it lasts (module attributes): for tests and benchmarks, not
    for a worker running jobs in threads."""
    saved: list[tuple[ModuleType, str, object]] = []
    try:
        for module in _modules():
            for name, f in _bound(module).items():
                plain = f.__wrapped__  # type: ignore[attr-defined]  # hasattr-checked in _bound
                saved.append((module, name, f))
                setattr(module, name, plain)
        yield len(saved)
    finally:
        for module, name, f in saved:
            setattr(module, name, f)
