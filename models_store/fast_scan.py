"""Fast CPU training paths for transformers' Mamba and Mamba-2 mixers.

On CPU (no ``mamba_ssm``) transformers runs Mamba's selective scan as a Python loop over
[B, D, L, N] tensors (~10 s per training step at batch 64 × L 40, ~830K parameters) and
Mamba-2's chunked scan as dozens of small einsum / segsum ops. ``install(model)`` swaps every
``MambaMixer`` / ``Mamba2Mixer`` in ``model`` for ``FastMambaMixer`` / ``FastMamba2Mixer``
(subclasses: parameters, state_dict keys, hooks and ``isinstance`` unchanged; ``uninstall``
reverts) whose forward computes the same function as the library's:

    Mamba:   in_proj → (x, z) → causal depthwise conv1d → SiLU → x_proj → (Δ-rank, B, C) →
             dt_proj → softplus → selective scan → + D·x → · silu(z) → out_proj
    Mamba-2: in_proj → (z, xBC, dt) → conv1d → SiLU → clamp(softplus(dt + dt_bias)) → SSM with
             one decay per head → + D·x → · silu(z) → grouped RMSNorm → out_proj

Everything between the projections is one autograd node (``_FusedMixer`` / ``_FusedMixer2``)
running two compiled kernels from ``models_store.fast_scan_cpu`` (conv + SiLU; scan + softplus
+ skip + gate, forward and backward, the state kept in registers / L1, nothing of size
B·D·L·N stored: the backward recomputes it), with hand-written backward matmuls. in_proj /
out_proj zero-pad an odd d_model (e.g. 173) to a multiple of 16 for MKL (exact zeros).

The fast path is taken only when it is exactly the library's computation on the CPU: no
``cache`` (generation), no attention mask, CPU float32 / float64, SiLU, a plain hook-free conv
(Mamba-2: one group). Otherwise: transformers' own forward (caches, CUDA — where transformers
uses the ``mamba_ssm`` / ``causal_conv1d`` kernels when installed —, other dtypes, Mamba-2
edge cases), or, for Mamba with a mask / wrapped conv / no compiled kernel, ``mamba_mixer_forward``
(plain torch ops, the kernel scan or ``selective_scan_torch``).

Conv1D removal (``models_store.conv1d``) swaps ``mixer.conv1d``'s weights in place; the kernels
read them live. If ``mixer.conv1d`` is replaced by another module, wrapped, or carries forward
hooks, the module itself is called, so any such edit takes effect.

References for the tests: ``selective_scan_ref`` (the plain sequential scan),
``mamba_mixer_reference`` and ``mamba2_mixer_reference`` (plain-op mixers on that scan).
Not supported on the fast path: double backward (``create_graph=True`` through a mixer).

Shapes: hidden [B, L, d_model]; inner width D = expand·d_model; state N; Δ-rank R; heads H
of dim P (Mamba-2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer, MambaRMSNormGated

from models_store import fast_scan_cpu

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
]


# --------------------------------------------------------------------------------------------
# The scan: reference, pure-PyTorch fallback, compiled kernel
# --------------------------------------------------------------------------------------------
def selective_scan_ref(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor
) -> torch.Tensor:
    """The plain sequential scan (reference): y [b, L, D].

    h_t = exp(dt_t ⊗ A) ⊙ h_{t-1} + (dt_t · x_t) ⊗ B_t,  h_{-1} = 0;  y_t = h_t · C_t.

    Args:
        x, dt: [b, L, D] (dt after softplus); A: [D, N] (negative); B, C: [b, L, N].
    """
    b, L, D = x.shape
    h = x.new_zeros(b, D, A.shape[1])  # h: (b, D, N)
    ys = []
    for t in range(L):
        dA = torch.exp(dt[:, t, :, None] * A)  # (b, D, N)
        h = dA * h + (dt[:, t] * x[:, t])[:, :, None] * B[:, t, None, :]  # (b, D, N)
        ys.append((h * C[:, t, None, :]).sum(-1))  # (b, D)
    return torch.stack(ys, dim=1)  # (b, L, D)


def selective_scan_torch(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor
) -> torch.Tensor:
    """The same scan in pure PyTorch, tuned for autograd: y [b, L, D].

    Per step it builds only [b, D, N] tensors (``unbind`` instead of per-step indexing, whose
    backward would allocate a full-size zero gradient per step) and contracts with C by a
    batched matmul. Used where the compiled kernel is unavailable.
    """
    du = dt * x  # (b, L, D)
    dts, dus = dt.unbind(1), du.unbind(1)  # L × (b, D)
    Bs, Cs = B.unbind(1), C.unsqueeze(-1).unbind(1)  # L × (b, N), L × (b, N, 1)
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[-1])  # (b, D, N)
    ys = []
    for t in range(x.shape[1]):
        h = torch.addcmul(dus[t][:, :, None] * Bs[t][:, None, :], torch.exp(dts[t][:, :, None] * A), h)  # (b, D, N)
        ys.append(torch.bmm(h, Cs[t]))  # (b, D, 1)
    return torch.cat(ys, dim=2).transpose(1, 2)  # (b, L, D)


def selective_scan_states(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    h0: torch.Tensor | None = None,
    keep_states: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan of ``selective_scan_ref`` continuing from a given state, on any device.

    h_t = exp(dt_t ⊗ A) ⊙ h_{t-1} + (dt_t · x_t) ⊗ B_t with h_{-1} = ``h0`` (None = zeros);
    y_t = h_t · C_t. Used by activation patching to inject a state and to read the state after
    every step (``models_store.states``); plain PyTorch ops, no autograd needs.

    Args:
        x, dt: [b, L, D]; A: [D, N]; B, C: [b, L, N]; h0: [b, D, N] or None.
        keep_states: return every h_t ([b, L, D, N]) instead of only the last one.

    Returns:
        (y [b, L, D], h_all [b, L, D, N] if ``keep_states`` else h_{L-1} [b, D, N]).
    """
    b, L, D = x.shape
    h = x.new_zeros(b, D, A.shape[-1]) if h0 is None else h0.to(x.dtype)  # (b, D, N)
    dA = torch.exp(dt[..., None] * A)  # (b, L, D, N): all decays at once (cheap for patch lengths)
    dBu = (dt * x)[..., None] * B[:, :, None, :]  # (b, L, D, N)
    hs = []
    for t in range(L):
        h = torch.addcmul(dBu[:, t], dA[:, t], h)  # (b, D, N)
        hs.append(h)
    h_all = torch.stack(hs, dim=1)  # (b, L, D, N)
    y = torch.einsum("bldn,bln->bld", h_all, C)  # (b, L, D)
    return y, (h_all if keep_states else h)


