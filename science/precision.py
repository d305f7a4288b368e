"""The precision of a measurement's forward passes: ``fp32`` (the default) or ``bf16``
(docs/SCIENCE.md#precision).

``bf16`` runs the model's forward passes under ``torch.autocast(dtype=torch.bfloat16)`` (matmuls
and convolutions in bfloat16, reductions and norms as autocast keeps them) on the model's device
type — CUDA, or CPU, whose autocast supports bfloat16 too. Everything else stays float32 or
float64: the captured states are cast to float32 (``science.captured.capture``), edits and patches
run inside their hooks with autocast off (``models_store.capture.edit_layers``), and probes,
edit fits and statistics never run under autocast (they sit outside :func:`forwards`).

A measurement sets its precision once with :func:`forward_precision` (a context variable, so
threads and nested calls each see their own); the code that calls the model wraps each forward
in :func:`forwards`, which at ``fp32`` changes nothing but where a CPU's large linear layers are
multiplied (:mod:`models_store.cpu_matmul`: oneDNN on an AMD CPU with AVX-512, measurement
version 4); elsewhere fp32 rows are those of the code before this setting, bit for bit.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Literal, ParamSpec, TypeVar

import torch

from models_store import cpu_matmul

Precision = Literal["fp32", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")
DEFAULT_PRECISION: Precision = "fp32"

P = ParamSpec("P")
R = TypeVar("R")

_current: ContextVar[str] = ContextVar("layerscope_forward_precision", default=DEFAULT_PRECISION)
log = logging.getLogger(__name__)
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs with bfloat16 matmul units


@functools.cache
def _warn_if_slow_on_this_cpu() -> None:
    """Say once a process when ``bf16`` forward passes run on a CPU that has no bfloat16 matmul
    units: measured ~2.4× slower than fp32 there (BENCHMARKS.md), where it is ~3× faster on one that has."""
    from models_store.compiled_ops import cpu_flags

    flags = cpu_flags()
    if flags.startswith("flags") and not set(BF16_CPU_FLAGS) & set(flags.split()):
        log.warning(
            "layerscope: --precision bf16 on a CPU without %s: forward passes run slower than at fp32 here "
            "(bfloat16 is emulated); it saves time on a GPU or a CPU with them",
            " or ".join(BF16_CPU_FLAGS),
        )


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`.

    Raises:
        ValueError: another value (the message names the allowed ones).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {list(PRECISIONS)}")
    return precision


def current_precision() -> str:
    """The precision set by the innermost :func:`forward_precision` (``fp32`` outside any)."""
    return _current.get()


@contextmanager
def forward_precision(precision: str) -> Iterator[None]:
    """Inside the block, :func:`forwards` runs forward passes at ``precision``.

    Raises:
        ValueError: ``precision`` not one of :data:`PRECISIONS`.
    """
    token = _current.set(check_precision(precision))
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def forwards(device: torch.device | str) -> Iterator[None]:
    """Run the forward passes inside at the current precision on ``device``'s type: bfloat16
    autocast at ``bf16`` (without autocast's weight cache); at ``fp32`` on the CPU, the large linear
    layers through oneDNN where torch's BLAS is slow (:mod:`models_store.cpu_matmul`), nothing else.

    Raises:
        ValueError: an unknown ``LAYERSCOPE_CPU_MATMUL`` value (before the block runs).
    """
    if _current.get() != "bf16":
        with cpu_matmul.linear_layers() if torch.device(device).type == "cpu" else nullcontext():
            yield
        return
    if torch.device(device).type == "cpu":
        _warn_if_slow_on_this_cpu()
    # cache_enabled=False: autocast would otherwise keep a bfloat16 copy of every weight until the
    # context exits (half the model's bytes again, which the memory bound does not count); a forward
    # pass uses each weight once (every built-in block, nn.LSTM/GRU, transformers' blocks), so it is
    # cast no more often, and the bits are the same
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False):
        yield


def at_precision(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`forward_precision` of its own ``precision`` keyword (``fp32`` when
    not given): a measurement function declares ``precision`` and its body runs at it.

    Raises:
        ValueError: ``precision`` not one of :data:`PRECISIONS` (before ``fn`` runs).
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with forward_precision(str(kwargs.get("precision", DEFAULT_PRECISION))):
            return fn(*args, **kwargs)

    return run
