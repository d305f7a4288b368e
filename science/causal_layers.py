"""Which blocks of a deep model get interventions and activation patching, and what that costs
(docs/SCIENCE.md#causal-layers).

Probes read every layer: one capture gives every layer's states, and a probe fit costs the same
at each. An edit or a patch at block ℓ needs a forward pass from ℓ to the output, n − ℓ blocks,
for every edited sequence, method and random draw: over every block that is n(n+1)/2 block
passes, the part of a measurement that grows as layers² × width² (78–86% of the FLOPs at
Pythia scale). A stride keeps the causal profile's shape at a fraction of that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def causal_layers(n_layers: int, max_layers: int | None) -> list[int] | None:
    """The blocks (0-based) interventions and patching run at: every block when ``max_layers`` is
    None or ``n_layers <= max_layers`` (returns None, "every block"); else every
    ``s = ⌈n_layers / max_layers⌉``-th block from block 0, and the last block (where the readout
    happens), i.e. at most ``max_layers + 1`` blocks.

    Raises:
        ValueError: ``n_layers`` or ``max_layers`` below 1.
    """
    if n_layers < 1 or (max_layers is not None and max_layers < 1):
        raise ValueError(f"n_layers {n_layers} and max_layers {max_layers} must be at least 1")
    if max_layers is None or n_layers <= max_layers:
        return None
    stride = math.ceil(n_layers / max_layers)
    return sorted({*range(0, n_layers, stride), n_layers - 1})


def downstream_share(n_layers: int, layers: Sequence[int] | None) -> float:
    """The share of every-block's edited-forward (and patched-forward) FLOPs that ``layers`` cost:
    Σ_{ℓ ∈ layers} (n − ℓ) / Σ_{ℓ=0}^{n−1} (n − ℓ), block passes from the edited block to the
    output (None: every block, 1.0)."""
    if layers is None:
        return 1.0
    return sum(n_layers - ly for ly in layers) / (n_layers * (n_layers + 1) / 2)
