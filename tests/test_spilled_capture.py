"""One forward pass that writes every layer to disk (science.spilled_capture) gives the states
of an in-memory capture bit for bit, runs no block after the deepest layer, and leaves no file."""

from __future__ import annotations

import pytest
import torch

from models_store import ModelConfig, build_model
from science.captured import CAPTURE_BATCH, capture
from science.spilled_capture import SpilledCapture
from science.tasks import get_task


@pytest.mark.parametrize("family", ["transformer", "lstm"])
def test_spilled_states_equal_the_captured_ones(family: str) -> None:
    task = get_task("parity")
    cfg = ModelConfig(family=family, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=3, d_model=32)
    model = build_model(cfg, seed=0).eval()
    data = task.generate(12, CAPTURE_BATCH + 30, seed=3, split="test")  # two batches, the second short
    held = capture(model, data, layers=list(model.layers))
    ran: list[int] = []
    hook = model.hook_module(2).register_forward_hook(lambda *_: ran.append(2))
    try:
        with SpilledCapture(model, data, "cpu", [-1, 0, 1]) as spilled:
            for layer in (-1, 0, 1):
                assert torch.equal(spilled.states(layer), held.states[layer])
            group = spilled.group([0, 1])
            assert group.preds is None and list(group.states) == [0, 1]
            with pytest.raises(KeyError):
                spilled.states(2)
    finally:
        hook.remove()
    assert ran == []  # the pass stopped after layer 1
    assert spilled._files == {}  # closed: every file deleted
