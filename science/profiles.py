"""Profile metrics of a layer curve (docs/SCIENCE.md#profiles). Pure Python + numpy, no torch.

A *curve* is ``{layer: probe accuracy}`` for layers ``-1..n-1`` (−1 = ``emb``), accuracies as
fractions 0..1. Keys may also be the strings ``"emb"`` / ``"0"`` … (a JSON round trip). Layers
must be contiguous from −1 (``emb``) to ``n−1``; otherwise :class:`ValueError`.

Definitions (documented choices):

- **depth** of layer ℓ = ``(ℓ+1)/n`` (emb → 0, last block → 1): ``layerscope_core.layers.depth``
  (docs/SCIENCE.md#normalised-depth).
- **best_layer**: argmax of accuracy; ties → the earliest layer.
- **floor** ``f``: the majority baseline when given, else the curve's minimum. Raw accuracy is
  never compared with a fraction of itself: a curve that starts at 0.735 with a majority of
  0.45 has most of its "accuracy" before any block ran.
- **first_95**: the first layer (in order emb, 0, …) whose *gain above the floor* reaches 95 % of
  the largest gain: ``acc − f ≥ 0.95 · (max(acc) − f)``.
- **late_concentration** = ``(acc[n−1] − acc[n−2]) / (acc[n−1] − f_c)`` with the
  *no-computation floor* ``f_c = max(f, acc[emb])`` (what is readable before any block ran;
  ``acc[emb]`` alone without a baseline): the share of the gain the blocks make that the last
  block makes (for n = 1 the previous layer is emb, so the share is 1). Undefined (None) when
  the gain ``acc[n−1] − f_c < MIN_GAIN`` (2 pp): nothing to apportion. Not clipped: < 0 or > 1
  when the curve dips below the floor / above the last layer at n−2.
- **gain_over_majority** ``max(acc) − f`` and **gain_over_emb** ``acc[n−1] − acc[emb]`` are
  reported beside the class, so a reader sees both floors.
- **normalised curve** ``ŷ(ℓ) = clip((acc − base)/(max − base), 0, 1)`` with ``base`` the
  majority baseline when given, else the curve's minimum; all-zero when ``max − base ≤ 1e-12``.
- **auc**: trapezoid area under ``ŷ`` against depth on [0, 1] (n+1 points). Near 1: readable from
  the start; near ``1/(2n)``: readable only at the end. None when the curve is degenerate.
- **profile_class**, checks in this order:
  1. ``flat`` when ``max − base < FLAT_MARGIN`` (5 pp): never readable, no class (an addition to
     the three classes of the study, so a chance-level curve is not called "early");
  2. ``early`` when ``depth(first_95) ≤ 0.5``: 95 % reached in the first half, emb included
     (n = 4: emb, 0, 1; n = 12: emb … 5);
  3. ``late`` when ``late_concentration ≥ LATE_SHARE`` (0.5);
  4. ``gradual`` otherwise.
- **most_damaging_layer**: the layer whose intervention has the most negative mean ``delta_pp``
  (edited − base, pp); ties → earliest.
- **decoupling**: best-probe layer vs most-damaging layer; ``distance = |best − damaging|``
  layers; ``decoupled`` when ``distance ≥ min_distance`` (default 1) and the damaging layer is
  not *near-best* (probe accuracy within ``NEAR_BEST_TOL`` = 1 pp of the best: on a plateau the
  argmax is noise).
- **reversal**: two families A, B and two tasks T1, T2 whose classes differ on each task and a
  class moves across: ``full`` when ``class(A,T1) = class(B,T2)`` and ``class(B,T1) =
  class(A,T2)`` (a swap), ``partial`` when only one of those holds (e.g. Parity: Transformer
  gradual / LSTM late; Dyck: Transformer early / LSTM gradual — "gradual" changes hands).
- **profile_distance**: RMS difference of two normalised curves on a common depth grid
  (linear interpolation, 21 points), in [0, 1].

Against the random-init control (docs/SCIENCE.md#controls): the **learned gain** of layer ℓ is
``g(ℓ) = acc(ℓ) − ctrl(ℓ)``, ``ctrl`` the same architecture and seed at initialisation probed
the same way. Every metric above is then computed on ``g`` with the floor 0 (the control is the
per-layer floor): first_95 is the first layer whose learned gain reaches 95 % of the largest,
late concentration the last block's share of the learned gain the blocks make, the AUC the area
under ``clip(g / max g, 0, 1)``. The class ``not above control`` replaces ``flat``: the largest
learned gain is below the **control margin**, ``max(MIN_GAIN, CONTROL_SD_MULT × the largest
per-layer standard deviation of the control curves across seeds)`` (:func:`control_margin`).
A layer at or below its control never reaches 95 % of a positive gain, so it is never the
layer that makes a curve ``early``.

**Class stability** (:func:`class_stability`): the class under every combination of the rule's
thresholds moved by :data:`STABILITY_MARGINS` (95 % level ± 2 pp, early depth ± 0.125 — half a
layer at n = 4, which moves no cut on a 4-layer grid —, late share ± 0.1, flat/control margin
± 2 pp): 3⁴ = 81 rules; a class is *fragile* when any of them gives another class.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from itertools import combinations, product
from typing import Any

import numpy as np

from layerscope_core.layers import depth  # the one definition (docs/SCIENCE.md#normalised-depth)
from science.stats import bounds_for, t_interval

__all__ = [
    "PEAK_FRACTION",
    "EARLY_DEPTH",
    "LATE_SHARE",
    "MIN_GAIN",
    "FLAT_MARGIN",
    "CLASSES",
    "normalise_keys",
    "depth",
    "best_layer",
    "first_95",
    "computation_floor",
    "late_concentration",
    "normalised_curve",
    "auc",
    "profile_class",
    "profile_metrics",
    "most_damaging_layer",
    "near_best_layers",
    "decoupling",
    "NEAR_BEST_TOL",
    "reversal_pairs",
    "profile_distance",
    "mean_curve",
    "summarise_profiles",
    "ClassRule",
    "DEFAULT_RULE",
    "STABILITY_MARGINS",
    "NOT_ABOVE_CONTROL",
    "CONTROL_SD_MULT",
    "learned_gain",
    "control_margin",
    "control_class",
    "control_metrics",
    "rules_within_margin",
    "class_stability",
    "curve_defect",
]

PEAK_FRACTION = 0.95
EARLY_DEPTH = 0.5
LATE_SHARE = 0.5
MIN_GAIN = 0.02
FLAT_MARGIN = 0.05
NEAR_BEST_TOL = 0.01
NOT_ABOVE_CONTROL = "not above control"
CLASSES = ("early", "late", "gradual", "flat", NOT_ABOVE_CONTROL)
CONTROL_SD_MULT = 3.0  # control margin = this many control-seed standard deviations (at least MIN_GAIN)


@dataclass(frozen=True)
class ClassRule:
    """The thresholds of :func:`profile_class` (fractions; depth on the normalised axis)."""

    peak_fraction: float = PEAK_FRACTION
    early_depth: float = EARLY_DEPTH
    late_share: float = LATE_SHARE
    flat_margin: float = FLAT_MARGIN


DEFAULT_RULE = ClassRule()
# how far each threshold is moved for class stability (docs/SCIENCE.md#class-stability)
STABILITY_MARGINS: dict[str, float] = {
    "peak_fraction": 0.02,
    "early_depth": 0.125,
    "late_share": 0.1,
    "flat_margin": 0.02,
}
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


def _key(k: Any) -> int:
    if isinstance(k, str):
        return -1 if k == "emb" else int(k)
    return int(k)


def normalise_keys(curve: Mapping[Any, float]) -> dict[int, float]:
    """``{layer: acc}`` with int keys, sorted, checked contiguous −1..n−1."""
    c = {_key(k): float(v) for k, v in curve.items()}
    if not c:
        raise ValueError("empty layer curve")
    layers = sorted(c)
    if layers != list(range(-1, layers[-1] + 1)) or layers[-1] < 0:
        raise ValueError(f"layer curve must cover emb (-1) and blocks 0..n-1 contiguously, got {layers}")
    return {k: c[k] for k in layers}


def _n(c: dict[int, float]) -> int:
    return max(c) + 1


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
    c = normalise_keys(curve)
    f = _base(c, baseline)
    top = max(c.values())
    if top < f - 1e-12:
        return None
    thr = f + fraction * (top - f)
    return min(k for k, v in c.items() if v >= thr - 1e-12)


def computation_floor(curve: Mapping[Any, float], baseline: float | None = None) -> float:
    """``max(baseline, acc[emb])`` (``acc[emb]`` without a baseline): what is readable before any
    block has run, the floor late concentration is measured from."""
    c = normalise_keys(curve)
    return c[-1] if baseline is None else max(float(baseline), c[-1])


def late_concentration(
    curve: Mapping[Any, float], min_gain: float = MIN_GAIN, baseline: float | None = None
) -> float | None:
    """Share of the blocks' gain (last layer − :func:`computation_floor`) made by the last block;
    None if that gain < ``min_gain``."""
    c = normalise_keys(curve)
    last = _n(c) - 1
    gain = c[last] - computation_floor(c, baseline)
    if gain < min_gain:
        return None
    return (c[last] - c[last - 1]) / gain


def _base(c: dict[int, float], baseline: float | None) -> float:
    return min(c.values()) if baseline is None else float(baseline)


def normalised_curve(curve: Mapping[Any, float], baseline: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(depth [n+1], ŷ [n+1])``: ŷ = clip((acc − base)/(max − base), 0, 1) (module docstring)."""
    c = normalise_keys(curve)
    n = _n(c)
    x = np.array([depth(k, n) for k in c])
    acc = np.array(list(c.values()))
    base = _base(c, baseline)
    span = acc.max() - base
    if span <= 1e-12:
        return x, np.zeros_like(acc)
    return x, np.clip((acc - base) / span, 0.0, 1.0)


