"""The metrics of one layer curve and its profile class (docs/SCIENCE.md#profiles; the
definitions: :mod:`science.profiles`). Pure Python + numpy, no torch."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from layerscope_core.layers import depth  # the one definition (docs/SCIENCE.md#normalised-depth)
from science.profiles.rule import DEFAULT_RULE, MIN_GAIN, PEAK_FRACTION, ClassRule

METRIC_NAMES = (
    "best_layer",
    "first_95",
    "late_concentration",
    "auc",
    "max_accuracy",
    "depth_first_95",
    "gain_over_majority",
    "gain_over_emb",
)
LAYER_INDEX_METRICS = ("best_layer", "first_95")  # layer indices: −1 (emb) .. n_layers − 1


def layer_key(k: Any) -> int:
    """A curve's key as a layer index: ``"emb"`` → −1, ``"3"`` or 3 → 3."""
    if isinstance(k, str):
        return -1 if k == "emb" else int(k)
    return int(k)


def normalise_keys(curve: Mapping[Any, float]) -> dict[int, float]:
    """``{layer: acc}`` with int keys, sorted, checked contiguous −1..n−1."""
    c = {layer_key(k): float(v) for k, v in curve.items()}
    if not c:
        raise ValueError("empty layer curve")
    layers = sorted(c)
    if layers != list(range(-1, layers[-1] + 1)) or layers[-1] < 0:
        raise ValueError(f"layer curve must cover emb (-1) and blocks 0..n-1 contiguously, got {layers}")
    return {k: c[k] for k in layers}


def n_blocks(c: dict[int, float]) -> int:
    """n, the blocks of a normalised curve (its layers are −1..n−1)."""
    return max(c) + 1


def floor_of(c: dict[int, float], baseline: float | None) -> float:
    """The floor ``f``: ``baseline`` (the majority rate) when given, else the curve's minimum."""
    return min(c.values()) if baseline is None else float(baseline)


def best_layer(curve: Mapping[Any, float]) -> int:
    """Layer with the highest accuracy (earliest on ties)."""
    c = normalise_keys(curve)
    top = max(c.values())
    return min(k for k, v in c.items() if v == top)


def first_95(curve: Mapping[Any, float], fraction: float = PEAK_FRACTION, baseline: float | None = None) -> int | None:
    """First layer whose gain above the floor reaches ``fraction`` of the largest gain:
    ``acc − f ≥ fraction · (max(acc) − f)``, ``f`` = ``baseline`` (the majority rate) or the
    curve's minimum. A curve with no gain (all equal to the floor) → its first layer, emb; a
    curve entirely below its floor has no gain to reach a share of → None."""
    return _first_95(normalise_keys(curve), fraction, baseline)


def _first_95(c: dict[int, float], fraction: float, baseline: float | None) -> int | None:
    """:func:`first_95` of a curve already through :func:`normalise_keys`."""
    f = floor_of(c, baseline)
    top = max(c.values())
    if top < f - 1e-12:
        return None
    thr = f + fraction * (top - f)
    return min(k for k, v in c.items() if v >= thr - 1e-12)


def computation_floor(curve: Mapping[Any, float], baseline: float | None = None) -> float:
    """``max(baseline, acc[emb])`` (``acc[emb]`` without a baseline): what is readable before any
    block has run, the floor late concentration is measured from."""
    return _computation_floor(normalise_keys(curve), baseline)


def _computation_floor(c: dict[int, float], baseline: float | None) -> float:
    return c[-1] if baseline is None else max(float(baseline), c[-1])


def late_concentration(
    curve: Mapping[Any, float], min_gain: float = MIN_GAIN, baseline: float | None = None
) -> float | None:
    """Share of the blocks' gain (last layer − :func:`computation_floor`) made by the last block;
    None if that gain < ``min_gain``."""
    return _late_concentration(normalise_keys(curve), min_gain, baseline)


def _late_concentration(c: dict[int, float], min_gain: float, baseline: float | None) -> float | None:
    """:func:`late_concentration` of a curve already through :func:`normalise_keys`."""
    last = n_blocks(c) - 1
    gain = c[last] - _computation_floor(c, baseline)
    if gain < min_gain:
        return None
    return (c[last] - c[last - 1]) / gain


