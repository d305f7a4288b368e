"""A run's training time leaves out a compiled kernel's first build on the way (found by a fresh
user: the first Mamba run on a CPU stored 67 s of training for 2 s of steps, the rest the scan
kernel's compile, and the report summed it as training time)."""

from __future__ import annotations

import time

import torch

import models_store.compiled_ops as compiled_ops
from models_store import ModelConfig, build_model
from science.tasks import get_task
from science.training import TrainConfig, train_model


class _BuildsOnFirstForward(torch.nn.Module):
    """Wraps a model; its first forward spends ``pause`` seconds as a kernel build would, counted
    where :func:`models_store.compiled_ops.build` counts it."""

    def __init__(self, inner: torch.nn.Module, pause: float) -> None:
        super().__init__()
        self.inner, self.pause, self.built = inner, pause, False

    def forward(self, *args, **kwargs):
        if not self.built:
            self.built = True
            time.sleep(self.pause)
            compiled_ops._build_seconds[0] += self.pause
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("inner"), name)


def test_a_first_kernel_build_is_not_training_time():
    task = get_task("parity")
    torch.manual_seed(0)
    cfg = ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, d_model=16, n_layers=1)
    config = TrainConfig(train_length=8, batch_size=8, max_steps=4, eval_every=4, n_eval_sequences=16)
    began = time.perf_counter()
    result = train_model(_BuildsOnFirstForward(build_model(cfg), 1.5), task, config, seed=0)
    wall = time.perf_counter() - began
    assert wall >= 1.5  # the pause happened inside the training call
    assert result.seconds < wall - 1.4  # and is not counted as training