def kernel_available() -> bool:
    """Whether the compiled CPU scan kernel is (or can be) loaded (builds it on first call)."""
    return fast_scan_cpu.load() is not None


class _KernelScan(torch.autograd.Function):
    """The plain scan y = scan(x, dt, A, B, C) on the compiled kernel."""

    @staticmethod
    def forward(ctx, x, dt, A, B, C):
        ctx.save_for_backward(x, dt, A, B, C)
        return fast_scan_cpu.scan_forward(x, dt, A, B, C)

    @staticmethod
    def backward(ctx, gy):
        x, dt, A, B, C = ctx.saved_tensors
        g = fast_scan_cpu.scan_backward(x, dt, A, B, C, gy)
        return g["x"], g["dt"], g["A"], g["B"], g["C"]


def selective_scan(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, backend: str = "auto"
) -> torch.Tensor:
    """The selective scan y [b, L, D] (see ``selective_scan_ref``), differentiable.

    Args:
        backend: ``"auto"`` (compiled kernel for CPU float32/float64 inputs when available,
            else ``"torch"``), ``"kernel"`` (raises if unavailable), ``"torch"`` or ``"ref"``.
    """
    if backend == "ref":
        return selective_scan_ref(x, dt, A, B, C)
    use_kernel = backend == "kernel" or (
        backend == "auto"
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and kernel_available()
    )
    if not use_kernel:
        if backend not in ("auto", "torch"):
            raise ValueError(f"unknown scan backend {backend!r}")
        return selective_scan_torch(x, dt, A, B, C)
    if not kernel_available():
        raise RuntimeError(f"compiled scan kernel unavailable: {fast_scan_cpu.load_error()}")
    dtype = x.dtype
    x, dt, A, B, C = (t.to(dtype).contiguous() for t in (x, dt, A, B, C))
    return _KernelScan.apply(x, dt, A, B, C)


# --------------------------------------------------------------------------------------------
# The mixer
# --------------------------------------------------------------------------------------------
def _mask(h: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """transformers' ``apply_mask_to_padding_states``: zero padded positions of h [B, L, C]."""
    if attention_mask is None:
        return h
    return (h * attention_mask[:, :, None]).to(h.dtype)


def _plain_conv(conv: nn.Module) -> bool:
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
    if not _plain_conv(conv):
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


def _hook_free_linear(m: nn.Module) -> bool:
    return type(m) is nn.Linear and not m._forward_hooks and not m._forward_pre_hooks


def _fusable(mixer: MambaMixer, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> bool:
    """Whether the fused kernel path computes this mixer call (else the unfused path does)."""
    if not (
        attention_mask is None
        and mixer.activation == "silu"
        and _plain_conv(mixer.conv1d)
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
    w, b = lin.weight, lin.bias  # (out, in)
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
        ):
            return super().forward(hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)
        if _fusable(self, hidden_states, attention_mask):
            return fused_mixer_forward(self, hidden_states)
        return mamba_mixer_forward(self, hidden_states, attention_mask)


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


def _fusable2(mixer: Mamba2Mixer, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> bool:
    """Whether the fused kernel path computes this Mamba-2 mixer call."""
    if not (
        attention_mask is None
        and mixer.activation == "silu"
        and mixer.n_groups == 1
        and _plain_conv(mixer.conv1d)
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
            and _fusable2(self, hidden_states, attention_mask)
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
