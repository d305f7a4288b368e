"""Activation patching against its defining properties (issue 3, item 6)."""

import pytest
import torch

from models_store import ModelConfig, build_model
from worker.patching import patch_recovery, patching_grid
from worker.tasks import get_task


@pytest.fixture(scope="module", params=["lstm", "transformer", "mamba"])
def model_and_pairs(request):
    task = get_task("s3")
    torch.manual_seed(0)
    model = build_model(ModelConfig(family=request.param, vocab_size=task.vocab_size, n_classes=task.n_classes,
                                    n_layers=2, d_model=32)).eval()
    clean, corrupted, _ = task.corruption_pairs(12, 24, seed=1)
    return model, clean, corrupted


@pytest.mark.parametrize("layer", [-1, 0, 1])
def test_patching_every_position_recovers_everything(model_and_pairs, layer):
    model, clean, corrupted = model_and_pairs
    rec = patch_recovery(model, clean.tokens, corrupted.tokens, clean.labels[:, -1], corrupted.labels[:, -1],
                         layer=layer, positions=slice(None))
    assert rec == pytest.approx(1.0, abs=1e-4)


def test_patching_nothing_recovers_nothing(model_and_pairs):
    model, clean, corrupted = model_and_pairs
    rec = patch_recovery(model, clean.tokens, corrupted.tokens, clean.labels[:, -1], corrupted.labels[:, -1],
                         layer=0, positions=[])
    assert rec == pytest.approx(0.0, abs=1e-6)


def test_grid_rows_cover_every_layer_and_position(model_and_pairs):
    model, _, _ = model_and_pairs
    rows = patching_grid(model, get_task("s3"), run_seed=0, eval_length=12, positions=[3, 6], n_pairs=8)
    assert {(r["layer"], r["position"]) for r in rows} == {(l, p) for l in (-1, 0, 1) for p in (3, 6)}
    # The embedding at a position after the corrupted token is identical in both runs: nothing to recover.
    emb = [r for r in rows if r["layer"] == -1]
    assert all(abs(r["recovery"]) < 1e-5 for r in emb)


def test_grid_rejects_positions_outside_the_sequence(model_and_pairs):
    model, _, _ = model_and_pairs
    with pytest.raises(ValueError, match="outside"):
        patching_grid(model, get_task("s3"), run_seed=0, eval_length=12, positions=[12], n_pairs=4)


def test_recovery_is_undefined_when_corruption_changes_nothing():
    """An untrained model can give equal clean and corrupted logit differences; recovery is
    then undefined and stored as None, not a crash (found by the code_depth smoke suite)."""
    import numpy as np

    from worker.patching import _recovery

    same = np.full(8, 0.25)
    rec, lo, hi = _recovery(np.zeros(8), same, same.copy(), seed=0)
    assert np.isnan(rec) and np.isnan(lo) and np.isnan(hi)
