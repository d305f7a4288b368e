"""A model run once over a data set: its predictions and every layer's states, and the two
behavioural numbers the measurements read off them (per-sequence token accuracy, the majority
rate). Batched by :data:`CAPTURE_BATCH` sequences; one forward pass per batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models_store.capture import run_with_states
from science.tasks.base import TaskData

__all__ = ["CAPTURE_BATCH", "Captured", "capture", "predictions", "per_sequence_accuracy", "majority_rate"]

CAPTURE_BATCH = 256


@dataclass
class Captured:
    """Logits-derived predictions and the residual stream of every layer for a data set.

    preds: [n, L]; states: {layer: [n, L, D]} (float32, CPU), layer -1 = emb.
    """

    data: TaskData
    preds: torch.Tensor
    states: dict[int, torch.Tensor]


@torch.no_grad()
def capture(
    model: nn.Module, data: TaskData, device: torch.device | str = "cpu", layers: list[int] | None = None
) -> Captured:
    """Run ``model`` once over ``data`` (batched) and keep every layer's states.

    ONE forward pass per batch: states come from forward hooks (``run_with_states``).
    """
    model.eval()
    preds, chunks = [], {}
    for i in range(0, data.tokens.shape[0], CAPTURE_BATCH):
        logits, states = run_with_states(model, data.tokens[i : i + CAPTURE_BATCH].to(device), layers=layers)
        preds.append(logits.argmax(-1).cpu())  # (B, L)
        for layer, h in states.items():
            chunks.setdefault(layer, []).append(h.detach().float().cpu())  # (B, L, D)
    return Captured(data, torch.cat(preds), {k: torch.cat(v) for k, v in chunks.items()})


@torch.no_grad()
def predictions(model: nn.Module, tokens: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """Argmax predictions [n, L] for tokens [n, L], batched."""
    model.eval()
    return torch.cat(
        [
            model(tokens[i : i + CAPTURE_BATCH].to(device)).argmax(-1).cpu()
            for i in range(0, tokens.shape[0], CAPTURE_BATCH)
        ]
    )


def per_sequence_accuracy(preds: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Token accuracy of each sequence: [n, L] × [n, L] → [n] in 0..1 (labels < 0, a file task's
    null labels, are not scored; a sequence without any scored label counts 0)."""
    seen = labels >= 0
    return ((preds == labels) & seen).float().sum(dim=1) / seen.sum(dim=1).clamp(min=1)


def majority_rate(labels: torch.Tensor) -> float:
    """Share of the most frequent class among all positions (the chance level we report against)."""
    lab = labels.reshape(-1)
    lab = lab[lab >= 0]  # a file task's null labels are not scored
    return float(torch.bincount(lab).max()) / lab.numel()