def auc(curve: Mapping[Any, float], baseline: float | None = None) -> float | None:
    """Area under the normalised curve against depth (0..1); None if degenerate."""
    c = normalise_keys(curve)
    if max(c.values()) - _base(c, baseline) <= 1e-12:
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
    """``flat`` | ``early`` | ``late`` | ``gradual`` (checks in that order; module docstring),
    with the thresholds of ``rule``."""
    c = normalise_keys(curve)
    if max(c.values()) - _base(c, baseline) < rule.flat_margin:
        return "flat"
    f95 = first_95(c, rule.peak_fraction, baseline=baseline)
    if f95 is not None and depth(f95, _n(c)) <= rule.early_depth + 1e-12:
        return "early"
    lc = late_concentration(c, baseline=baseline)
    if lc is not None and lc >= rule.late_share:
        return "late"
    return "gradual"


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
    f = _base(c, baseline)
    return {
        "best_layer": best_layer(c),
        "first_95": f95,
        "depth_first_95": None if f95 is None else depth(f95, _n(c)),
        "late_concentration": late_concentration(c, baseline=baseline),
        "floor": f,
        "emb_accuracy": c[-1],
        "gain_over_majority": max(c.values()) - f,
        "gain_over_emb": c[_n(c) - 1] - c[-1],
        "auc": auc(c, baseline),
        "max_accuracy": max(c.values()),
        "n_layers": _n(c),
        "profile_class": profile_class(c, baseline, rule),
    }


