"""The START token: real positions only outside the model, distinct states on a constant prefix."""

from __future__ import annotations

import pytest
import torch

from models_store import ModelConfig, build_model
from models_store.capture import edit_layer, run_with_states
from worker.job_params import TrainParams

FAMILIES = ["transformer", "mamba", "mamba2", "lstm", "gru"]


def _model(family: str, start_token: bool):
    cfg = ModelConfig(
        family=family,
        vocab_size=2,
        n_classes=2,
        n_layers=2,
        param_target=20_000,
        param_tolerance=0.5,
        start_token=start_token,
    )
    return build_model(cfg, seed=0).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_outputs_and_states_cover_real_positions_only(family):
    model = _model(family, True)
    tokens = torch.randint(0, 2, (3, 7))
    logits, states = run_with_states(model, tokens)
    assert logits.shape == (3, 7, 2)
    assert all(h.shape == (3, 7, model.d_model) for h in states.values())
    assert model.config.input_vocab_size == 3
    # An edit that leaves the states unchanged leaves the logits unchanged (the prefix is kept).
    with edit_layer(model, 0, lambda h: h.clone()):
        assert torch.allclose(model(tokens), logits, atol=1e-6)


def test_constant_prefix_states_differ_by_position_only_with_start_token():
    # Rotary (relative) positions only: without a START token every position of an all-ones
    # input sees the same keys and values, so the residual stream is the same at every position.
    ones = torch.ones(1, 8, dtype=torch.long)
    _, without = run_with_states(_model("transformer", False), ones, layers=[1])
    _, with_start = run_with_states(_model("transformer", True), ones, layers=[1])
    spread = lambda h: float((h[0] - h[0, :1]).abs().max())  # noqa: E731
    assert spread(without[1]) < 1e-5
    assert spread(with_start[1]) > 1e-3


def test_train_params_resolve_start_token():
    assert TrainParams(family="lstm", task="parity").start_token is True
    assert TrainParams(family="lstm", task="parity", start_token=False).start_token is False
    with pytest.raises(ValueError, match="start_token"):
        TrainParams(family="mamba", task="parity", pretrained="x", start_token=True)
