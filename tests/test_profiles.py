"""Profile metrics on hand-built curves with hand-computed answers."""

from __future__ import annotations

import pytest

from science import profiles as P

LATE = {-1: 0.50, 0: 0.52, 1: 0.53, 2: 0.55, 3: 0.99}  # Parity on an LSTM, as claimed
GRADUAL = {-1: 0.50, 0: 0.62, 1: 0.75, 2: 0.87, 3: 0.99}  # Transformer on Parity
EARLY = {-1: 0.55, 0: 0.97, 1: 0.98, 2: 0.98, 3: 0.98}  # Transformer on Dyck
FLAT = {-1: 0.50, 0: 0.51, 1: 0.50, 2: 0.52, 3: 0.51}


def test_best_and_first_95():
    assert P.best_layer(LATE) == 3 and P.first_95(LATE) == 3
    assert P.best_layer(EARLY) == 1  # ties → earliest (0.98 at 1, 2, 3)
    assert P.first_95(EARLY) == 0  # 0.97 ≥ 0.95·0.98
    assert P.first_95(GRADUAL) == 3  # 0.87 < 0.9405


def test_late_concentration_hand_computed():
    assert P.late_concentration(LATE) == pytest.approx((0.99 - 0.55) / (0.99 - 0.50))
    assert P.late_concentration(GRADUAL) == pytest.approx(0.12 / 0.49)
    assert P.late_concentration(FLAT) is None  # 1 pp gain < MIN_GAIN
    assert P.late_concentration({-1: 0.5, 0: 0.9}) == pytest.approx(1.0)  # n = 1


def test_auc_normalisation():
    # step at the end: ŷ = 0,0,0,0,1 at depths 0,.25,.5,.75,1 → area 0.125
    step = {-1: 0.5, 0: 0.5, 1: 0.5, 2: 0.5, 3: 1.0}
    assert P.auc(step, baseline=0.5) == pytest.approx(0.125)
    # linear ramp → 0.5; readable from emb → 1.0
    assert P.auc({-1: 0.5, 0: 0.625, 1: 0.75, 2: 0.875, 3: 1.0}, baseline=0.5) == pytest.approx(0.5)
    assert P.auc({-1: 1.0, 0: 1.0, 1: 1.0}, baseline=0.5) == pytest.approx(1.0)
    assert P.auc({-1: 0.5, 0: 0.5}, baseline=0.5) is None


def test_profile_classes_and_order_of_checks():
    assert P.profile_class(LATE, 0.5) == "late"
    assert P.profile_class(GRADUAL, 0.5) == "gradual"
    assert P.profile_class(EARLY, 0.5) == "early"
    assert P.profile_class(FLAT, 0.5) == "flat"
    # early wins over late: 95 % at layer 1 (depth 0.5) although the last block makes most gain
    odd = {-1: 0.5, 0: 0.6, 1: 0.96, 2: 0.3, 3: 0.97}
    assert P.late_concentration(odd) >= 0.5 and P.profile_class(odd, 0.5) == "early"
    # first half includes depth exactly 0.5 (layer 1 of 4), not layer 2
    assert P.profile_class({-1: 0.5, 0: 0.6, 1: 0.7, 2: 0.99, 3: 1.0}, 0.5) == "gradual"
    m = P.profile_metrics(LATE, 0.5)
    assert m["profile_class"] == "late" and m["n_layers"] == 4 and m["depth_first_95"] == 1.0


def test_string_keys_and_invalid_curves():
    assert P.best_layer({"emb": 0.9, "0": 0.5}) == -1
    with pytest.raises(ValueError):
        P.best_layer({0: 0.5, 2: 0.6})  # no emb, gap
    with pytest.raises(ValueError):
        P.best_layer({})


