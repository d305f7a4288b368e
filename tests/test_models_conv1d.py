"""Conv1D removal: identity conv on Mamba / Mamba-2, no-op elsewhere, always restored."""

import pytest
import torch
import torch.nn.functional as F
import transformers.models.mamba2.modeling_mamba2 as modeling_mamba2

from models_store import ModelConfig, build_model, fast_scan
from models_store.capture import run_with_states
from models_store.conv1d import conv_modules, remove_conv1d

V, C, N_LAYERS = 5, 3, 3


def tiny(family: str):
    d = 32 if family == "transformer" else 16
    return build_model(
        ModelConfig(family=family, vocab_size=V, n_classes=C, n_layers=N_LAYERS, d_model=d), seed=0
    ).eval()


def tokens(b: int = 2, length: int = 10) -> torch.Tensor:
    return torch.randint(0, V, (b, length), generator=torch.Generator().manual_seed(3))


def snapshot(model):
    return [(c.weight.detach().clone(), c.bias.detach().clone()) for c in conv_modules(model)]


@torch.no_grad()
@pytest.mark.parametrize("family", ["transformer", "lstm", "gru"])
def test_noop_without_conv(family):
    model = tiny(family)
    x = tokens()
    base = model(x)
    with remove_conv1d(model) as n:
        assert n == 0
        assert torch.equal(model(x), base)
    with remove_conv1d(model, layer=1) as n:
        assert n == 0


@torch.no_grad()
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_removal_changes_outputs_and_restores(family):
    model = tiny(family)
    x = tokens()
    base = model(x)
    before = snapshot(model)
    assert len(before) == N_LAYERS
    with remove_conv1d(model) as n:
        assert n == N_LAYERS
        edited = model(x)
    assert not torch.allclose(edited, base, atol=1e-4)
    assert torch.equal(model(x), base)
    for (w0, b0), (w1, b1) in zip(before, snapshot(model), strict=True):
        assert torch.equal(w0, w1) and torch.equal(b0, b1)


@torch.no_grad()
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_single_layer_removal(family):
    model = tiny(family)
    x = tokens()
    _, base = run_with_states(model, x)
    before = snapshot(model)
    with remove_conv1d(model, layer=1) as n:
        assert n == 1
        during = snapshot(model)
        _, states = run_with_states(model, x)
    for i, ((w0, _), (w1, _)) in enumerate(zip(before, during, strict=True)):
        assert torch.equal(w0, w1) == (i != 1)
    # layers before the edited one are untouched, the edited one changes
    assert torch.equal(states[0], base[0])
    assert not torch.allclose(states[1], base[1], atol=1e-5)
    with pytest.raises(ValueError), remove_conv1d(model, layer=N_LAYERS):
        pass


@torch.no_grad()
def test_restores_on_error():
    model = tiny("mamba")
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="boom"), remove_conv1d(model):
        raise RuntimeError("boom")
    for (w0, b0), (w1, b1) in zip(before, snapshot(model), strict=True):
        assert torch.equal(w0, w1) and torch.equal(b0, b1)


@torch.no_grad()
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_edited_conv_is_the_identity(family):
    model = tiny(family)
    conv = conv_modules(model)[0]
    x = torch.randn(2, conv.in_channels, 9)  # (B, C, L)
    k = conv.kernel_size[0]
    with remove_conv1d(model, layer=0):
        out = F.conv1d(x, conv.weight, conv.bias, padding=k - 1, groups=conv.in_channels)[..., :9]
    assert torch.equal(out, x)


@torch.no_grad()
def test_mamba_mixer_sees_silu_of_its_input_projection():
    """Direct computation through the block: with the conv removed, the SSM branch input
    (what x_proj reads) is SiLU(the x half of in_proj(RMSNorm(h)))."""
    model = tiny("mamba")
    x = tokens()
    _, states = run_with_states(model, x)
    block = model.backbone.layers[1]
    mixer = block.mixer
    seen = []
    handle = mixer.x_proj.register_forward_hook(lambda m, a, o: seen.append(a[0]))
    try:
        with remove_conv1d(model, layer=1):  # layer 0 (the block input) stays intact
            model(x)
        model(x)
    finally:
        handle.remove()
    xz = mixer.in_proj(block.norm(states[0]))  # (B, L, 2E), the block's input is layer 0
    expected = F.silu(xz[..., : mixer.intermediate_size])
    assert torch.allclose(seen[0], expected, atol=1e-6)
    assert not torch.allclose(seen[1], expected, atol=1e-4)  # the intact conv mixes positions


@torch.no_grad()
def test_mamba2_conv_output_is_silu_of_input(monkeypatch):
    model = tiny("mamba2")
    # Observe transformers' own path (the fast CPU mixer is checked against it, with and
    # without Conv1D removal, in tests/test_fast_scan.py).
    fast_scan.uninstall(model)
    x = tokens()
    calls = []
    original = modeling_mamba2.causal_conv1d_fn

    def recording(hidden_states, *args, **kwargs):  # hidden_states: (B, conv_dim, L)
        out = original(hidden_states, *args, **kwargs)
        calls.append((hidden_states, out))
        return out

    monkeypatch.setattr(modeling_mamba2, "causal_conv1d_fn", recording)
    with remove_conv1d(model):
        model(x)
    assert len(calls) == N_LAYERS
    for inp, out in calls:
        assert torch.allclose(out, F.silu(inp), atol=1e-6)
    calls.clear()
    model(x)
    assert not torch.allclose(calls[0][1], F.silu(calls[0][0]), atol=1e-4)
