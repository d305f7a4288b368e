"""Equivalence of the fast Mamba / Mamba-2 paths (``models_store.fast_scan``) with references.

In float64: the compiled scan kernel and the pure-PyTorch fallback against the plain sequential
scan, forwards and gradients; the fused mixers against plain-op references (forward and the
gradient of the input and of every mixer parameter), with and without Conv1D removal; whole
models against transformers' own forward. A CUDA check of mamba-ssm's kernels against the
reference runs where a GPU is present. When a kernel test may skip and when it fails instead:
tests/compiled_kernels.py.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn
from transformers import Mamba2Config, Mamba2Model, MambaConfig, MambaModel

from models_store import ModelConfig, build_model, fast_scan, fast_scan_cpu
from models_store.capture import run_with_states
from models_store.conv1d import remove_conv1d
from tests.compiled_kernels import require_cpu_kernel, require_cuda_kernels

F64 = torch.float64
TOL = dict(rtol=1e-9, atol=1e-9)  # far inside the 1e-5: float64 sums of a few hundred terms


@pytest.fixture
def compiled_kernel() -> None:
    require_cpu_kernel()


@pytest.fixture
def cuda_kernels() -> None:
    require_cuda_kernels()


needs_kernel = pytest.mark.usefixtures("compiled_kernel")
needs_cuda_kernels = pytest.mark.usefixtures("cuda_kernels")


def _scan_inputs(b: int, L: int, D: int, N: int, scalar_a: bool, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, L, D, dtype=F64, generator=g)
    dt = torch.rand(b, L, D, dtype=F64, generator=g) * 0.5 + 0.01
    A = (
        -(torch.rand(D, dtype=F64, generator=g) * 4 + 0.1)
        if scalar_a
        else -(torch.rand(D, N, dtype=F64, generator=g) * 4 + 0.1)
    )
    B = torch.randn(b, L, N, dtype=F64, generator=g)
    C = torch.randn(b, L, N, dtype=F64, generator=g)
    return [t.requires_grad_() for t in (x, dt, A, B, C)]


def _grads(y: torch.Tensor, inputs: list[torch.Tensor], seed: int) -> tuple[torch.Tensor, ...]:
    gy = torch.randn(y.shape, dtype=y.dtype, generator=torch.Generator().manual_seed(seed + 1))
    return torch.autograd.grad(y, inputs, gy)


def _ref_full_a(x, dt, A, B, C):
    """Reference with a per-channel A expanded to [D, N] (autograd sums the expansion back)."""
    return fast_scan.selective_scan_ref(x, dt, A[:, None].expand(-1, B.shape[-1]) if A.dim() == 1 else A, B, C)


SHAPES = [(2, 1, 16, 16), (3, 7, 20, 5), (2, 17, 37, 16), (4, 40, 33, 1), (1, 9, 5, 3)]


@needs_kernel
@pytest.mark.parametrize("scalar_a", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_scan_matches_reference(shape: tuple[int, int, int, int], scalar_a: bool) -> None:
    b, L, D, N = shape
    ins = _scan_inputs(b, L, D, N, scalar_a, seed=sum(shape))
    y_ref = _ref_full_a(*ins)
    y = fast_scan.selective_scan(*ins, backend="kernel")
    torch.testing.assert_close(y, y_ref, **TOL)
    for g, g_ref in zip(_grads(y, ins, 0), _grads(y_ref, ins, 0), strict=True):
        torch.testing.assert_close(g, g_ref, **TOL)


@needs_kernel
@pytest.mark.parametrize("shape", [(2, 1, 16, 4), (3, 11, 21, 5)])
def test_kernel_gated_scan_matches_formula(shape: tuple[int, int, int, int]) -> None:
    """The kernel's fused skip + gate: out = (scan + Dskip·x)·silu(z), with strided x and z."""
    b, L, D, N = shape
    x, dt, A, B, C = (t.detach() for t in _scan_inputs(b, L, D, N, False, seed=7))
    g = torch.Generator().manual_seed(3)
    xz = torch.randn(b, L, 2 * D, dtype=F64, generator=g)
    xz[..., :D] = x
    Dsk = torch.randn(D, dtype=F64, generator=g)
    gout = torch.randn(b, L, D, dtype=F64, generator=g)
    out = fast_scan_cpu.scan_forward(xz[..., :D], dt, A, B, C, Dsk, xz[..., D:])
    leaves = [t.clone().requires_grad_() for t in (x, dt, A, B, C, Dsk, xz[..., D:])]
    xr, dtr, Ar, Br, Cr, Dr, zr = leaves
    ref = (fast_scan.selective_scan_ref(xr, dtr, Ar, Br, Cr) + xr * Dr) * torch.nn.functional.silu(zr)
    torch.testing.assert_close(out, ref, **TOL)
    gref = torch.autograd.grad(ref, leaves, gout)
    gk = fast_scan_cpu.scan_backward(xz[..., :D], dt, A, B, C, gout, Dsk, xz[..., D:])
    for key, gr in zip(["x", "dt", "A", "B", "C", "Dskip", "z"], gref, strict=True):
        torch.testing.assert_close(gk[key], gr, **TOL, msg=key)


