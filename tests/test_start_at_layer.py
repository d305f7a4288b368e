"""A forward pass that starts at the edited layer (models_store.capture.start_at_layer): the blocks
before it are not run, and the logits, hence every intervention row, are those of the full forward
pass bit for bit. Why: the interventions run ~80 edited forward passes per layer and eval length
(the rank-matched random removals most of all); an edit at layer ℓ cannot change what layers ≤ ℓ
compute, so recomputing them was most of the measurement's time."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import science.bounded as bounded
import science.measure as measure
from layerscope_core.registry import family_names
from models_store import ModelConfig, build_model
from models_store.capture import edit_layer, module_outputs, start_at_layer
from science.measure import measure_interventions
from science.tasks import get_task

FAMILIES = family_names()  # the stacked LSTM/GRU too: no residual stream between their blocks


def _model(family: str, start_token: bool):
    cfg = ModelConfig(
        family=family,
        vocab_size=3,
        n_classes=2,
        n_layers=3,
        d_model=32 if family == "transformer" else 16,
        d_state=4,
        start_token=start_token,
    )
    return build_model(cfg, seed=0).eval()


def _shift(h: torch.Tensor) -> torch.Tensor:
    return h * 0.5 + 0.25  # an edit that changes what the later blocks see


@pytest.mark.parametrize("start_token", [False, True])
@pytest.mark.parametrize("family", FAMILIES)
@torch.no_grad()
def test_the_logits_are_the_full_forward_passes_and_the_earlier_blocks_are_not_run(family, start_token):
    model = _model(family, start_token)
    tokens = torch.randint(0, 3, (4, 11), generator=torch.Generator().manual_seed(1))
    _, outputs = module_outputs(model, tokens)
    for layer in model.layers:
        with edit_layer(model, layer, _shift):
            want = model(tokens)
        calls: list[str] = []
        handles = [
            sub.register_forward_hook(lambda m, a, o, name=f"{k}.{name}", calls=calls: calls.append(name))
            for k in range(-1, layer + 1)
            for name, sub in model.hook_module(k).named_modules()
            if name  # the hook module itself is called: it returns the kept output
        ]
        try:
            with edit_layer(model, layer, _shift), start_at_layer(model, layer, outputs):
                got = model(tokens)
        finally:
            for h in handles:
                h.remove()
        assert torch.equal(got, want), (family, layer)
        assert calls == [], (family, layer, calls[:3])
    assert torch.equal(model(tokens), module_outputs(model, tokens)[0])  # the modules' own forwards are back


@pytest.mark.parametrize("family", FAMILIES)
@torch.no_grad()
def test_the_edited_layers_output_alone_is_enough(family):
    """A measurement keeps only the edited layer's output (the memory bound): the same logits."""
    model = _model(family, False)
    tokens = torch.randint(0, 3, (4, 11), generator=torch.Generator().manual_seed(2))
    _, outputs = module_outputs(model, tokens)
    for layer in model.layers:
        with edit_layer(model, layer, _shift):
            want = model(tokens)
        with edit_layer(model, layer, _shift), start_at_layer(model, layer, {layer: outputs[layer]}):
            assert torch.equal(model(tokens), want), (family, layer)


def test_the_output_of_the_layer_is_asked_for():
    model = _model("gru", False)
    _, outputs = module_outputs(model, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"output of layer 1"), start_at_layer(model, 1, {-1: outputs[-1]}):
        pass


@pytest.mark.parametrize("family", ["transformer", "mamba", "lstm_stack"])
def test_the_intervention_rows_are_those_of_full_forward_passes(family, monkeypatch):
    task = get_task("parity")
    width = 32 if family == "transformer" else 16
    cfg = ModelConfig(family=family, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=width)
    model = build_model(cfg, seed=0).eval()

    def rows():
        out = measure_interventions(
            model,
            task,
            run_seed=0,
            eval_lengths=[12, 16],
            n_sequences=40,
            methods=["project_out", "mean", "leace", "pca_top_k"],
            pca_k=2,
            fit_length=12,
            n_permutations=100,
        )
        return [dataclasses.asdict(r) for r in out]

    kept: list[bool] = []
    real_capture = bounded.capture
    monkeypatch.setattr(bounded, "capture", lambda *a, **k: kept.append(k.get("keep_outputs")) or real_capture(*a, **k))
    started = rows()
    assert True in kept  # the eval sets kept their outputs: the edited forwards started at their layers
    kept.clear()
    monkeypatch.setattr(measure, "KEEP_OUTPUTS_MAX_BYTES", 0)  # too big to keep: every block runs again
    assert rows() == started
    assert True not in kept
