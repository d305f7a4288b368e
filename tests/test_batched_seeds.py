"""science.batched: the seeds of one cell trained as one vmapped model give the numbers of
separate ``train_model`` runs (per-step losses and final weights), with per-seed clipping."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

from models_store import ModelConfig, build_model
from science.batched import (
    PlainGRU,
    PlainLSTM,
    train_seeds_batched,
    train_seeds_sequential,
)
from science.tasks import get_task
from science.training import TrainConfig, train_model

SEEDS = [0, 1, 2]
# warm-up + cosine and a clip small enough to act on every step, so a joint (all-seed) clip
# norm or a shared schedule state would show in the losses
RECIPE = {
    "train_length": 10,
    "batch_size": 8,
    "lr": 3e-3,
    "max_steps": 12,
    "warmup_steps": 3,
    "lr_schedule": "cosine",
    "grad_clip": 0.05,
    "eval_every": 5,
}


def _cfg(family: str, d_model: int) -> ModelConfig:
    task = get_task("parity")
    return ModelConfig(
        family=family,
        vocab_size=task.vocab_size,
        n_classes=task.n_classes,
        d_model=d_model,
        n_layers=2,
        start_token=True,
    )


@pytest.mark.parametrize(("family", "d_model"), [("lstm", 12), ("transformer", 32)])
def test_batched_seeds_equal_separate_train_model_runs(family, d_model):
    task = get_task("parity")
    cfg = _cfg(family, d_model)
    batched = train_seeds_batched(cfg, task, SEEDS, **RECIPE)
    assert batched.losses.shape == (RECIPE["max_steps"], len(SEEDS))
    for i, seed in enumerate(SEEDS):
        model = build_model(cfg, seed=seed)
        run = train_model(
            model, task, TrainConfig(n_eval_sequences=8, early_stop_acc=2.0, curriculum_start=None, **RECIPE), seed=seed
        )
        separate = torch.tensor([p["loss"] for p in run.loss_curve])  # (steps,)
        torch.testing.assert_close(batched.losses[:, i], separate, rtol=1e-5, atol=1e-6)
        for (name, p_sep), (_, p_bat) in zip(
            model.named_parameters(), batched.models[i].named_parameters(), strict=True
        ):
            torch.testing.assert_close(p_bat, p_sep, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    # the seeds really are different runs (own init and data), not one run copied
    assert not torch.allclose(batched.losses[:, 0], batched.losses[:, 1])


def test_sequential_reference_is_train_model():
    task = get_task("parity")
    cfg = _cfg("gru", 12)
    seq = train_seeds_sequential(cfg, task, [5], **RECIPE)
    run = train_model(
        build_model(cfg, seed=5),
        task,
        TrainConfig(n_eval_sequences=8, early_stop_acc=2.0, curriculum_start=None, **RECIPE),
        seed=5,
    )
    assert seq.losses[:, 0].tolist() == [p["loss"] for p in run.loss_curve]


@pytest.mark.parametrize(("plain", "rnn_cls"), [(PlainLSTM, nn.LSTM), (PlainGRU, nn.GRU)])
def test_plain_rnn_matches_torch_rnn(plain, rnn_cls):
    torch.manual_seed(0)
    rnn = rnn_cls(6, 5, batch_first=True)
    x = torch.randn(3, 7, 6, requires_grad=True)  # (B, L, D)
    y_ref, _ = rnn(x)
    y, _ = plain(rnn)(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-6)
    (g_ref,) = torch.autograd.grad(y_ref.square().sum(), x)
    (g,) = torch.autograd.grad(plain(rnn)(x)[0].square().sum(), x)
    torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-6)


def test_plain_rnn_rejects_what_it_does_not_cover():
    with pytest.raises(ValueError, match="single-layer"):
        PlainLSTM(nn.LSTM(4, 4, num_layers=2, batch_first=True))


def test_seeds_must_be_distinct():
    with pytest.raises(ValueError, match="distinct seeds"):
        train_seeds_batched(_cfg("lstm", 8), get_task("parity"), [1, 1], max_steps=1)
    with pytest.raises(ValueError, match="distinct seeds"):
        train_seeds_batched(_cfg("lstm", 8), get_task("parity"), [], max_steps=1)


def test_benchmark_prints_a_ratio_with_matching_losses(capsys):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_batched_seeds.py"
    spec = importlib.util.spec_from_file_location("bench_batched_seeds", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert (
        bench.main(
            ["--families", "gru", "--d-model", "8", "--steps", "1", "--warmup", "0", "--batch", "4", "--length", "6"]
        )
        == 0
    )
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| gru |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[6].strip("*")) > 0  # the ratio sequential / batched
    assert float(cells[-1]) < 1e-5  # both paths trained the same runs
