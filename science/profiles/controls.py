"""A curve against its random-init control: the learned gain, the control margin and the class
of the gain (docs/SCIENCE.md#controls; the definitions: :mod:`science.profiles`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from science.profiles.curve import _profile_class, normalise_keys, profile_metrics
from science.profiles.rule import DEFAULT_RULE, FLAT_MARGIN, MIN_GAIN, NOT_ABOVE_CONTROL, ClassRule

CONTROL_SD_MULT = 3.0  # control margin = this many control-seed standard deviations (at least MIN_GAIN)


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
    cls = _profile_class(learned_gain(curve, control), 0.0, rule, margin)
    return NOT_ABOVE_CONTROL if cls == "flat" else cls


def control_classifier(
    curve: Mapping[Any, float], control: Mapping[Any, float], margin: float
) -> Callable[[ClassRule], str]:
    """``rule → control_class(curve, control, margin + (rule.flat_margin − FLAT_MARGIN), rule)``:
    the margin moves with the rule's flat margin (the class stability of a cell read against its
    controls); the learned gain is taken once.

    Raises:
        ValueError: as :func:`learned_gain`, at once."""
    g = learned_gain(curve, control)

    def classify(rule: ClassRule) -> str:
        cls = _profile_class(g, 0.0, rule, margin + (rule.flat_margin - FLAT_MARGIN))
        return NOT_ABOVE_CONTROL if cls == "flat" else cls

    return classify


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
