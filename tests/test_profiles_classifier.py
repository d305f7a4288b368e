"""A curve's class under many rules, the curve checked once (science.profiles.classifier,
control_classifier): the same class as profile_class / control_class under every rule."""

from __future__ import annotations

import numpy as np

from science import profiles as P


def _curves(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        layers = int(rng.integers(1, 13))
        acc = np.sort(rng.uniform(0.4, 1.0, layers + 1)) if rng.random() < 0.5 else rng.uniform(0.4, 1.0, layers + 1)
        out.append({(str(k) if k >= 0 and rng.random() < 0.3 else k): float(a) for k, a in zip(range(-1, layers), acc)})
    return out


def test_classifier_gives_profile_class_under_every_rule() -> None:
    rules = P.rules_within_margin()
    assert len(rules) == 81
    for curve in _curves(40, 0):
        for base in (None, 0.5, 0.9):
            classify = P.classifier(curve, base)
            assert [classify(r) for r in rules] == [P.profile_class(curve, base, r) for r in rules]


def test_control_classifier_moves_the_margin_with_the_rule() -> None:
    rules = P.rules_within_margin()
    rng = np.random.default_rng(1)
    for curve in _curves(30, 2):
        control = {k: float(rng.uniform(0.3, 0.7)) for k in P.normalise_keys(curve)}  # same layers
        for margin in (0.02, 0.1):
            classify = P.control_classifier(curve, control, margin)
            want = [P.control_class(curve, control, margin + (r.flat_margin - P.FLAT_MARGIN), r) for r in rules]
            assert [classify(r) for r in rules] == want


def test_rules_within_margin_is_a_fresh_list_each_time() -> None:
    a = P.rules_within_margin()
    a.clear()
    assert len(P.rules_within_margin()) == 81
