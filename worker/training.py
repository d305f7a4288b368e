"""Training loop (SPEC "Training"): AdamW, fresh sequences every step, cross-entropy on every
position, early stop at a held-out token accuracy, and behavioural accuracy per eval length."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from worker.context import JobContext, SilentContext
from worker.seeds import data_seed
from worker.tasks.base import Task, TaskData

EVAL_BATCH = 256


@dataclass
class TrainResult:
    steps: int
    seconds: float
    stopped_early: bool
    loss_curve: list[dict[str, Any]] = field(default_factory=list)
    final_heldout_acc: float | None = None


@torch.no_grad()
def predict(model: nn.Module, tokens: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """Argmax predictions, batched. tokens: [n, L] → [n, L] (on CPU)."""
    model.eval()
    out = []
    for i in range(0, tokens.shape[0], EVAL_BATCH):
        logits = model(tokens[i : i + EVAL_BATCH].to(device))  # (B, L, C)
        out.append(logits.argmax(-1).cpu())
    return torch.cat(out)


def token_accuracy(model: nn.Module, data: TaskData, device: torch.device | str = "cpu") -> dict[str, float]:
    """Behavioural accuracy on ``data``: every token (``token_acc``) and the last position
    (``last_acc``), both in 0..1, plus ``n`` sequences."""
    pred = predict(model, data.tokens, device)
    correct = (pred == data.labels).float()  # (n, L)
    return {
        "token_acc": float(correct.mean()),
        "last_acc": float(correct[:, -1].mean()),
        "n": int(data.tokens.shape[0]),
    }


def train_model(
    model: nn.Module,
    task: Task,
    *,
    seed: int,
    train_length: int = 40,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    max_steps: int = 2000,
    max_seconds: float | None = None,
    early_stop_acc: float = 0.99,
    eval_every: int = 50,
    n_eval_sequences: int = 500,
    device: torch.device | str = "cpu",
    ctx: JobContext | None = None,
) -> TrainResult:
    """Train ``model`` in place on fresh ``task`` sequences every step (SPEC "Training").

    Stops at ``max_steps``, after ``max_seconds`` of wall time (seconds), or as soon as the
    held-out token accuracy at ``train_length`` reaches ``early_stop_acc``.

    Raises:
        worker.context.JobCancelled: a cancel was requested (checked every step).
    """
    ctx = ctx or SilentContext()
    torch.manual_seed(data_seed(seed, "train", -1))  # init-independent randomness (dropout etc.)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    heldout = task.generate(train_length, n_eval_sequences, data_seed(seed, "heldout"), split="test")
    curve: list[dict[str, Any]] = []
    start = time.perf_counter()
    stopped_early = False
    step = 0
    acc: float | None = None
    # Sequences are generated in blocks of batches: one generator call per block, not per step.
    block = max(1, min(eval_every, 50))
    buffer: TaskData | None = None
    for step in range(1, max_steps + 1):
        ctx.check_cancelled()
        j = (step - 1) % block
        if j == 0:
            buffer = task.generate(
                train_length, batch_size * block, data_seed(seed, "train", (step - 1) // block), split="train"
            )
        assert buffer is not None
        x = buffer.tokens[j * batch_size : (j + 1) * batch_size].to(device)  # (B, L)
        y = buffer.labels[j * batch_size : (j + 1) * batch_size].to(device)  # (B, L)
        model.train()
        logits = model(x)  # (B, L, C)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"training loss became {loss_value} at step {step}")
        elapsed = time.perf_counter() - start
        out_of_time = max_seconds is not None and elapsed >= max_seconds
        point: dict[str, Any] = {"step": step, "loss": loss_value, "heldout_token_acc": None}
        if step % eval_every == 0 or step == max_steps or out_of_time:
            acc = token_accuracy(model, heldout, device)["token_acc"]
            point["heldout_token_acc"] = acc
            ctx.progress(min(1.0, max(step / max_steps, elapsed / max_seconds if max_seconds else 0.0)),
                         f"step {step} loss {loss_value:.3f} held-out acc {acc:.3f}")
            if acc >= early_stop_acc:
                stopped_early = True
        curve.append(point)
        if stopped_early or out_of_time:
            break
    model.eval()
    return TrainResult(
        steps=step,
        seconds=time.perf_counter() - start,
        stopped_early=stopped_early,
        loss_curve=curve,
        final_heldout_acc=acc,
    )


def behaviour(
    model: nn.Module,
    task: Task,
    *,
    seed: int,
    eval_lengths: list[int],
    n_sequences: int,
    device: torch.device | str = "cpu",
) -> dict[str, dict[str, float]]:
    """Behavioural accuracy per eval length: ``{"40": {"token_acc", "last_acc", "n"}, ...}``."""
    return {
        str(length): token_accuracy(
            model, task.generate(length, n_sequences, data_seed(seed, "behaviour", length), split="test"), device
        )
        for length in eval_lengths
    }