def test_most_damaging_and_decoupling():
    rows = [
        {"layer": 0, "delta_pp": -5.0, "method": "leace"},
        {"layer": 1, "delta_pp": -40.0, "method": "leace"},
        {"layer": 1, "delta_pp": -30.0, "method": "leace"},
        {"layer": 3, "delta_pp": -2.0, "method": "leace"},
        {"layer": 3, "delta_pp": -90.0, "method": "mean"},
        {"layer": -2, "delta_pp": -99.0, "method": "leace"},  # component edit: skipped
    ]
    assert P.most_damaging_layer(rows, method="leace") == 1
    assert P.most_damaging_layer(rows, method="mean") == 3
    assert P.most_damaging_layer({0: -1.0, 2: -1.0}) == 0
    assert P.most_damaging_layer([]) is None
    d = P.decoupling(LATE, rows, method="leace")
    assert d == {
        "best_layer": 3,
        "near_best_layers": [3],
        "damaging_layer": 1,
        "distance": 2,
        "decoupled": True,
        "delta_at_best_pp": -2.0,
        "delta_near_best_pp": -2.0,
        "delta_at_damaging_pp": -35.0,
    }
    assert P.decoupling(LATE, rows, method="mean")["decoupled"] is False
    assert P.decoupling(LATE, [])["decoupled"] is None
    # a plateau: layer 1 is as readable as the argmax (within 1 pp) → not decoupled
    plateau = {-1: 0.5, 0: 0.9, 1: 0.975, 2: 0.98, 3: 0.978}
    d = P.decoupling(plateau, {1: -50.0, 2: -3.0, 3: -3.0})
    assert d["best_layer"] == 2 and d["near_best_layers"] == [1, 2, 3] and d["decoupled"] is False
    assert d["delta_near_best_pp"] == -50.0


def test_reversal_pairs_partial_and_full():
    cells = {
        ("parity", "transformer"): "gradual",
        ("parity", "lstm"): "late",
        ("dyck", "transformer"): "early",
        ("dyck", "lstm"): "gradual",
        ("s3", "transformer"): "gradual",
        ("s3", "lstm"): "late",
    }
    pairs = P.reversal_pairs(cells)
    got = {(tuple(p["tasks"]), p["kind"]) for p in pairs}
    assert got == {(("dyck", "parity"), "partial"), (("dyck", "s3"), "partial")}
    assert pairs[0]["shared_class"] == ["gradual"] and pairs[0]["families"] == ["lstm", "transformer"]
    full = P.reversal_pairs(
        [
            {"task": "a", "family": "x", "profile_class": "late"},
            {"task": "a", "family": "y", "profile_class": "early"},
            {"task": "b", "family": "x", "profile_class": "early"},
            {"task": "b", "family": "y", "profile_class": "late"},
        ]
    )
    assert len(full) == 1 and full[0]["kind"] == "full"
    assert P.reversal_pairs({("a", "x"): "late", ("a", "y"): "late", ("b", "x"): "early", ("b", "y"): "late"}) == []


def test_profile_distance():
    assert P.profile_distance(LATE, LATE, 0.5, 0.5) == 0.0
    # S3 shaped like Parity is closer to Parity than to Dyck
    s3 = {-1: 0.17, 0: 0.2, 1: 0.22, 2: 0.25, 3: 0.98}
    parity = dict(LATE)
    dyck = {-1: 0.4, 0: 0.6, 1: 0.75, 2: 0.9, 3: 0.97}
    assert P.profile_distance(s3, parity, 1 / 6, 0.5) < P.profile_distance(s3, dyck, 1 / 6, 0.4)
    # depth-normalised: a 2-layer and a 4-layer linear ramp have the same shape
    assert P.profile_distance({-1: 0, 0: 0.5, 1: 1}, {-1: 0, 0: 0.25, 1: 0.5, 2: 0.75, 3: 1}) == pytest.approx(0.0)
    assert 0.0 <= P.profile_distance(EARLY, LATE) <= 1.0


def test_summarise_profiles_over_seeds():
    curves = [LATE, {k: v - 0.01 for k, v in LATE.items()}, {k: v + 0.01 for k, v in LATE.items()}]
    s = P.summarise_profiles(curves, [0.5, 0.5, 0.5], seeds=[0, 1, 2])
    assert s["n"] == 3 and s["profile_class"] == "late" and s["class_votes"] == {"late": 3}
    lc = s["metrics"]["late_concentration"]
    assert lc["lo"] <= lc["mean"] <= lc["hi"] and lc["n"] == 3
    assert s["metrics"]["best_layer"] == {"mean": 3.0, "lo": 3.0, "hi": 3.0, "n": 3}
    assert [p["seed"] for p in s["per_seed"]] == [0, 1, 2]


# -- classes on the gain above a floor (issue: high-floor curves were called "early") ---------------
HIGH_FLOOR_LATE = {-1: 0.735, 0: 0.745, 1: 0.745, 2: 0.745, 3: 0.78}  # majority 0.45


