"""The fused CPU mixers: everything between in_proj and out_proj as one autograd node.

``fused_mixer_forward`` (Mamba) and ``fused_mamba2_forward`` (Mamba-2) compute transformers'
mixer forward (no cache, no mask) with the compiled kernels of ``models_store.fast_scan_cpu``:

    Mamba:   in_proj → (x, z) → causal depthwise conv1d → SiLU → x_proj → (Δ-rank, B, C) →
             dt_proj → softplus → selective scan → + D·x → · silu(z) → out_proj
    Mamba-2: in_proj → (z, xBC, dt) → conv1d → SiLU → clamp(softplus(dt + dt_bias)) → SSM with
             one decay per head → + D·x → · silu(z) → grouped RMSNorm → out_proj

The part between the projections is one ``torch.autograd.Function`` (``_FusedMixer`` /
``_FusedMixer2``) running two kernels (conv + SiLU; scan + softplus + skip + gate, forward and
backward, the state kept in registers / L1, nothing of size B·D·L·N stored: the backward
recomputes it), with hand-written backward matmuls. in_proj / out_proj zero-pad an odd d_model
(e.g. 173) to a multiple of 16 for MKL (exact zeros). ``fusable`` / ``fusable2`` say whether a
call is exactly this computation (CPU, the mixer's dtype, SiLU, a plain hook-free conv, no mask;
Mamba-2: one group); ``models_store.fast_scan`` routes the calls. Not supported: double backward
(``create_graph=True`` through a mixer).

Shapes: hidden [B, L, d_model]; inner width D = expand·d_model; state N; Δ-rank R; heads H of
dim P (Mamba-2).
"""

from __future__ import annotations

from typing import TypeGuard

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer, MambaRMSNormGated

from models_store import fast_scan_cpu
from models_store.plain_mixers import is_plain_conv
from models_store.scan import kernel_available

__all__ = ["fusable", "fusable2", "fused_mamba2_forward", "fused_mixer_forward"]


class _FusedMixer(torch.autograd.Function):
    """conv1d → SiLU → x_proj → dt_proj → softplus → scan → +D·x → ·silu(z), one autograd node.

    (softplus runs inside the scan kernel, like transformers' ``delta_softplus``.)

    Input xz [B, L, 2D] is in_proj's output (x = first D columns, z = the rest); the output
    [B, L, D] goes to out_proj. The two compiled kernels (conv+SiLU, scan+skip+gate) read and
    write the column halves of xz / its gradient in place (no chunk/cat copies), and the
    backward is written out by hand (matmuls by torch), so the mixer's elementwise work is
    done in two fused passes instead of ~40 separate tensor ops.
    """

    @staticmethod
    def forward(ctx, xz, conv_w, conv_b, Wx, Wdt, bdt, A_log, Dskip, R, N):
        D = xz.shape[-1] // 2
        x = fast_scan_cpu.conv_forward(xz[..., :D], conv_w[:, 0, :], conv_b, act=True)  # (B, L, D)
        Bsz, L, _ = x.shape
        # x_proj as Wx·xᵀ: MKL is ~1.5× faster with the long side (B·L) as the output's columns.
        xdbl = (Wx @ x.view(Bsz * L, D).t()).t().contiguous().view(Bsz, L, -1)  # (B, L, R + 2N)
        dt_raw = F.linear(xdbl[..., :R], Wdt, bdt)  # (B, L, D), softplus applied in the kernel
        A = -torch.exp(A_log)  # (D, N)
        out = fast_scan_cpu.scan_forward(
            x, dt_raw, A, xdbl[..., R : R + N], xdbl[..., R + N :], Dskip, xz[..., D:], dt_softplus=True
        )  # (B, L, D)
        ctx.save_for_backward(xz, conv_w, conv_b, Wx, Wdt, x, xdbl, dt_raw, A, Dskip)
        ctx.R, ctx.N = R, N
        return out

    @staticmethod
    def backward(ctx, gout):
        xz, conv_w, conv_b, Wx, Wdt, x, xdbl, dt_raw, A, Dskip = ctx.saved_tensors
        R, N = ctx.R, ctx.N
        Bsz, L, D = x.shape
        gxz = torch.empty_like(xz)  # (B, L, 2D): x half from the conv, z half from the gate
        gxdbl = torch.empty_like(xdbl)  # (B, L, R + 2N)
        g = fast_scan_cpu.scan_backward(
            x,
            dt_raw,
            A,
            xdbl[..., R : R + N],
            xdbl[..., R + N :],
            gout,
            Dskip,
            xz[..., D:],
            gBC=gxdbl[..., R:],
            gz=gxz[..., D:],
            dt_softplus=True,
        )
        g_dt_raw = g["dt"].view(-1, D)  # (BL, D): through the softplus already
        # The rank-R (R = ceil(d/16)) products in their transposed forms: N = R as an output
        # width is ~4-7× slower in MKL than the same product transposed.
        gxdbl[..., :R] = (Wdt.t() @ g_dt_raw.t()).t().view(Bsz, L, R)
        gWdt = (xdbl[..., :R].reshape(-1, R).t() @ g_dt_raw).t().contiguous()  # (D, R)
        gbdt = g_dt_raw.sum(0)  # (D,)
        gxdbl2 = gxdbl.view(-1, R + 2 * N)
        gx = g["x"].view(-1, D).addmm_(gxdbl2, Wx).view(Bsz, L, D)  # scan path + x_proj path
        gWx = gxdbl2.t() @ x.reshape(-1, D)  # (R + 2N, D)
        gw, gb = fast_scan_cpu.conv_backward(xz[..., :D], conv_w[:, 0, :], conv_b, gx, True, gxz[..., :D])
        return (gxz, gw.view_as(conv_w), gb, gWx, gWdt, gbdt, g["A"] * A, g["Dskip"], None, None)