# ----------------------------------------------------------------------------- against the control


def learned_gain(curve: Mapping[Any, float], control: Mapping[Any, float]) -> dict[int, float]:
    """``{layer: acc(ℓ) − ctrl(ℓ)}``: the trained curve above its random-init control.

    Raises:
        ValueError: the two curves cover different layers.
    """
    c, k = normalise_keys(curve), normalise_keys(control)
    if list(c) != list(k):
        raise ValueError(f"curve and control cover different layers: {list(c)} vs {list(k)}")
    return {layer: c[layer] - k[layer] for layer in c}


def control_margin(controls: Sequence[Mapping[Any, float]]) -> float:
    """The least learned gain that counts (fraction): ``max(MIN_GAIN, CONTROL_SD_MULT × the
    largest per-layer standard deviation (ddof 1) of the control curves across seeds)``;
    :data:`FLAT_MARGIN` with fewer than two controls (no spread to measure)."""
    cs = [normalise_keys(c) for c in controls]
    if len(cs) < 2:
        return FLAT_MARGIN
    layers = list(cs[0])
    sd = max(float(np.std([c[k] for c in cs], ddof=1)) for k in layers)
    return max(MIN_GAIN, CONTROL_SD_MULT * sd)


def control_class(
    curve: Mapping[Any, float], control: Mapping[Any, float], margin: float, rule: ClassRule = DEFAULT_RULE
) -> str:
    """The class of the learned gain: :data:`NOT_ABOVE_CONTROL` when its largest value is below
    ``margin`` (``rule.flat_margin`` is replaced by it), else early / late / gradual on the gain
    with the floor 0."""
    cls = profile_class(learned_gain(curve, control), 0.0, replace(rule, flat_margin=margin))
    return NOT_ABOVE_CONTROL if cls == "flat" else cls


def control_metrics(
    curve: Mapping[Any, float], control: Mapping[Any, float], margin: float, rule: ClassRule = DEFAULT_RULE
) -> dict[str, Any]:
    """:func:`profile_metrics` of the learned gain (floor 0), its class by :func:`control_class`;
    ``gain_over_majority`` there is the largest learned gain (``gain_over_control``, also given)."""
    g = learned_gain(curve, control)
    m = profile_metrics(g, 0.0, replace(rule, flat_margin=margin))
    m["profile_class"] = NOT_ABOVE_CONTROL if m["profile_class"] == "flat" else m["profile_class"]
    m["gain_over_control"] = m["gain_over_majority"]
    m["max_accuracy"] = max(normalise_keys(curve).values())
    m["margin"] = margin
    return m