def normalised_curve(curve: Mapping[Any, float], baseline: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(depth [n+1], ŷ [n+1])``: ŷ = clip((acc − base)/(max − base), 0, 1) (:mod:`science.profiles`)."""
    c = normalise_keys(curve)
    n = n_blocks(c)
    x = np.array([depth(k, n) for k in c])
    acc = np.array(list(c.values()))
    base = floor_of(c, baseline)
    span = acc.max() - base
    if span <= 1e-12:
        return x, np.zeros_like(acc)
    return x, np.clip((acc - base) / span, 0.0, 1.0)


def auc(curve: Mapping[Any, float], baseline: float | None = None) -> float | None:
    """Area under the normalised curve against depth (0..1); None if degenerate."""
    c = normalise_keys(curve)
    if max(c.values()) - floor_of(c, baseline) <= 1e-12:
        return None
    x, y = normalised_curve(c, baseline)
    return float(np.trapezoid(y, x))


def curve_defect(curve: Mapping[Any, float]) -> str | None:
    """Why a curve has no profile, or None when it has one: not contiguous from emb, or an
    accuracy that is not a finite number."""
    try:
        c = normalise_keys(curve)
    except (ValueError, TypeError) as exc:
        return str(exc)
    bad = [k for k, v in c.items() if not math.isfinite(v)]
    return f"accuracy not finite at layer(s) {bad}" if bad else None


def profile_class(curve: Mapping[Any, float], baseline: float | None = None, rule: ClassRule = DEFAULT_RULE) -> str:
    """``flat`` | ``early`` | ``late`` | ``gradual`` (checks in that order; :mod:`science.profiles`),
    with the thresholds of ``rule``."""
    return _profile_class(normalise_keys(curve), baseline, rule, rule.flat_margin)


def _profile_class(c: dict[int, float], baseline: float | None, rule: ClassRule, flat_margin: float) -> str:
    """:func:`profile_class` of a curve already through :func:`normalise_keys`, ``flat_margin``
    in the place of ``rule.flat_margin``."""
    if max(c.values()) - floor_of(c, baseline) < flat_margin:
        return "flat"
    f95 = _first_95(c, rule.peak_fraction, baseline)
    d95 = None if f95 is None else depth(f95, n_blocks(c))  # None only for f95 None: a curve has no ALL_LAYERS key
    if d95 is not None and d95 <= rule.early_depth + 1e-12:
        return "early"
    lc = _late_concentration(c, MIN_GAIN, baseline)
    if lc is not None and lc >= rule.late_share:
        return "late"
    return "gradual"


def classifier(curve: Mapping[Any, float], baseline: float | None = None) -> Callable[[ClassRule], str]:
    """``rule → profile_class(curve, baseline, rule)``, the curve checked once: for asking one
    curve's class under many rules (:func:`science.profiles.class_stability`'s 81).

    Raises:
        ValueError: as :func:`normalise_keys`, at once."""
    c = normalise_keys(curve)
    return lambda rule: _profile_class(c, baseline, rule, rule.flat_margin)


def profile_metrics(
    curve: Mapping[Any, float], baseline: float | None = None, rule: ClassRule = DEFAULT_RULE
) -> dict[str, Any]:
    """All single-curve metrics: best_layer, first_95, depth_first_95, late_concentration, auc,
    max_accuracy, floor, emb_accuracy, gain_over_majority, gain_over_emb (fractions 0..1),
    n_layers, profile_class. Each is a number, or None where it is undefined: a curve below its
    floor has no first_95; a curve whose accuracies are not all finite has no metric at all
    (``undefined`` then says why)."""
    defect = curve_defect(curve)
    if defect is not None:
        return {
            **dict.fromkeys((*METRIC_NAMES, "floor", "emb_accuracy", "n_layers", "profile_class")),
            "undefined": defect,
        }
    c = normalise_keys(curve)
    f95 = first_95(c, rule.peak_fraction, baseline=baseline)
    f = floor_of(c, baseline)
    return {
        "best_layer": best_layer(c),
        "first_95": f95,
        "depth_first_95": None if f95 is None else depth(f95, n_blocks(c)),
        "late_concentration": late_concentration(c, baseline=baseline),
        "floor": f,
        "emb_accuracy": c[-1],
        "gain_over_majority": max(c.values()) - f,
        "gain_over_emb": c[n_blocks(c) - 1] - c[-1],
        "auc": auc(c, baseline),
        "max_accuracy": max(c.values()),
        "n_layers": n_blocks(c),
        "profile_class": profile_class(c, baseline, rule),
    }


def profile_distance(
    curve_a: Mapping[Any, float],
    curve_b: Mapping[Any, float],
    baseline_a: float | None = None,
    baseline_b: float | None = None,
    n_grid: int = 21,
) -> float:
    """RMS difference of the two normalised curves on ``n_grid`` depths in [0, 1] (0 = same shape)."""
    grid = np.linspace(0.0, 1.0, n_grid)
    xa, ya = normalised_curve(curve_a, baseline_a)
    xb, yb = normalised_curve(curve_b, baseline_b)
    return float(np.sqrt(np.mean((np.interp(grid, xa, ya) - np.interp(grid, xb, yb)) ** 2)))


def mean_curve(curves: Sequence[Mapping[Any, float]]) -> dict[int, float]:
    """Layer-wise mean of curves with the same layers (e.g. over seeds)."""
    cs = [normalise_keys(c) for c in curves]
    if not cs:
        raise ValueError("no curves to average")
    layers = list(cs[0])
    if any(list(c) != layers for c in cs):
        raise ValueError("curves to average must have the same layers")
    return {k: float(np.mean([c[k] for c in cs])) for k in layers}
