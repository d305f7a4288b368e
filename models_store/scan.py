"""The selective scan of Mamba: the plain reference, a pure-PyTorch path, a stepwise form with an
initial state, and the compiled CPU kernel as a differentiable op (``selective_scan`` picks one).

    h_t = exp(dt_t ⊗ A) ⊙ h_{t-1} + (dt_t · x_t) ⊗ B_t,  h_{-1} = 0;  y_t = h_t · C_t

``selective_scan_ref`` is the definition every other path is tested against
(tests/test_fast_scan.py); the kernel itself lives in ``models_store.fast_scan_cpu`` (sources in
``csrc/``). The fused mixers (``models_store.fused_mixers``) call the kernel directly, with the
skip, gate and softplus folded in; this module is the bare scan.

Shapes: x, dt [b, L, D]; A [D, N]; B, C [b, L, N]; y [b, L, D].
"""

from __future__ import annotations

import torch

from models_store import fast_scan_cpu

__all__ = [
    "kernel_available",
    "selective_scan",
    "selective_scan_ref",
    "selective_scan_states",
    "selective_scan_torch",
]


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
