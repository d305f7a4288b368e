"""Where a variable is most readable against where removing it hurts most: the most damaging
layer and decoupling (docs/SCIENCE.md#profiles; the definitions: :mod:`science.profiles`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from science.profiles.curve import best_layer, layer_key, normalise_keys

NEAR_BEST_TOL = 0.01


def _damage_by_layer(
    interventions: Mapping[Any, float] | Iterable[Mapping[str, Any]],
    method: str | None = None,
    eval_length: int | None = None,
) -> dict[int, float]:
    if isinstance(interventions, Mapping):
        return {layer_key(k): float(v) for k, v in interventions.items() if v is not None}
    acc: dict[int, list[float]] = {}
    for r in interventions:
        if method is not None and r.get("method") != method:
            continue
        if eval_length is not None and r.get("eval_length") not in (None, eval_length):
            continue
        layer = int(r["layer"])
        if layer < -1 or r.get("delta_pp") is None:
            continue
        acc.setdefault(layer, []).append(float(r["delta_pp"]))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def most_damaging_layer(
    interventions: Mapping[Any, float] | Iterable[Mapping[str, Any]],
    method: str | None = None,
    eval_length: int | None = None,
) -> int | None:
    """Layer with the most negative mean ``delta_pp``.

    Args:
        interventions: ``{layer: delta_pp}`` or rows (dicts with ``layer``, ``delta_pp`` and
            optionally ``method`` / ``eval_length``; several rows per layer are averaged; layer
            −2 = "every layer" component edits are skipped).
        method, eval_length: filters for rows.

    Returns:
        The layer, or None when there is nothing to rank.
    """
    d = _damage_by_layer(interventions, method, eval_length)
    if not d:
        return None
    worst = min(d.values())
    return min(k for k, v in d.items() if v == worst)


def near_best_layers(curve: Mapping[Any, float], tol: float = NEAR_BEST_TOL) -> list[int]:
    """Layers whose accuracy is within ``tol`` (fraction) of the best: a plateau counts as one."""
    c = normalise_keys(curve)
    top = max(c.values())
    return [k for k, v in c.items() if v >= top - tol - 1e-12]


def decoupling(
    curve: Mapping[Any, float],
    interventions: Mapping[Any, float] | Iterable[Mapping[str, Any]],
    method: str | None = None,
    eval_length: int | None = None,
    min_distance: int = 1,
    near_best_tol: float = NEAR_BEST_TOL,
) -> dict[str, Any]:
    """Best-probe layer vs most-damaging layer.

    ``decoupled`` is True when the most damaging layer is at least ``min_distance`` layers from
    the best-probe layer **and** is not one of the near-best layers (accuracy within
    ``near_best_tol`` of the best, :func:`near_best_layers`), so a plateau of equally readable
    layers, where the argmax is decided by noise, is not called decoupled.

    Returns:
        ``{best_layer, near_best_layers, damaging_layer, distance (layers), decoupled (bool),
        delta_at_best_pp (mean ``delta_pp`` of the rows given, at the best layer: claim 4 gives the
        drop beyond random removal, ``science.claims.necessity.beyond_random``), delta_near_best_pp (most negative delta
        over the near-best layers), delta_at_damaging_pp}``; the intervention fields are None
        without intervention data.
    """
    b = best_layer(curve)
    near = near_best_layers(curve, near_best_tol)
    d = _damage_by_layer(interventions, method, eval_length)
    m = most_damaging_layer(d)
    if m is None:
        return {
            "best_layer": b,
            "near_best_layers": near,
            "damaging_layer": None,
            "distance": None,
            "decoupled": None,
            "delta_at_best_pp": None,
            "delta_near_best_pp": None,
            "delta_at_damaging_pp": None,
        }
    dist = abs(b - m)
    near_d = [d[k] for k in near if k in d]
    return {
        "best_layer": b,
        "near_best_layers": near,
        "damaging_layer": m,
        "distance": dist,
        "decoupled": dist >= min_distance and m not in near,
        "delta_at_best_pp": d.get(b),
        "delta_near_best_pp": min(near_d) if near_d else None,
        "delta_at_damaging_pp": d[m],
    }
