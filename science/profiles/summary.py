"""A cell's profile over its seeds: per-seed metrics, their means and t-intervals, the class of
the seed-mean curve and its stability, against the majority rate or the random-init controls
(the ``/api/profiles`` shape; docs/SCIENCE.md#profiles)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from science.profiles.controls import control_class, control_classifier, control_margin, control_metrics
from science.profiles.curve import (
    LAYER_INDEX_METRICS,
    METRIC_NAMES,
    classifier,
    curve_defect,
    layer_key,
    mean_curve,
    n_blocks,
    normalise_keys,
    profile_class,
    profile_metrics,
)
from science.profiles.rule import class_stability
from science.stats import bounds_for, t_interval


def _interval_metrics(per_seed: Sequence[Mapping[str, Any]], n_layers: int, confidence: float) -> dict[str, Any]:
    metrics = {}
    for name in METRIC_NAMES:
        vals = [m[name] for m in per_seed if m.get(name) is not None]
        # intervals clipped to what the metric can be (accuracies and depths 0..1, layers −1..n−1),
        # here, once, so the claims, /api/profiles, the pages and the report show the same interval
        bounds = (-1.0, float(n_layers - 1)) if name in LAYER_INDEX_METRICS else bounds_for(name)
        mean, lo, hi = t_interval(vals, confidence, bounds=bounds) if vals else (None, None, None)
        if name in LAYER_INDEX_METRICS and lo is not None and hi is not None:
            # a layer interval covers whole layers: widened outward to the layers it reaches (−0.1 → emb)
            lo, hi = float(math.floor(lo + 1e-9)), float(math.ceil(hi - 1e-9))
        metrics[name] = {"mean": mean, "lo": lo, "hi": hi, "n": len(vals)}
    return metrics


def summarise_against_controls(
    curves: Sequence[Mapping[Any, float]],
    controls: Sequence[Mapping[Any, float]],
    seeds: Sequence[int | None] | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The control-adjusted summary of one cell: each seed's curve against its own control
    (``controls[i]`` is seed i's), the cell's class from the seed-mean learned gain, the margin
    from the controls' spread (:func:`control_margin`), and the class's stability.

    Returns:
        ``{n, seeds, margin, profile_class, class_votes, stability, metrics: {name: {mean, lo, hi, n}},
        per_seed: [...], control_curve (seed mean)}``.

    Raises:
        ValueError: ``curves`` and ``controls`` differ in length, or a pair covers different layers.
    """
    if len(curves) != len(controls):
        raise ValueError(f"{len(curves)} curves but {len(controls)} controls")
    margin = control_margin(controls)
    per_seed = []
    for i, (c, k) in enumerate(zip(curves, controls)):
        m = control_metrics(c, k, margin)
        m["seed"] = None if seeds is None else seeds[i]
        per_seed.append(m)
    n_layers = max((n_blocks(normalise_keys(c)) for c in curves), default=0)
    mc, mk = mean_curve(curves), mean_curve(controls)
    return {
        "n": len(curves),
        "seeds": list(seeds) if seeds is not None else None,
        "margin": margin,
        "profile_class": control_class(mc, mk, margin),
        "class_votes": dict(Counter(m["profile_class"] for m in per_seed)),
        "stability": class_stability(control_classifier(mc, mk, margin)),
        "metrics": _interval_metrics(per_seed, n_layers, confidence),
        "per_seed": per_seed,
        "control_curve": mk,
    }


def summarise_profiles(
    curves: Sequence[Mapping[Any, float]],
    baselines: Sequence[float | None] | None = None,
    seeds: Sequence[int | None] | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per-seed profile metrics plus mean and t-interval over seeds (the ``/api/profiles`` shape).

    Args:
        curves: one curve per seed (same layers).
        baselines: per-seed majority baselines (or None).
        seeds: the seed ids, for the record.

    Returns:
        ``{n, seeds, profile_class (of the seed-mean curve with the mean baseline; None when a
        curve has no profile), class_votes, stability (:func:`class_stability` of that class),
        metrics: {name: {mean, lo, hi, n}}, per_seed: [metrics + seed]}``; each interval is
        clipped to the metric's range (``science.stats.BOUNDS``; layer indices to −1..n−1).
    """
    if baselines is None:
        baselines = [None] * len(curves)
    per_seed = []
    for i, (c, b) in enumerate(zip(curves, baselines)):
        m = profile_metrics(c, b)
        m["seed"] = None if seeds is None else seeds[i]
        per_seed.append(m)
    n_layers = max((max(layer_key(k) for k in c) + 1 for c in curves if c), default=0)
    metrics = _interval_metrics(per_seed, n_layers, confidence)
    bl = [b for b in baselines if b is not None]
    base = float(np.mean(bl)) if bl else None
    usable = bool(curves) and all(curve_defect(c) is None for c in curves)
    mc = mean_curve(curves) if usable else None
    return {
        "n": len(curves),
        "seeds": list(seeds) if seeds is not None else None,
        "profile_class": profile_class(mc, base) if mc is not None else None,
        "class_votes": dict(Counter(m["profile_class"] for m in per_seed)),
        "stability": class_stability(classifier(mc, base)) if mc is not None else None,
        "metrics": metrics,
        "per_seed": per_seed,
    }
