"""The training recipe: warm-up + cosine decay, clipping, per-family lr, length curriculum, and
the START token's effect on an all-ones prefix."""

from __future__ import annotations

import pytest
import torch

from models_store import ModelConfig, build_model
from science.tasks import get_task
from science.training import TrainConfig, curriculum_lengths, make_scheduler, predict, train_model
from worker.job_params import DEFAULT_LR, LEGACY_RECIPE, TrainParams


def _opt(lr: float = 1e-3) -> torch.optim.Optimizer:
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _lrs(opt, sched, n: int) -> list[float]:
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_warmup_then_cosine_to_the_floor():
    opt = _opt(1e-3)
    sched = make_scheduler(opt, max_steps=100, warmup_steps=10, lr_schedule="cosine", min_lr_ratio=0.1)
    lrs = _lrs(opt, sched, 101)
    assert lrs[0] == pytest.approx(1e-4)  # lr / warmup_steps
    assert all(a < b for a, b in zip(lrs[:10], lrs[1:11], strict=True))  # rising through the warm-up
    assert lrs[10] == pytest.approx(1e-3)  # the peak
    assert all(a >= b for a, b in zip(lrs[10:100], lrs[11:101], strict=True))  # then never rising
    assert lrs[100] == pytest.approx(1e-4)  # the floor: min_lr_ratio × peak


def test_constant_without_warmup_leaves_the_lr_alone():
    assert make_scheduler(_opt(), max_steps=50, warmup_steps=0, lr_schedule="constant") is None
    with pytest.raises(ValueError, match="lr_schedule"):
        make_scheduler(_opt(), max_steps=50, lr_schedule="linear")


def test_curriculum_lengths():
    assert curriculum_lengths(40, 8, 4) == [8, 12, 16, 20, 24, 28, 32, 36, 40]
    assert curriculum_lengths(40, 30, 7) == [30, 37, 40]
    assert curriculum_lengths(40, None, 4) == [40]


def test_recipe_fields_are_resolved_and_part_of_the_config_hash():
    p = TrainParams(family="mamba", task="parity")
    assert p.lr == DEFAULT_LR["mamba"] and p.start_token is True
    assert p.grad_clip == 1.0 and p.lr_schedule == "cosine" and p.warmup_steps > 0 and p.curriculum_start == 8
    cfg = p.run_config()
    for key in (
        "lr",
        "warmup_steps",
        "lr_schedule",
        "min_lr_ratio",
        "grad_clip",
        "curriculum_start",
        "curriculum_step",
        "curriculum_threshold",
        "start_token",
    ):
        assert key in cfg
    assert "force" not in cfg
    assert TrainParams(family="mamba", task="parity", force=True).run_hash() == p.run_hash()
    legacy = TrainParams(family="mamba", task="parity", **LEGACY_RECIPE)
    assert legacy.run_hash() != p.run_hash()
    assert legacy.grad_clip is None and legacy.curriculum_start is None and legacy.start_token is False
    # An explicit lr overrides the family table.
    assert TrainParams(family="gru", task="parity", lr=5e-4).lr == 5e-4


def test_curriculum_grows_the_length_and_early_stops_only_at_full_length():
    torch.manual_seed(0)
    task = get_task("parity")
    model = build_model(
        ModelConfig(
            family="gru",
            vocab_size=task.vocab_size,
            n_classes=task.n_classes,
            n_layers=1,
            param_target=5_000,
            param_tolerance=0.5,
        )
    )
    result = train_model(
        model,
        task,
        TrainConfig(
            train_length=12,
            batch_size=32,
            lr=1e-2,
            max_steps=400,
            eval_every=10,
            n_eval_sequences=64,
            curriculum_start=4,
            curriculum_step=4,
            curriculum_threshold=0.9,
            early_stop_acc=0.6,
            grad_clip=1.0,
            warmup_steps=0,
            lr_schedule="constant",
        ),
        seed=0,
    )
    lengths = [p["length"] for p in result.loss_curve]
    assert lengths == sorted(lengths) and lengths[0] == 4
    evaluated = [p for p in result.loss_curve if p["heldout_token_acc"] is not None]
    # The length only grows after an evaluation at the current length passed the threshold.
    for a, b in zip(evaluated, evaluated[1:], strict=False):
        if b["length"] > a["length"]:
            assert a["heldout_token_acc"] >= 0.9
    if result.stopped_early:  # early stop counts at the full length only
        assert result.loss_curve[-1]["length"] == 12
    else:
        assert result.steps == 400
    assert result.final_heldout_acc is not None


def test_all_ones_prefix_classified_right_at_every_position_with_start_token():
    # Rotary positions only: without a START token an all-ones prefix gives the same keys and
    # values at every position, so the Transformer cannot tell the parity of its length apart.
    # With the START token it can: trained on parity, every position of the all-ones input is right.
    task = get_task("parity")
    length = 6
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(
            family="transformer",
            vocab_size=task.vocab_size,
            n_classes=task.n_classes,
            n_layers=2,
            param_target=20_000,
            param_tolerance=0.5,
            start_token=True,
        )
    )
    train_model(
        model,
        task,
        TrainConfig(
            train_length=length,
            batch_size=64,
            lr=3e-3,
            max_steps=1200,
            eval_every=50,
            n_eval_sequences=256,
            warmup_steps=50,
            lr_schedule="cosine",
            grad_clip=1.0,
            early_stop_acc=1.0,
            curriculum_start=None,
        ),
        seed=0,
    )
    ones = torch.ones(1, length, dtype=torch.long)  # token 1 = a one (parity's vocabulary is {0, 1})
    expected = torch.tensor([(t + 1) % 2 for t in range(length)])  # parity of the prefix 0..t
    per_position = (predict(model, ones)[0] == expected).float()
    assert per_position.tolist() == [1.0] * length