@needs_kernel
@pytest.mark.parametrize("scalar_a", [False, True])
def test_kernel_softplus_dt_matches_torch_softplus(scalar_a: bool) -> None:
    """dt_softplus=True: the kernel applies torch's softplus (threshold 20) to a raw dt that
    spans both branches, forwards and gradients (the gradient is w.r.t. the raw dt)."""
    x, _, A, B, C = _scan_inputs(3, 11, 21, 4, scalar_a, seed=2)
    raw = (torch.linspace(-30, 30, 3 * 11 * 21, dtype=F64).view(3, 11, 21) / 10).requires_grad_()
    raw.data[0, :, :] *= 10  # values beyond the threshold 20 as well
    ins = [x, raw, A, B, C]
    y_ref = _ref_full_a(x, torch.nn.functional.softplus(raw), A, B, C)
    y = fast_scan_cpu.scan_forward(*(t.detach() for t in ins), dt_softplus=True)
    torch.testing.assert_close(y, y_ref, **TOL)
    gy = torch.randn(y.shape, dtype=F64, generator=torch.Generator().manual_seed(8))
    g_ref = torch.autograd.grad(y_ref, ins, gy)
    g = fast_scan_cpu.scan_backward(*(t.detach() for t in ins), gy, dt_softplus=True)
    for key, gr in zip(["x", "dt", "A", "B", "C"], g_ref, strict=True):
        torch.testing.assert_close(g[key], gr, **TOL, msg=key)


@pytest.mark.parametrize("shape", [(2, 1, 6, 4), (3, 9, 7, 5)])
def test_torch_fallback_scan_matches_reference(shape: tuple[int, int, int, int]) -> None:
    b, L, D, N = shape
    ins = _scan_inputs(b, L, D, N, False, seed=11)
    y_ref = fast_scan.selective_scan_ref(*ins)
    y = fast_scan.selective_scan(*ins, backend="torch")
    torch.testing.assert_close(y, y_ref, **TOL)
    for g, g_ref in zip(_grads(y, ins, 0), _grads(y_ref, ins, 0), strict=True):
        torch.testing.assert_close(g, g_ref, **TOL)


@needs_kernel
def test_kernel_thread_count_does_not_change_results() -> None:
    ins = _scan_inputs(5, 12, 40, 8, False, seed=5)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        y1 = fast_scan.selective_scan(*ins, backend="kernel")
        g1 = _grads(y1, ins, 0)
        torch.set_num_threads(2)
        y2 = fast_scan.selective_scan(*ins, backend="kernel")
        g2 = _grads(y2, ins, 0)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(y1, y2, **TOL)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, **TOL)


