"""The Mamba / Mamba-2 mixers in plain torch ops: the unfused forward and the references.

- ``mamba_mixer_forward``: transformers' ``MambaMixer.forward`` without a cache, with any scan
  backend (``models_store.scan.selective_scan``) and transformers' padding mask; the fast mixer
  (``models_store.fast_scan.FastMambaMixer``) falls back to it when the fused kernels do not
  apply (a mask, a replaced / wrapped / hooked conv, no compiled kernel).
- ``mamba_mixer_reference`` / ``mamba2_mixer_reference``: the mixers on the plain sequential
  scan, the references the fast paths are tested against (tests/test_fast_scan.py).
- ``causal_conv`` / ``is_plain_conv``: the mixer's causal depthwise conv on channels-last
  input, and whether a conv module is the unmodified one the kernels may read.

Shapes: hidden [B, L, d_model]; inner width D = expand·d_model; state N; Δ-rank R; heads H of
dim P (Mamba-2).
"""

from __future__ import annotations

from typing import TypeGuard

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

from models_store.scan import selective_scan, selective_scan_ref

__all__ = [
    "causal_conv",
    "is_plain_conv",
    "mamba2_mixer_reference",
    "mamba_mixer_forward",
    "mamba_mixer_reference",
]


def _mask(h: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """transformers' ``apply_mask_to_padding_states``: zero padded positions of h [B, L, C]."""
    if attention_mask is None:
        return h
    return (h * attention_mask[:, :, None]).to(h.dtype)


def is_plain_conv(conv: nn.Module) -> TypeGuard[nn.Conv1d]:
    """True if ``conv`` is an unmodified, hook-free causal depthwise ``nn.Conv1d``."""
    if type(conv) is not nn.Conv1d:
        return False
    glob = nn.modules.module
    if (
        conv._forward_hooks
        or conv._forward_pre_hooks
        or getattr(glob, "_global_forward_hooks", None)
        or getattr(glob, "_global_forward_pre_hooks", None)
    ):
        return False
    k = conv.kernel_size[0]
    return (
        conv.groups == conv.in_channels == conv.out_channels
        and conv.stride == (1,)
        and conv.dilation == (1,)
        and conv.padding == (k - 1,)
        and conv.padding_mode == "zeros"
    )


def causal_conv(conv: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The mixer's causal depthwise conv on x [B, L, D] (channels last) → [B, L, D].

    Equals ``conv(x.transpose(1, 2))[..., :L].transpose(1, 2)`` (what transformers computes
    with ``conv.weight`` / ``conv.bias``). For a plain ``nn.Conv1d`` it is done as k shifted
    multiply-adds on the live weights; anything else (a replaced, wrapped or hooked module)
    is called as a module.
    """
    L = x.shape[1]
    if not is_plain_conv(conv):
        return conv(x.transpose(1, 2))[..., :L].transpose(1, 2)
    w = conv.weight[:, 0, :]  # (D, k)
    k = w.shape[1]
    xp = F.pad(x, (0, 0, k - 1, 0))  # (B, L + k - 1, D), causal left padding
    out = xp[:, k - 1 :] * w[:, k - 1]  # tap k-1 reads position t
    for j in range(k - 1):
        out = out + xp[:, j : j + L] * w[:, j]  # tap j reads position t - (k-1-j)
    if conv.bias is not None:
        out = out + conv.bias
    return out  # (B, L, D)


def mamba_mixer_forward(
    mixer: MambaMixer, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, backend: str = "auto"
) -> torch.Tensor:
    """transformers' ``MambaMixer.forward`` without a cache, on hidden_states [B, L, d_model].

    Same function as the library's pure-PyTorch path; ``backend`` picks the scan (see
    ``selective_scan``). Returns [B, L, d_model].
    """
    dtype = hidden_states.dtype
    R, N = mixer.time_step_rank, mixer.ssm_state_size
    hs = _mask(hidden_states, attention_mask)
    x, z = mixer.in_proj(hs).chunk(2, dim=-1)  # x, z: (B, L, D)
    x = mixer.act(causal_conv(mixer.conv1d, x))  # (B, L, D)
    x = _mask(x, attention_mask)
    ts, Bm, Cm = torch.split(mixer.x_proj(x), [R, N, N], dim=-1)  # (B, L, R), (B, L, N), (B, L, N)
    dt = F.softplus(mixer.dt_proj(ts))  # (B, L, D)
    A = -torch.exp(mixer.A_log.to(dt.dtype))  # (D, N)
    y = selective_scan(x, dt, A, Bm, Cm, backend=backend)  # (B, L, D)
    y = (y + x * mixer.D) * F.silu(z)  # (B, L, D)
    return mixer.out_proj(y.to(dtype))  # (B, L, d_model)


def mamba_mixer_reference(mixer: MambaMixer, hidden_states: torch.Tensor) -> torch.Tensor:
    """The Mamba mixer (no cache, no mask) in plain ops: conv as a module call, sequential scan.

    The reference the fast paths are tested against; exact in the input's dtype (transformers'
    own forward rounds A, D and the dt bias to float32 even for float64 models).
    """
    L = hidden_states.shape[1]
    R, N = mixer.time_step_rank, mixer.ssm_state_size
    x, z = mixer.in_proj(hidden_states).chunk(2, dim=-1)  # (B, L, D) each
    x = mixer.act(mixer.conv1d(x.transpose(1, 2))[..., :L].transpose(1, 2))  # (B, L, D)
    ts, Bm, Cm = torch.split(mixer.x_proj(x), [R, N, N], dim=-1)
    dt = F.softplus(mixer.dt_proj(ts))  # (B, L, D)
    y = selective_scan_ref(x, dt, -torch.exp(mixer.A_log), Bm, Cm)  # (B, L, D)
    return mixer.out_proj((y + x * mixer.D) * F.silu(z))


def mamba2_mixer_reference(mixer: Mamba2Mixer, hidden_states: torch.Tensor) -> torch.Tensor:
    """The Mamba-2 mixer (no cache, no mask, one group) in plain ops with the sequential scan.

    Exact in the input's dtype up to the gated RMSNorm, which is the mixer's own module
    (transformers computes it in float32; its torch path also runs the scan in float32).
    """
    Bsz, L, _ = hidden_states.shape
    D, H, P, N = mixer.intermediate_size, mixer.num_heads, mixer.head_dim, mixer.ssm_state_size
    z, xBC, dt = mixer.in_proj(hidden_states).split([D, mixer.conv_dim, H], dim=-1)
    xBC = mixer.act(mixer.conv1d(xBC.transpose(1, 2))[..., :L].transpose(1, 2))  # (B, L, conv_dim)
    x, Bm, Cm = xBC.split([D, N, N], dim=-1)
    lo, hi = mixer.time_step_limit
    dt = F.softplus(dt + mixer.dt_bias).clamp(lo, hi)  # (B, L, H)
    A = (-torch.exp(mixer.A_log))[:, None].expand(H, N).repeat_interleave(P, dim=0)  # (D, N)
    y = selective_scan_ref(x, dt.repeat_interleave(P, dim=-1), A, Bm, Cm)  # (B, L, D)
    y = (y + x * mixer.D.repeat_interleave(P)) * F.silu(z)
    return mixer.out_proj(mixer.norm(y).to(hidden_states.dtype))  # the library's grouped RMSNorm