def rules_within_margin(
    margins: Mapping[str, float] = STABILITY_MARGINS, base: ClassRule = DEFAULT_RULE
) -> list[ClassRule]:
    """Every rule with each threshold at its value − margin, its value, or + margin (3⁴ = 81)."""
    names = [f.name for f in fields(ClassRule)]
    steps = [(-margins.get(n, 0.0), 0.0, margins.get(n, 0.0)) for n in names]
    return [replace(base, **{n: getattr(base, n) + d for n, d in zip(names, ds)}) for ds in product(*steps)]


def class_stability(
    classify: Callable[[ClassRule], str], margins: Mapping[str, float] = STABILITY_MARGINS
) -> dict[str, Any]:
    """How a class holds when the rule's thresholds move by ``margins``.

    Args:
        classify: rule → class (e.g. ``lambda r: profile_class(curve, base, r)``).

    Returns:
        ``{class (under the default rule), agree (rules giving it), of (rules tried),
        stable (agree == of), classes: {class: count}}``.
    """
    default = classify(DEFAULT_RULE)
    got = Counter(classify(r) for r in rules_within_margin(margins))
    total = sum(got.values())
    return {"class": default, "agree": got[default], "of": total, "stable": got[default] == total, "classes": dict(got)}


def _damage_by_layer(
    interventions: Mapping[Any, float] | Iterable[Mapping[str, Any]],
    method: str | None = None,
    eval_length: int | None = None,
) -> dict[int, float]:
    if isinstance(interventions, Mapping):
        return {_key(k): float(v) for k, v in interventions.items() if v is not None}
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
        delta_at_best_pp (mean delta at the best layer), delta_near_best_pp (most negative delta
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


def reversal_pairs(classes: Mapping[tuple[str, str], str] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of tasks on which two architectures swap profile classes.

    Args:
        classes: ``{(task, family): class}`` or rows with ``task``, ``family``, ``profile_class``.
            ``flat`` cells are ignored.

    Returns:
        One dict per (family pair, task pair), families and tasks sorted:
        ``{families: [A, B], tasks: [T1, T2], kind: "full"|"partial", shared_class: [x, ...],
        classes: {T1: {A: c, B: d}, T2: {A: e, B: f}}}``.
    """
    if isinstance(classes, Mapping):
        cells = {(t, f): c for (t, f), c in classes.items()}
    else:
        cells = {(r["task"], r["family"]): r["profile_class"] for r in classes}
    cells = {k: v for k, v in cells.items() if v is not None and v != "flat"}
    tasks = sorted({t for t, _ in cells})
    fams = sorted({f for _, f in cells})
    out: list[dict[str, Any]] = []
    for A, B in combinations(fams, 2):
        for T1, T2 in combinations(tasks, 2):
            keys = [(T1, A), (T1, B), (T2, A), (T2, B)]
            if not all(k in cells for k in keys):
                continue
            c, d, e, f = (cells[k] for k in keys)
            if c == d or e == f:
                continue
            shared = sorted({x for x, ok in ((c, c == f), (d, d == e)) if ok})
            if not shared:
                continue
            out.append(
                {
                    "families": [A, B],
                    "tasks": [T1, T2],
                    "kind": "full" if (c == f and d == e) else "partial",
                    "shared_class": shared,
                    "classes": {T1: {A: c, B: d}, T2: {A: e, B: f}},
                }
            )
    return out


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
    seeds: Sequence[int] | None = None,
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
    n_layers = max((_n(normalise_keys(c)) for c in curves), default=0)
    mc, mk = mean_curve(curves), mean_curve(controls)
    return {
        "n": len(curves),
        "seeds": list(seeds) if seeds is not None else None,
        "margin": margin,
        "profile_class": control_class(mc, mk, margin),
        "class_votes": dict(Counter(m["profile_class"] for m in per_seed)),
        "stability": class_stability(lambda r: control_class(mc, mk, margin + (r.flat_margin - FLAT_MARGIN), r)),
        "metrics": _interval_metrics(per_seed, n_layers, confidence),
        "per_seed": per_seed,
        "control_curve": mk,
    }


def summarise_profiles(
    curves: Sequence[Mapping[Any, float]],
    baselines: Sequence[float | None] | None = None,
    seeds: Sequence[int] | None = None,
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
    n_layers = max((max(_key(k) for k in c) + 1 for c in curves if c), default=0)
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
        "stability": class_stability(lambda r: profile_class(mc, base, r)) if mc is not None else None,
        "metrics": metrics,
        "per_seed": per_seed,
    }