@needs_kernel
def test_kernel_float32_close_to_float64() -> None:
    ins = [t.detach() for t in _scan_inputs(3, 40, 24, 16, False, seed=9)]
    y64 = fast_scan.selective_scan(*ins, backend="kernel")
    y32 = fast_scan.selective_scan(*(t.float() for t in ins), backend="kernel")
    torch.testing.assert_close(y32.double(), y64, rtol=1e-4, atol=1e-4)


# --- mixers -----------------------------------------------------------------------------------
def _mamba_mixer(d: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    cfg = MambaConfig(
        vocab_size=8, hidden_size=d, state_size=5, expand=2, conv_kernel=4, num_hidden_layers=1, use_cache=False
    )
    mixer = MambaModel(cfg).double().layers[0].mixer
    with torch.no_grad():  # move every parameter off its special initial value
        mixer.conv1d.bias.normal_()
        mixer.D.normal_()
        mixer.A_log.add_(0.3 * torch.randn_like(mixer.A_log))
    return mixer


def _mamba2_mixer(d: int, seed: int, limit: tuple[float, float] | None = None) -> nn.Module:
    torch.manual_seed(seed)
    cfg = Mamba2Config(
        vocab_size=8,
        hidden_size=d,
        state_size=6,
        expand=2,
        conv_kernel=4,
        num_hidden_layers=1,
        head_dim=8,
        num_heads=2 * d // 8,
        n_groups=1,
        chunk_size=8,
        use_cache=False,
    )
    mixer = Mamba2Model(cfg).double().layers[0].mixer
    if limit is not None:
        mixer.time_step_limit = limit
    with torch.no_grad():
        mixer.conv1d.bias.normal_()
        mixer.D.normal_()
        mixer.norm.weight.normal_()
        mixer.dt_bias.normal_()
    return mixer


def _check_mixer(mixer: nn.Module, fast, reference, b: int, L: int, seed: int) -> None:
    h = torch.randn(
        b, L, mixer.hidden_size, dtype=F64, generator=torch.Generator().manual_seed(seed), requires_grad=True
    )
    leaves = [h, *mixer.parameters()]
    y_ref = reference(mixer, h)
    y = fast(mixer, h)
    torch.testing.assert_close(y, y_ref, **TOL)
    names = ["input", *(n for n, _ in mixer.named_parameters())]
    for name, g, g_ref in zip(names, _grads(y, leaves, seed), _grads(y_ref, leaves, seed), strict=True):
        torch.testing.assert_close(g, g_ref, **TOL, msg=lambda m, name=name: f"grad of {name}: {m}")


LENGTHS = [1, 5, 8, 13, 40]


@needs_kernel
@pytest.mark.parametrize("L", LENGTHS)
@pytest.mark.parametrize("d", [12, 19])
def test_fused_mamba_mixer_matches_reference(d: int, L: int) -> None:
    mixer = _mamba_mixer(d, seed=d + L)
    _check_mixer(mixer, fast_scan.fused_mixer_forward, fast_scan.mamba_mixer_reference, b=3, L=L, seed=L)


@needs_kernel
@pytest.mark.parametrize("L", LENGTHS)
@pytest.mark.parametrize("limit", [None, (0.05, 0.6)])
def test_fused_mamba2_mixer_matches_reference(L: int, limit: tuple[float, float] | None) -> None:
    mixer = _mamba2_mixer(16, seed=L, limit=limit)
    _check_mixer(mixer, fast_scan.fused_mamba2_forward, fast_scan.mamba2_mixer_reference, b=3, L=L, seed=L)


@pytest.mark.parametrize("L", [1, 9])
def test_unfused_mamba_mixer_matches_reference(L: int) -> None:
    """The generic path (used with masks, wrapped convs, or without the kernel), torch scan."""
    mixer = _mamba_mixer(10, seed=L)
    _check_mixer(
        mixer,
        lambda m, h: fast_scan.mamba_mixer_forward(m, h, backend="torch"),
        fast_scan.mamba_mixer_reference,
        b=2,
        L=L,
        seed=L,
    )


# --- whole models -----------------------------------------------------------------------------
def _model(family: str, seed: int = 0) -> nn.Module:
    cfg = ModelConfig(
        family=family, vocab_size=6, n_classes=3, n_layers=2, d_model=24 if family == "mamba" else 16, d_state=4
    )
    return build_model(cfg, seed=seed).double()


def _tokens(b: int, L: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 6, (b, L), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", ["mamba", "mamba2"])
@pytest.mark.parametrize("L", [1, 13, 40])
def test_installed_model_matches_transformers_forward(family: str, L: int) -> None:
    """Whole model, logits and parameter gradients: fast path vs transformers' own forward.

    transformers rounds A, D and the dt bias (Mamba) or the whole scan (Mamba-2) to float32
    even in a float64 model, so the comparison is at 1e-5, not float64 precision.
    """
    model = _model(family)
    fast_scan.uninstall(model)
    assert not fast_scan.installed(model)
    tokens = _tokens(3, L)
    ref = model(tokens)
    g_ref = torch.autograd.grad(ref.square().sum(), list(model.parameters()))
    assert fast_scan.install(model) == 2
    out = model(tokens)
    g = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["mamba", "mamba2"])
@pytest.mark.parametrize("layer", [None, 1])
def test_conv1d_removal_works_on_the_fast_path(family: str, layer: int | None) -> None:
    """``remove_conv1d`` (weights swapped in place) changes the fast path exactly as it changes
    transformers' path, and the intact model is restored on exit."""
    model = _model(family)
    fast_scan.install(model)
    tokens = _tokens(2, 11)
    intact = model(tokens)
    with remove_conv1d(model, layer=layer):
        edited_fast = model(tokens)
        fast_scan.uninstall(model)
        edited_hf = model(tokens)
        fast_scan.install(model)
    assert not torch.allclose(edited_fast, intact)
    torch.testing.assert_close(edited_fast, edited_hf, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model(tokens), intact, rtol=0, atol=0)


@needs_kernel
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_conv1d_removal_gradients_match_reference(family: str) -> None:
    """With Conv1D removed, the fused mixer still equals the float64 reference, gradients too."""
    model = _model(family)
    mixer = model.block_modules()[0].mixer
    fast, ref = (
        (fast_scan.fused_mixer_forward, fast_scan.mamba_mixer_reference)
        if family == "mamba"
        else (fast_scan.fused_mamba2_forward, fast_scan.mamba2_mixer_reference)
    )
    with remove_conv1d(model, layer=0):
        _check_mixer(mixer, fast, ref, b=2, L=9, seed=4)


class _PassThrough(nn.Module):
    """A wrapped conv that ignores its weights (the other Conv1D-removal style)."""

    def __init__(self, conv: nn.Conv1d) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, C, L) → (B, C, L + k - 1)
        return nn.functional.pad(x, (0, self.conv.kernel_size[0] - 1))


