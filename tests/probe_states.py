"""Synthetic probe states for the solver tests: correlated features, class means along many
directions (an ill-conditioned problem, like residual-stream states)."""

from __future__ import annotations

import torch


def correlated_states(n: int, d: int, c: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correlated float32 states ``[n, d]`` with class means along many directions; labels ``[n]``."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    mix = torch.randn(d, d, generator=g) * torch.logspace(0, -1.5, d)
    means = torch.randn(c, d, generator=g) * torch.logspace(-0.3, -1.5, d)
    return ((torch.randn(n, d, generator=g) + means[y]) @ mix.T + 0.5).float(), y
