"""Profile metrics of a layer curve (docs/SCIENCE.md#profiles). Pure Python + numpy, no torch.

The definitions below; the code, one job per module: :mod:`~science.profiles.rule` (the class
rule's thresholds, class stability), :mod:`~science.profiles.curve` (one curve's metrics and
class, normalised curves and their distance), :mod:`~science.profiles.controls` (against the
random-init control), :mod:`~science.profiles.decoupling` (most damaging layer, decoupling),
:mod:`~science.profiles.reversal` (reversal pairs), :mod:`~science.profiles.summary` (a cell over
its seeds). Every name is importable from ``science.profiles``.

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

from layerscope_core.layers import depth  # the one definition (docs/SCIENCE.md#normalised-depth)
from science.profiles.controls import (
    CONTROL_SD_MULT,
    control_class,
    control_classifier,
    control_margin,
    control_metrics,
    learned_gain,
)
from science.profiles.curve import (
    auc,
    best_layer,
    classifier,
    computation_floor,
    curve_defect,
    first_95,
    late_concentration,
    mean_curve,
    normalise_keys,
    normalised_curve,
    profile_class,
    profile_distance,
    profile_metrics,
)
from science.profiles.decoupling import NEAR_BEST_TOL, decoupling, most_damaging_layer, near_best_layers
from science.profiles.reversal import reversal_pairs
from science.profiles.rule import (
    CLASSES,
    DEFAULT_RULE,
    EARLY_DEPTH,
    FLAT_MARGIN,
    LATE_SHARE,
    MIN_GAIN,
    NOT_ABOVE_CONTROL,
    PEAK_FRACTION,
    STABILITY_MARGINS,
    ClassRule,
    class_stability,
    rules_within_margin,
)
from science.profiles.summary import summarise_against_controls, summarise_profiles

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
    "classifier",
    "profile_metrics",
    "most_damaging_layer",
    "near_best_layers",
    "decoupling",
    "NEAR_BEST_TOL",
    "reversal_pairs",
    "profile_distance",
    "mean_curve",
    "summarise_profiles",
    "summarise_against_controls",
    "ClassRule",
    "DEFAULT_RULE",
    "STABILITY_MARGINS",
    "NOT_ABOVE_CONTROL",
    "CONTROL_SD_MULT",
    "learned_gain",
    "control_margin",
    "control_class",
    "control_classifier",
    "control_metrics",
    "rules_within_margin",
    "class_stability",
    "curve_defect",
]
