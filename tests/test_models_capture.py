"""All five families behind LayerwiseModel: shapes, one-pass capture, library hidden states,
edits, activation patching at one position, causality and long evaluation lengths."""

import pytest
import torch

from models_store import FAMILIES, LayerwiseModel, ModelConfig, build_model
from models_store.capture import edit_layer, edit_layers, patch_positions, run_with_states, states_through

V, C, N_LAYERS = 5, 3, 3
TINY_WIDTH = {"transformer": 32, "mamba": 16, "mamba2": 16, "lstm": 16, "gru": 16}


def tiny(family: str) -> LayerwiseModel:
    cfg = ModelConfig(family=family, vocab_size=V, n_classes=C, n_layers=N_LAYERS, d_model=TINY_WIDTH[family])
    return build_model(cfg, seed=0).eval()


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return tiny(request.param)


def tokens(b: int = 3, length: int = 12, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (b, length), generator=g)


def test_interface(model):
    assert isinstance(model, LayerwiseModel)
    assert model.n_layers == N_LAYERS
    assert model.layer_names == ["emb", "0", "1", "2"]
    assert len(model.block_modules()) == N_LAYERS
    assert model.n_params == model.config.n_params
    with pytest.raises(ValueError):
        model.hook_module(N_LAYERS)


@torch.no_grad()
def test_forward_shape(model):
    x = tokens()
    assert model(x).shape == (3, 12, C)


@torch.no_grad()
def test_capture_all_layers_in_one_forward(model):
    x = tokens()
    calls = []
    h1 = model.register_forward_pre_hook(lambda m, a: calls.append("model"))
    h2 = model.embedding_module().register_forward_pre_hook(lambda m, a: calls.append("emb"))
    try:
        logits, states = run_with_states(model, x)
    finally:
        h1.remove()
        h2.remove()
    assert calls == ["model", "emb"]
    assert list(states) == [-1, 0, 1, 2]
    for h in states.values():
        assert h.shape == (3, 12, model.d_model)
    assert torch.equal(logits, model(x))
    _, some = run_with_states(model, x, layers=[2, -1])
    assert list(some) == [-1, 2] and torch.equal(some[2], states[2])
    with pytest.raises(ValueError):
        run_with_states(model, x, layers=[7])


@torch.no_grad()
@pytest.mark.parametrize("layers", [[-1], [0], [-1, 1], [0, N_LAYERS - 1]])
def test_states_through_stops_after_the_deepest_layer_with_the_same_states(model, layers):
    x = tokens()
    _, full = run_with_states(model, x, layers=layers)
    ran: list[int] = []
    hooks = [
        model.hook_module(k).register_forward_hook(lambda m, a, o, k=k: ran.append(k)) for k in range(-1, N_LAYERS)
    ]
    try:
        through = states_through(model, x, layers)
    finally:
        for h in hooks:
            h.remove()
    assert list(through) == layers
    for layer in layers:
        assert torch.equal(through[layer], full[layer])  # bit for bit
    assert max(ran) == layers[-1]  # no block after the deepest wanted layer ran
    with pytest.raises(ValueError):
        states_through(model, x, [])


@torch.no_grad()
def test_states_are_distinct_layers(model):
    _, states = run_with_states(model, tokens())
    for a in range(-1, N_LAYERS):
        for b in range(a + 1, N_LAYERS):
            assert not torch.allclose(states[a], states[b])


@torch.no_grad()
@pytest.mark.parametrize("family", ["transformer", "mamba", "mamba2"])
def test_states_equal_library_hidden_states(family):
    """Measured: GPT-NeoX returns (emb, blocks 0..n-2, final_norm(block n-1)); Mamba/Mamba-2
    return (blocks 0..n-1, final_norm(block n-1)). Compare where they are comparable."""
    model = tiny(family)
    x = tokens()
    _, st = run_with_states(model, x)
    hs = model.library_hidden_states(x)
    assert len(hs) == N_LAYERS + 1
    bb = model.backbone
    if family == "transformer":
        assert torch.allclose(hs[0], st[-1])
        for layer in range(N_LAYERS - 1):
            assert torch.allclose(hs[layer + 1], st[layer])
        final_norm = bb.final_layer_norm
    else:
        for layer in range(N_LAYERS):
            assert torch.allclose(hs[layer], st[layer])
        final_norm = bb.norm_f
    assert torch.allclose(hs[N_LAYERS], final_norm(st[N_LAYERS - 1]), atol=1e-6)
    # and the head reads exactly that final-normed last layer
    assert torch.allclose(model(x), model.head(final_norm(st[N_LAYERS - 1])), atol=1e-6)


