"""Profiles against the random-init control, class stability, and every metric defined on every
curve a run can have (docs/SCIENCE.md#controls, #class-stability)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from science import profiles as P

CTRL = {-1: 0.70, 0: 0.80, 1: 0.80, 2: 0.80, 3: 0.80}  # a random model already reads 0.8 from block 0


@pytest.mark.parametrize(
    "curve,expected",
    [
        # learned gain 0, .15, .15, .15, .15 → 95 % reached at block 0 (depth .25)
        ({-1: 0.70, 0: 0.95, 1: 0.95, 2: 0.95, 3: 0.95}, "early"),
        # gain only in the last block → late
        ({-1: 0.70, 0: 0.80, 1: 0.80, 2: 0.81, 3: 0.99}, "late"),
        # gain builds block by block → gradual
        ({-1: 0.70, 0: 0.84, 1: 0.88, 2: 0.93, 3: 0.97}, "gradual"),
        # high raw accuracy everywhere but no more than the control → not above control
        ({-1: 0.70, 0: 0.81, 1: 0.80, 2: 0.81, 3: 0.80}, P.NOT_ABOVE_CONTROL),
    ],
)
def test_hand_made_curves_get_their_class_against_the_control(curve, expected):
    assert P.control_class(curve, CTRL, margin=0.02) == expected


def test_a_block_at_or_below_its_control_never_makes_a_curve_early():
    # the case: trained block 0 (0.919) below its initialisation (0.928), the gain later
    ctrl = {-1: 0.73, 0: 0.928, 1: 0.93, 2: 0.93, 3: 0.93}
    trained = {-1: 0.73, 0: 0.919, 1: 0.97, 2: 0.975, 3: 0.975}
    assert P.profile_class(trained, baseline=0.456) == "early"  # against the majority floor
    cls = P.control_class(trained, ctrl, margin=0.02)
    assert cls != "early" and cls in ("gradual", "late")
    m = P.control_metrics(trained, ctrl, margin=0.02)
    assert m["first_95"] >= 2 and m["gain_over_control"] == pytest.approx(0.045)


def test_control_margin_comes_from_the_controls_spread():
    a = {-1: 0.5, 0: 0.60, 1: 0.60}
    b = {-1: 0.5, 0: 0.62, 1: 0.60}
    c = {-1: 0.5, 0: 0.64, 1: 0.60}
    sd = 0.02  # std (ddof 1) of .60 .62 .64 at layer 0
    assert P.control_margin([a, b, c]) == pytest.approx(P.CONTROL_SD_MULT * sd)
    assert P.control_margin([a, a, a]) == P.MIN_GAIN  # no spread: the floor
    assert P.control_margin([a]) == P.FLAT_MARGIN  # one control: nothing to measure


def test_summary_against_controls_per_seed_and_stability():
    curves = [{-1: 0.7, 0: 0.95, 1: 0.96, 2: 0.96, 3: 0.96}, {-1: 0.71, 0: 0.965, 1: 0.97, 2: 0.97, 3: 0.97}]
    ctrls = [CTRL, {k: v + 0.01 for k, v in CTRL.items()}]
    s = P.summarise_against_controls(curves, ctrls, seeds=[0, 1])
    assert s["profile_class"] == "early" and s["class_votes"] == {"early": 2}
    assert s["stability"]["of"] == 81 and s["stability"]["class"] == "early"
    assert s["metrics"]["auc"]["n"] == 2 and 0 <= s["metrics"]["auc"]["mean"] <= 1
    with pytest.raises(ValueError):
        P.summarise_against_controls(curves, ctrls[:1])


def test_class_stability_flags_a_class_on_the_edge():
    # block 1 sits 0.5 pp under the 95 %-of-gain line: moving the level by 2 pp flips early/gradual
    edge = {-1: 0.45, 0: 0.80, 1: 0.94, 2: 0.97, 3: 0.95}
    s = P.class_stability(lambda r: P.profile_class(edge, 0.45, r))
    assert not s["stable"] and s["agree"] < s["of"] == 81 and len(s["classes"]) >= 2
    solid = {-1: 0.45, 0: 0.99, 1: 0.99, 2: 0.99, 3: 0.99}
    assert P.class_stability(lambda r: P.profile_class(solid, 0.45, r))["stable"]


def test_first_95_of_a_curve_below_its_floor_is_none_not_an_error():
    # the smoke-suite curve that broke /api/profiles: never reaches its majority floor
    assert P.first_95({-1: 0.15, 0: 0.16}, baseline=0.165) is None
    m = P.profile_metrics({-1: 0.15, 0: 0.16}, baseline=0.165)
    assert m["first_95"] is None and m["depth_first_95"] is None and m["profile_class"] == "flat"
    s = P.summarise_profiles([{-1: 0.15, 0: 0.16}, {-1: 0.15, 0: 0.17}], [0.165, 0.165])
    assert s["metrics"]["first_95"]["n"] == 1  # only the seed that has one


def test_a_nan_accuracy_makes_every_metric_none_with_a_reason():
    m = P.profile_metrics({-1: 0.5, 0: float("nan"), 1: 0.9})
    assert m["undefined"].startswith("accuracy not finite") and m["profile_class"] is None
    s = P.summarise_profiles([{-1: 0.5, 0: float("nan"), 1: 0.9}], [0.5])
    assert s["profile_class"] is None and s["stability"] is None


accuracy = st.one_of(st.floats(0.0, 1.0), st.just(float("nan")))


@st.composite
def curves(draw):
    n = draw(st.integers(1, 6))
    return {layer: draw(accuracy) for layer in range(-1, n)}


@settings(max_examples=300, deadline=None)
@given(curve=curves(), baseline=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_every_metric_is_defined_or_none_for_any_curve(curve, baseline):
    m = P.profile_metrics(curve, baseline)
    finite = all(math.isfinite(v) for v in curve.values())
    assert (m.get("undefined") is None) == finite
    if finite:
        assert m["profile_class"] in P.CLASSES
        n = len(curve) - 1
        assert m["best_layer"] in range(-1, n)
        assert m["first_95"] is None or m["first_95"] in range(-1, n)
        assert m["auc"] is None or 0.0 <= m["auc"] <= 1.0 + 1e-9
        s = P.summarise_profiles([curve, curve], [baseline, baseline])
        assert s["profile_class"] == m["profile_class"] and s["stability"]["of"] == 81


@settings(max_examples=200, deadline=None)
@given(curve=curves(), control=curves())
def test_every_control_metric_is_defined_or_none(curve, control):
    if len(curve) != len(control):
        with pytest.raises(ValueError):
            P.learned_gain(curve, control)
        return
    m = P.control_metrics(curve, control, margin=0.03)
    if m.get("undefined") is None:
        assert m["profile_class"] in ("early", "late", "gradual", P.NOT_ABOVE_CONTROL)


def test_a_layer_interval_covers_whole_layers():
    curves = [
        {-1: 0.5, 0: 0.96, 1: 0.99, 2: 0.99, 3: 0.99},
        {-1: 0.5, 0: 0.90, 1: 0.99, 2: 0.99, 3: 0.99},
        {-1: 0.5, 0: 0.97, 1: 0.99, 2: 0.99, 3: 0.99},
    ]
    m = P.summarise_profiles(curves, [0.5] * 3)["metrics"]["first_95"]
    assert m["lo"] == int(m["lo"]) and m["hi"] == int(m["hi"]) and -1 <= m["lo"] <= m["mean"] <= m["hi"] <= 3