def test_wrapped_conv_module_is_called() -> None:
    """Replacing ``mixer.conv1d`` by another module takes effect on the fast path (it calls the
    module), and equals the in-place identity-weight removal."""
    model = _model("mamba")
    fast_scan.install(model)
    tokens = _tokens(2, 10)
    with remove_conv1d(model):
        swapped = model(tokens)
    for block in model.block_modules():
        block.mixer.conv1d = _PassThrough(block.mixer.conv1d)
    wrapped = model(tokens)
    torch.testing.assert_close(wrapped, swapped, rtol=1e-10, atol=1e-10)


def test_hooks_capture_and_attention_mask_paths() -> None:
    """Forward hooks on the mixer fire; capture sees the same states; a mask goes the unfused
    way and equals transformers' masked forward."""
    model = _model("mamba")
    tokens = _tokens(2, 9)
    _, states_hf = run_with_states(model, tokens)
    fast_scan.install(model)
    seen = []
    handle = model.block_modules()[0].mixer.register_forward_hook(lambda m, a, o: seen.append(o.shape))
    _, states = run_with_states(model, tokens)
    handle.remove()
    assert seen == [torch.Size([2, 9, 24])]
    for layer in states_hf:
        torch.testing.assert_close(states[layer], states_hf[layer], rtol=1e-5, atol=1e-5)
    mixer = model.block_modules()[0].mixer
    h = torch.randn(2, 9, 24, dtype=F64)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, :3] = 0
    fast = mixer(h, attention_mask=mask)
    fast_scan.uninstall(model)
    torch.testing.assert_close(fast, mixer(h, attention_mask=mask), rtol=1e-5, atol=1e-5)


