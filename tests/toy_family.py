"""A toy sixth family for tests/test_toy_family.py: a diagonal linear recurrence.

Block ℓ: ``u = LayerNorm(x)``, ``s_t = a ⊙ s_{t-1} + W u_t`` (``a = sigmoid(a_logit)`` per
channel, ``s_{-1} = 0``), output ``x + s``. Embedding → n blocks → LayerNorm → Linear, the
same ``ResidualStackModel`` skeleton as ``models_store.families.RecurrentModel``. Registering it is
one ``FamilySpec``: ``FAMILY`` below.

Shapes: tokens [B, L]; block inputs / outputs [B, L, D]; logits [B, L, C].
"""

from __future__ import annotations

import torch
from torch import nn

from layerscope_core.registry import FamilySpec
from models_store.base import ResidualStackModel
from models_store.model_config import ModelConfig

NAME = "toy_linrec"


class LinearRecurrentBlock(nn.Module):
    """``x + scan(W · LayerNorm(x))`` with a per-channel decay in (0, 1)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.a_logit = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, L, D] → [B, L, D]."""
        u = self.proj(self.norm(x))  # (B, L, D)
        a = torch.sigmoid(self.a_logit)  # (D,)
        s = torch.zeros_like(u[:, 0])  # (B, D)
        out = []
        for t in range(u.shape[1]):
            s = a * s + u[:, t]
            out.append(s)
        return x + torch.stack(out, dim=1)  # (B, L, D)


class LinearRecurrentModel(ResidualStackModel):
    """Embedding → n ``LinearRecurrentBlock``s → LayerNorm → Linear: only the block is new."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config, LinearRecurrentBlock)


def count_params(cfg: ModelConfig, d: int) -> int:
    """Embedding V·d + n·(LayerNorm 2d + W d² + decay d) + final LayerNorm 2d + head d·C + C."""
    return cfg.input_vocab_size * d + cfg.n_layers * (3 * d + d * d) + 2 * d + d * cfg.n_classes + cfg.n_classes


def width_problem(cfg: ModelConfig, d: int) -> str | None:
    """Even widths only (to exercise the hook)."""
    return "must be even" if d % 2 else None


FAMILY = FamilySpec(
    NAME,
    "Toy linear recurrence",
    "rnn",
    build=LinearRecurrentModel,
    count_params=count_params,
    width_problem=width_problem,
)
