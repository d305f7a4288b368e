"""Layer indices, names and normalised depth — the one definition every layer of the project uses.

The convention (docs/SCIENCE.md#layers): layer ``-1`` is the embedding output (``emb``), layers
``0..n_layers-1`` are the residual stream after each block, and ``-2`` (:data:`ALL_LAYERS`) is
not a layer but the sentinel of an edit applied to every layer at once (Conv1D removal). Imports
nothing from the project.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

EMB = -1
"""The embedding output, before any block."""

ALL_LAYERS = -2
"""Sentinel of an edit applied to every layer at once (``conv1d_removal``); not a position in the stack."""


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)  # int and numpy integers; not floats or strings
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r}") from None


def _check(layer: int, n_layers: int | None) -> tuple[int, int | None]:
    layer = _int("layer", layer)
    if n_layers is not None:
        n_layers = _int("n_layers", n_layers)
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1 (a model has at least one block), got {n_layers}")
    top = None if n_layers is None else n_layers - 1
    if layer < ALL_LAYERS or (top is not None and layer > top):
        span = "0..n_layers-1" if top is None else f"0..{top}"
        raise ValueError(f"layer must be -2 (every layer), -1 (emb) or a block {span}, got {layer}")
    return layer, n_layers


def layer_name(layer: int, n_layers: int | None = None) -> str:
    """The display name of a layer (docs/SCIENCE.md#layers): ``-1`` → ``"emb"``, ``-2``
    (:data:`ALL_LAYERS`) → ``"all"``, block ℓ → ``"ℓ"``.

    ``n_layers``, when given, is checked: a block index must lie in ``0..n_layers-1``.
    Raises ``ValueError`` for an index below ``-2`` or past the last block, ``TypeError`` for a
    non-integer.
    """
    layer, n_layers = _check(layer, n_layers)
    if layer == EMB:
        return "emb"
    if layer == ALL_LAYERS:
        return "all"
    return str(layer)


def depth(layer: int, n_layers: int) -> float | None:
    """Normalised depth ``(layer + 1) / n_layers`` (docs/SCIENCE.md#normalised-depth), so models
    of 4, 12 and 24 blocks share one axis.

    Edge cases, everywhere the same:

    - ``emb`` (``-1``) → ``0.0``; the last block → ``1.0``;
    - ``n_layers == 1``: ``emb`` → 0.0, block 0 → 1.0;
    - :data:`ALL_LAYERS` (``-2``) → ``None``: an edit of every layer has no single depth;
    - ``n_layers < 1`` or a layer outside ``-2..n_layers-1`` → ``ValueError`` (no model has no
      blocks; a number would hide the bug).
    """
    layer, n = _check(layer, n_layers)
    if layer == ALL_LAYERS:
        return None
    if n is None:
        raise TypeError("n_layers must be an int, got None")
    return (layer + 1) / n


__all__ = ["ALL_LAYERS", "EMB", "depth", "layer_name"]
