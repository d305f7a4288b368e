"""Fast CPU training paths for transformers' Mamba and Mamba-2 mixers: ``install`` / ``uninstall``.

On CPU (no ``mamba_ssm``) transformers runs Mamba's selective scan as a Python loop over
[B, D, L, N] tensors (~10 s per training step at batch 64 × L 40, ~830K parameters) and
Mamba-2's chunked scan as dozens of small einsum / segsum ops. ``install(model)`` swaps every
``MambaMixer`` / ``Mamba2Mixer`` in ``model`` for ``FastMambaMixer`` / ``FastMamba2Mixer``
(subclasses: parameters, state_dict keys, hooks and ``isinstance`` unchanged; ``uninstall``
reverts) whose forward computes the same function as the library's.

The fast path is taken only when it is exactly the library's computation on the CPU: no
``cache`` (generation), no attention mask, CPU float32 / float64 without autocast, SiLU, a plain hook-free conv
(Mamba-2: one group). Otherwise: transformers' own forward (caches, CUDA — where transformers
uses the ``mamba_ssm`` / ``causal_conv1d`` kernels when installed —, other dtypes, Mamba-2
edge cases), or, for Mamba with a mask / wrapped conv / no compiled kernel, ``mamba_mixer_forward``
(plain torch ops, the kernel scan or ``selective_scan_torch``).

Conv1D removal (``models_store.conv1d``) swaps ``mixer.conv1d``'s weights in place; the kernels
read them live. If ``mixer.conv1d`` is replaced by another module, wrapped, or carries forward
hooks, the module itself is called, so any such edit takes effect.

The parts, one job each (their names are re-exported here):

- ``models_store.scan``: the selective scan — ``selective_scan_ref`` (the plain sequential
  reference), ``selective_scan_torch`` (pure PyTorch), ``selective_scan_states`` (from a given
  state, for patching), ``selective_scan`` (differentiable, on the compiled kernel when there
  is one), ``kernel_available``;
- ``models_store.plain_mixers``: the mixers in plain ops — ``mamba_mixer_forward`` (the unfused
  fallback), ``mamba_mixer_reference`` / ``mamba2_mixer_reference`` (the references the tests
  check the fast paths against), ``causal_conv``;
- ``models_store.fused_mixers``: the fast path — each mixer between its projections as one
  autograd node on the compiled kernels (``fused_mixer_forward``, ``fused_mamba2_forward``);
- ``models_store.fast_scan_cpu`` (sources in ``csrc/``): the compiled kernels as typed torch ops;
- this module: the mixer subclasses that route each call, and ``install`` / ``uninstall``.

Not supported on the fast path: double backward (``create_graph=True`` through a mixer).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

from models_store.fused_mixers import fusable, fusable2, fused_mamba2_forward, fused_mixer_forward
from models_store.plain_mixers import causal_conv, mamba2_mixer_reference, mamba_mixer_forward, mamba_mixer_reference
from models_store.scan import (
    kernel_available,
    selective_scan,
    selective_scan_ref,
    selective_scan_states,
    selective_scan_torch,
)

__all__ = [
    "FastMambaMixer",
    "install",
    "uninstall",
    "installed",
    "kernel_available",
    "selective_scan",
    "selective_scan_ref",
    "selective_scan_torch",
    "selective_scan_states",
    "mamba_mixer_reference",
    "mamba2_mixer_reference",
    "FastMamba2Mixer",
    # re-exported from the parts (imported from here by callers and tests)
    "causal_conv",
    "fused_mamba2_forward",
    "fused_mixer_forward",
    "mamba_mixer_forward",
]


class FastMambaMixer(MambaMixer):
    """``MambaMixer`` whose CPU forward (no cache, float32/float64) uses the fast kernels.

    Instances are made by ``install`` (class swap of an existing mixer), never constructed.
    """

    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        if (
            cache is not None
            or kwargs
            or hidden_states.device.type != "cpu"
            or hidden_states.dtype not in (torch.float32, torch.float64)
            or torch.is_autocast_enabled("cpu")  # a bfloat16 forward (science.precision): transformers' ops
        ):
            return super().forward(hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)
        if fusable(self, hidden_states, attention_mask):
            return fused_mixer_forward(self, hidden_states)
        return mamba_mixer_forward(self, hidden_states, attention_mask)


class FastMamba2Mixer(Mamba2Mixer):
    """``Mamba2Mixer`` whose CPU forward (no cache, no mask, one group) uses the fast kernels.

    Made by ``install`` (class swap); every other call goes to transformers' forward.
    """

    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        if (
            cache is None
            and not kwargs
            and hidden_states.device.type == "cpu"
            and hidden_states.dtype in (torch.float32, torch.float64)
            and not torch.is_autocast_enabled("cpu")  # a bfloat16 forward (science.precision): transformers' ops
            and fusable2(self, hidden_states, attention_mask)
        ):
            return fused_mamba2_forward(self, hidden_states)
        return super().forward(hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)


_SWAPS = {MambaMixer: FastMambaMixer, Mamba2Mixer: FastMamba2Mixer}


def install(model: nn.Module) -> int:
    """Give every ``MambaMixer`` / ``Mamba2Mixer`` in ``model`` the fast CPU forward (idempotent).

    Returns the number of fast mixers in ``model`` (0 for models without Mamba mixers: a
    no-op). Weights, parameters, hooks and state_dict keys are unchanged; ``uninstall``
    reverts. Safe to call on any model and on any device (non-CPU calls go to transformers).
    """
    n = 0
    for module in model.modules():
        fast = _SWAPS.get(type(module))
        if fast is not None:
            module.__class__ = fast
        if isinstance(module, (FastMambaMixer, FastMamba2Mixer)):
            n += 1
    return n


def uninstall(model: nn.Module) -> int:
    """Revert ``install``: every fast mixer back to its transformers class. Returns the count."""
    back = {v: k for k, v in _SWAPS.items()}
    n = 0
    for module in model.modules():
        orig = back.get(type(module))
        if orig is not None:
            module.__class__ = orig
            n += 1
    return n


def installed(model: nn.Module) -> bool:
    """Whether ``model`` has at least one fast mixer."""
    return any(isinstance(m, (FastMambaMixer, FastMamba2Mixer)) for m in model.modules())