def test_install_is_idempotent_and_reversible() -> None:
    model = _model("mamba")
    keys = list(model.state_dict())
    assert fast_scan.install(model) == 2
    assert fast_scan.install(model) == 2
    assert list(model.state_dict()) == keys
    assert all(isinstance(b.mixer, fast_scan.FastMambaMixer) for b in model.block_modules())
    clone = copy.deepcopy(model)
    restored = pickle.loads(pickle.dumps(model))
    tokens = _tokens(2, 6)
    torch.testing.assert_close(clone(tokens), model(tokens), rtol=0, atol=0)
    torch.testing.assert_close(restored(tokens), model(tokens), rtol=0, atol=0)
    assert fast_scan.uninstall(model) == 2
    assert not fast_scan.installed(model)
    transformer = build_model(ModelConfig(family="transformer", vocab_size=6, n_classes=3, n_layers=1, d_model=32))
    assert fast_scan.install(transformer) == 0


def test_without_the_kernel_the_torch_path_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model("mamba")
    tokens = _tokens(2, 7)
    ref = model(tokens)
    fast_scan.install(model)
    monkeypatch.setattr(fast_scan_cpu, "load", lambda: None)
    assert not fast_scan.kernel_available()
    torch.testing.assert_close(model(tokens), ref, rtol=1e-5, atol=1e-5)


# --- CUDA: mamba-ssm's kernels against the reference (GPU machines only) --------------------
@needs_cuda_kernels
@pytest.mark.parametrize("L", [1, 13, 40])
def test_cuda_mamba_ssm_scan_matches_reference(L: int) -> None:
    """mamba-ssm's selective_scan_fn (CUDA, float32) vs the float64 sequential reference."""
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    ins = _scan_inputs(3, L, 40, 16, False, seed=L)
    y_ref = fast_scan.selective_scan_ref(*ins)
    g_ref = _grads(y_ref, ins, 0)
    x, dt, A, B, C = (t.detach().float().cuda().requires_grad_() for t in ins)
    # mamba-ssm layout: u, delta [b, D, L]; A [D, N]; B, C [b, N, L]
    y = selective_scan_fn(x.transpose(1, 2), dt.transpose(1, 2), A, B.transpose(1, 2), C.transpose(1, 2))
    y = y.transpose(1, 2)
    torch.testing.assert_close(y.double().cpu(), y_ref.detach(), rtol=1e-4, atol=1e-4)
    gy = torch.randn(y_ref.shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    g = torch.autograd.grad(y, [x, dt, A, B, C], gy.float().cuda())
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a.double().cpu(), b, rtol=1e-3, atol=1e-3)


@needs_cuda_kernels
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_cuda_kernel_model_matches_cpu_fast_path(family: str) -> None:
    """The same weights: transformers on CUDA (mamba-ssm kernels) vs the CPU fast path."""
    model = _model(family).float()
    fast_scan.install(model)
    tokens = _tokens(3, 40)
    cpu = model(tokens)
    gpu = model.cuda()(tokens.cuda()).cpu()
    torch.testing.assert_close(gpu, cpu, rtol=1e-3, atol=1e-3)