def _hook_free_linear(m: nn.Module) -> TypeGuard[nn.Linear]:
    return type(m) is nn.Linear and not m._forward_hooks and not m._forward_pre_hooks


def fusable(mixer: MambaMixer, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> bool:
    """Whether the fused kernel path computes this mixer call (else the unfused path does)."""
    if not (
        attention_mask is None
        and mixer.activation == "silu"
        and is_plain_conv(mixer.conv1d)
        and _hook_free_linear(mixer.x_proj)
        and _hook_free_linear(mixer.dt_proj)
        and mixer.x_proj.bias is None
        and mixer.dt_proj.bias is not None
    ):
        return False
    params = (mixer.conv1d.weight, mixer.x_proj.weight, mixer.dt_proj.weight, mixer.A_log, mixer.D)
    return all(p.dtype == hidden_states.dtype and p.device.type == "cpu" for p in params) and kernel_available()


def _aligned_linear(lin: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)`` for a hook-free ``nn.Linear``, with the d_model side zero-padded to a multiple of
    16 when it is not one (MKL's GEMMs are ~1.4× slower on odd sizes such as d_model 173 than on
    176; zero padding adds exact zeros, so the function is unchanged). Other modules are called."""
    if not _hook_free_linear(lin):
        return lin(x)
    w = lin.weight  # (out, in)
    b: torch.Tensor | None = lin.bias
    pad_in, pad_out = -w.shape[1] % 16, -w.shape[0] % 16
    if pad_in and pad_in < w.shape[1] // 8:  # in_proj: d_model → 2D
        return F.linear(F.pad(x, (0, pad_in)), F.pad(w, (0, pad_in)), b)
    if pad_out and pad_out < w.shape[0] // 8:  # out_proj: D → d_model
        b = None if b is None else F.pad(b, (0, pad_out))
        return F.linear(x, F.pad(w, (0, 0, 0, pad_out)), b)[..., : w.shape[0]]
    return F.linear(x, w, b)


def fused_mixer_forward(mixer: MambaMixer, hidden_states: torch.Tensor) -> torch.Tensor:
    """``MambaMixer.forward`` (no cache, no mask) on the fused kernels: [B, L, d] → [B, L, d]."""
    xz = _aligned_linear(mixer.in_proj, hidden_states)  # (B, L, 2D)
    y = _FusedMixer.apply(
        xz,
        mixer.conv1d.weight,
        mixer.conv1d.bias,
        mixer.x_proj.weight,
        mixer.dt_proj.weight,
        mixer.dt_proj.bias,
        mixer.A_log,
        mixer.D,
        mixer.time_step_rank,
        mixer.ssm_state_size,
    )  # (B, L, D)
    return _aligned_linear(mixer.out_proj, y)  # (B, L, d)


class _FusedMixer2(torch.autograd.Function):
    """Mamba-2 mixer between in_proj and the gated norm, one autograd node.

    proj [B, L, D + conv_dim + H] (in_proj's output: z | x B C | dt) → conv1d → SiLU →
    dt = clamp(softplus(dt + dt_bias)) → SSM (one decay per head) → + D·x → · silu(z), [B, L, D].
    The kernels read and write the column blocks of proj / its gradient in place.
    """

    @staticmethod
    def forward(ctx, proj, conv_w, conv_b, dt_bias, A_log, Dh, N, P, limit):
        H = dt_bias.shape[0]
        D = H * P
        cd = conv_w.shape[0]  # conv_dim = D + 2N
        xBC = fast_scan_cpu.conv_forward(proj[..., D : D + cd], conv_w[:, 0, :], conv_b, act=True)  # (B, L, cd)
        v = proj[..., D + cd :] + dt_bias  # (B, L, H)
        sp = F.softplus(v)
        dt_h = sp if limit is None else sp.clamp(limit[0], limit[1])  # (B, L, H)
        A_h = -torch.exp(A_log)  # (H,)
        dt_d = dt_h.repeat_interleave(P, dim=-1)  # (B, L, D)
        A_d, D_d = A_h.repeat_interleave(P), Dh.repeat_interleave(P)  # (D,), (D,)
        out = fast_scan_cpu.scan_forward(
            xBC[..., :D], dt_d, A_d, xBC[..., D : D + N], xBC[..., D + N :], D_d, proj[..., :D]
        )  # (B, L, D)
        ctx.save_for_backward(proj, conv_w, conv_b, xBC, v, sp, dt_d, A_h, A_d, D_d)
        ctx.N, ctx.P, ctx.limit = N, P, limit
        return out

    @staticmethod
    def backward(ctx, gout):
        proj, conv_w, conv_b, xBC, v, sp, dt_d, A_h, A_d, D_d = ctx.saved_tensors
        N, P, limit = ctx.N, ctx.P, ctx.limit
        Bsz, L, H = v.shape
        D, cd = H * P, conv_w.shape[0]
        gproj = torch.empty_like(proj)
        gxBC = torch.empty_like(xBC)
        g = fast_scan_cpu.scan_backward(
            xBC[..., :D],
            dt_d,
            A_d,
            xBC[..., D : D + N],
            xBC[..., D + N :],
            gout,
            D_d,
            proj[..., :D],
            gx=gxBC[..., :D],
            gBC=gxBC[..., D:],
            gz=gproj[..., :D],
        )
        g_dt = g["dt"].view(Bsz, L, H, P).sum(-1)  # (B, L, H)
        if limit is not None:
            g_dt = g_dt * ((sp >= limit[0]) & (sp <= limit[1]))
        g_v = torch.ops.aten.softplus_backward(g_dt, v, 1.0, 20.0)  # (B, L, H)
        gproj[..., D + cd :] = g_v
        gw, gb = fast_scan_cpu.conv_backward(
            proj[..., D : D + cd], conv_w[:, 0, :], conv_b, gxBC, True, gproj[..., D : D + cd]
        )
        return (
            gproj,
            gw.view_as(conv_w),
            gb,
            g_v.sum((0, 1)),
            g["A"].view(H, P).sum(-1) * A_h,
            g["Dskip"].view(H, P).sum(-1),
            None,
            None,
            None,
        )


def fusable2(mixer: Mamba2Mixer, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> bool:
    """Whether the fused kernel path computes this Mamba-2 mixer call."""
    if not (
        attention_mask is None
        and mixer.activation == "silu"
        and mixer.n_groups == 1
        and is_plain_conv(mixer.conv1d)
        and isinstance(mixer.norm, MambaRMSNormGated)
        and mixer.conv1d.in_channels == mixer.intermediate_size + 2 * mixer.ssm_state_size
        and mixer.num_heads * mixer.head_dim == mixer.intermediate_size
    ):
        return False
    params = (mixer.conv1d.weight, mixer.dt_bias, mixer.A_log, mixer.D)
    return all(p.dtype == hidden_states.dtype and p.device.type == "cpu" for p in params) and kernel_available()


def fused_mamba2_forward(mixer: Mamba2Mixer, hidden_states: torch.Tensor) -> torch.Tensor:
    """``Mamba2Mixer.forward`` (no cache, no mask) on the fused kernels: [B, L, d] → [B, L, d]."""
    lo, hi = mixer.time_step_limit
    limit = None if (lo <= 0.0 and hi == float("inf")) else (float(lo), float(hi))
    proj = mixer.in_proj(hidden_states)  # (B, L, D + conv_dim + H)
    y = _FusedMixer2.apply(
        proj,
        mixer.conv1d.weight,
        mixer.conv1d.bias,
        mixer.dt_bias,
        mixer.A_log,
        mixer.D,
        mixer.ssm_state_size,
        mixer.head_dim,
        limit,
    )  # (B, L, D), gated
    y = mixer.norm(y)  # grouped RMSNorm of y·silu(z) (the gate is already applied)
    return mixer.out_proj(y.to(hidden_states.dtype))