def test_high_floor_curve_is_late_on_the_gain_above_the_floor():
    # raw accuracy is at 95 % of its maximum from emb on (0.735 ≥ 0.741 fails, 0.745 passes at
    # block 0: depth 0.25 → "early"); the gain above the majority floor (0.285 .. 0.33) reaches
    # 95 % only at the last layer.
    assert P.first_95(HIGH_FLOOR_LATE, baseline=0.45) == 3
    # the last block makes (0.78 − 0.745) / (0.78 − 0.735) = 78 % of the blocks' gain
    assert P.late_concentration(HIGH_FLOOR_LATE, baseline=0.45) == pytest.approx(0.035 / 0.045)
    assert P.profile_class(HIGH_FLOOR_LATE, 0.45) == "late"
    m = P.profile_metrics(HIGH_FLOOR_LATE, 0.45)
    assert m["gain_over_majority"] == pytest.approx(0.33) and m["gain_over_emb"] == pytest.approx(0.045)
    assert m["floor"] == 0.45 and m["emb_accuracy"] == 0.735


@pytest.mark.parametrize(
    ("curve", "majority", "expected"),
    [
        # early: the gain above 0.45 is 95 % reached at block 0 (depth 0.25)
        ({-1: 0.46, 0: 0.90, 1: 0.91, 2: 0.91, 3: 0.91}, 0.45, "early"),
        # late: nothing until the last block
        ({-1: 0.45, 0: 0.46, 1: 0.47, 2: 0.47, 3: 0.95}, 0.45, "late"),
        # gradual: equal steps
        ({-1: 0.45, 0: 0.57, 1: 0.70, 2: 0.82, 3: 0.95}, 0.45, "gradual"),
        # flat: never more than 5 pp above the majority, however the raw values line up
        ({-1: 0.45, 0: 0.47, 1: 0.48, 2: 0.48, 3: 0.49}, 0.45, "flat"),
        # near-chance curve that the raw rule called early (0.47 ≥ 0.95 · 0.49): flat now
        ({-1: 0.47, 0: 0.48, 1: 0.49, 2: 0.49, 3: 0.49}, 0.45, "flat"),
        # readable at emb already above the majority, blocks add a little at the end: late on the
        # blocks' gain (emb is the no-computation floor)
        ({-1: 0.80, 0: 0.80, 1: 0.81, 2: 0.81, 3: 0.90}, 0.40, "late"),
    ],
)
def test_hand_made_curves_for_each_class(curve, majority, expected):
    assert P.profile_class(curve, majority) == expected


def test_first_95_uses_the_floor_not_raw_accuracy():
    c = {-1: 0.5, 0: 0.9, 1: 0.96, 2: 0.97, 3: 1.0}
    # raw rule: 0.96 ≥ 0.95 → layer 1; gain rule: gains 0.46, 0.47 < 0.475 → layer 3
    assert P.first_95(c, baseline=0.5) == 3
    assert P.computation_floor(c, 0.6) == 0.6 and P.computation_floor(c, 0.4) == 0.5


def test_profile_intervals_are_clipped_to_what_each_metric_can_be():
    from science.profiles import summarise_profiles

    # three seeds of a 4-block model: late concentration near 0 and first_95 at the embedding or block 1
    curves = [
        {-1: 0.70, 0: 0.98, 1: 0.99, 2: 0.99, 3: 0.995},
        {-1: 0.70, 0: 0.90, 1: 0.99, 2: 0.99, 3: 0.99},
        {-1: 0.96, 0: 0.97, 1: 0.98, 2: 0.99, 3: 0.99},
    ]
    m = summarise_profiles(curves, [0.5, 0.5, 0.5])["metrics"]
    assert m["auc"]["lo"] >= 0.0 and m["auc"]["hi"] <= 1.0
    assert m["first_95"]["lo"] >= -1.0 and m["first_95"]["hi"] <= 3.0
    # late concentration can fall below 0 (a last block worse than the one before): not clipped
    dip = [{-1: 0.5, 0: 0.9, 1: 0.95, 2: 0.99, 3: 0.99 - 0.002 * i} for i in range(3)]
    lc = summarise_profiles(dip, [0.5] * 3)["metrics"]["late_concentration"]
    assert lc["mean"] < 0 and lc["lo"] < lc["mean"]
    assert m["best_layer"]["lo"] >= -1.0 and m["best_layer"]["hi"] <= 3.0