@torch.no_grad()
@pytest.mark.parametrize("family", ["lstm", "gru"])
def test_recurrent_block_is_prenorm_residual(family):
    model = tiny(family)
    x = tokens()
    _, st = run_with_states(model, x)
    assert torch.allclose(st[-1], model.embed(x))
    for layer, block in enumerate(model.blocks):
        y, _ = block.rnn(block.norm(st[layer - 1]))
        assert torch.allclose(st[layer], st[layer - 1] + y, atol=1e-6)
    assert torch.allclose(model(x), model.head(model.norm_f(st[N_LAYERS - 1])), atol=1e-6)


def _no_hooks(model):
    return all(not m._forward_hooks for m in model.modules())


@torch.no_grad()
@pytest.mark.parametrize("layer", [-1, 0, N_LAYERS - 1])
def test_edit_identity_and_zero(model, layer):
    x = tokens()
    base = model(x)
    with edit_layer(model, layer, lambda h: h):
        assert torch.equal(model(x), base)
    with edit_layer(model, layer, torch.zeros_like):
        zeroed = model(x)
        _, st = run_with_states(model, x, layers=[layer])
        assert torch.count_nonzero(st[layer]) == 0  # capture sees the edited state
    assert not torch.allclose(zeroed, base)
    assert torch.equal(model(x), base) and _no_hooks(model)


@torch.no_grad()
def test_edit_restores_on_error_and_checks_shape(model):
    x = tokens()
    with pytest.raises(RuntimeError, match="boom"), edit_layer(model, 0, torch.zeros_like):
        raise RuntimeError("boom")
    assert _no_hooks(model)
    with pytest.raises(ValueError, match="shape"), edit_layer(model, 1, lambda h: h[:, :-1]):
        model(x)
    assert _no_hooks(model)
    with pytest.raises(ValueError), edit_layer(model, -2, lambda h: h):
        pass


@torch.no_grad()
def test_multi_layer_edit(model):
    x = tokens()
    base = model(x)
    with edit_layers(model, {-1: lambda h: h, 1: lambda h: h}):
        assert torch.equal(model(x), base)
    with edit_layers(model, {0: lambda h: h, 2: torch.zeros_like}):
        out = model(x)
    # zeroing the last layer leaves only the head's bias path: every position gives the same logits
    assert torch.allclose(out, out[:1, :1].expand_as(out), atol=1e-5)


@torch.no_grad()
def test_patching_one_position(model):
    clean, corrupted = tokens(seed=1), tokens(seed=2)
    clean_logits, clean_states = run_with_states(model, clean)
    corrupted_logits = model(corrupted)
    # the whole embedding from the clean run reproduces the clean run
    with edit_layer(model, -1, patch_positions(clean_states[-1], slice(None))):
        assert torch.allclose(model(corrupted), clean_logits, atol=1e-5)
    # the last layer at position p only changes position p's logits (the head is per-position)
    p, last = 5, N_LAYERS - 1
    with edit_layer(model, last, patch_positions(clean_states[last], [p])):
        patched = model(corrupted)
    assert torch.allclose(patched[:, p], clean_logits[:, p], atol=1e-5)
    others = [t for t in range(12) if t != p]
    assert torch.allclose(patched[:, others], corrupted_logits[:, others], atol=1e-6)
    # a middle layer at position p leaves every earlier position untouched (causal)
    with edit_layer(model, 0, patch_positions(clean_states[0], [p])):
        patched = model(corrupted)
    assert torch.allclose(patched[:, :p], corrupted_logits[:, :p], atol=1e-6)


@torch.no_grad()
def test_causality(model):
    x = tokens(b=2, length=16)
    base = model(x)
    for t in (0, 7, 15):
        y = x.clone()
        y[:, t] = (y[:, t] + 1) % V
        out = model(y)
        assert torch.allclose(out[:, :t], base[:, :t], atol=1e-5), f"position {t} leaked backwards"
        assert not torch.allclose(out[:, t:], base[:, t:], atol=1e-5)


@torch.no_grad()
def test_long_evaluation_length(model):
    x = tokens(b=2, length=120)
    logits, states = run_with_states(model, x)
    assert logits.shape == (2, 120, C) and torch.isfinite(logits).all()
    assert states[N_LAYERS - 1].shape == (2, 120, model.d_model)
    # a prefix gives the same logits as the long sequence's first positions
    assert torch.allclose(model(x[:, :40]), logits[:, :40], atol=1e-5)


def test_gradients_flow(model):
    x = tokens(b=2, length=8)
    model.train()
    try:
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, C), torch.zeros(16, dtype=torch.long))
        loss.backward()
        assert model.embedding_module().weight.grad is not None
        assert torch.isfinite(model.embedding_module().weight.grad).all()
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()
