"""/claims against the controls: the verdict decided against the random-init control
beside the majority-floor verdict, fragile verdicts with their "k of 81" counts, untestable parts."""

from __future__ import annotations

from dash import html

from backend.claims_text import present_claims
from dashboard.claims_controls import agreement_lines, controls_section, header_badges
from dashboard.pages import claims
from science import claims as C
from tests.test_dashboard_pages import texts, walk


def shown_claims(*args, **kwargs):
    """The claims as ``GET /api/claims`` serves them: the science's verdicts and numbers, in words."""
    return present_claims(C.evaluate_claims(*args, **kwargs))


FAMS = ("transformer", "mamba", "mamba2", "lstm", "gru")


def _study(curve, ctrl, tf_ctrl, task="dyck"):
    runs, probes, controls = [], [], []
    for i, fam in enumerate(FAMS):
        for seed in range(3):
            rid = 3 * i + seed + 1
            runs.append(
                dict(
                    id=rid,
                    task=task,
                    family=fam,
                    seed=seed,
                    n_layers=4,
                    pretrained=None,
                    heldout_acc=0.995,
                    early_stop_acc=0.99,
                    behaviour={},
                    stop_reason="trained",
                    steps=3000,
                    train_config={"max_steps": 3000},
                    best_heldout_acc=0.995,
                )
            )
            probes += [
                dict(run_id=rid, layer=ly, eval_length=40, accuracy=min(1.0, a + 0.002 * seed), majority_baseline=0.456)
                for ly, a in curve.items()
            ]
            k = tf_ctrl if fam == "transformer" else ctrl
            controls.append(
                dict(task=task, family=fam, seed=seed, n_layers=4, curve={ly: a + 0.001 * seed for ly, a in k.items()})
            )
    return runs, probes, controls


def _text(component) -> str:
    return " ".join(texts(component))


def test_claim_2_shows_both_verdicts_and_fragility_from_the_science():
    early = {-1: 0.73, 0: 0.95, 1: 0.99, 2: 0.995, 3: 0.995}
    runs, probes, controls = _study(
        early, {-1: 0.73, 0: 0.93, 1: 0.93, 2: 0.93, 3: 0.93}, {-1: 0.73, 0: 0.80, 1: 0.80, 2: 0.80, 3: 0.80}
    )
    claim = shown_claims(runs, probes, [], [], controls=controls)[1]
    section = controls_section(claim)
    text = _text(section)
    assert "Decided against the random-init control" in text and "against the majority rate" in text
    badges = [c for c in walk(section) if getattr(c, "className", "") and "badge" in str(c.className)]
    assert [b.children for b in badges] == [claim["verdict"], claim["numbers"]["majority_floor"]["verdict"]]
    assert "of 81 threshold settings" in text  # the class condition's agreement count
    card = html.Div([claims.claim_card(claim, lambda p: p), *claims.claim_full_text(claim)])
    # the majority-floor cells get their own table; the section's keys are not repeated as raw facts
    assert "cells against the majority rate" in _text(card)
    assert "majority floor" not in [t.strip() for t in texts(card)]


def test_fragile_verdict_marked_with_its_cells_and_the_k_of_81_numbers():
    claim = {
        "id": 2,
        "verdict": "contradicted",
        "title": "t",
        "detail": "",
        "views": [],
        "numbers": {
            "floor": "random-init control",
            "fragile": True,
            "fragile_cells": ["transformer × dyck: early under 41 of 81 threshold settings"],
            "class_condition_agreement": {"dyck": {"agree": 60, "of": 81}},
            "majority_floor": {"verdict": "supported", "detail": "", "cells": []},
            "untestable": [
                "mamba × parity: not learned by this architecture at this size within "
                "3,000 steps (3 of 3 seeds plateaued)"
            ],
        },
    }
    head = header_badges(claim)
    assert [b.children for b in head] == ["fragile", "vs majority: supported"]
    text = _text(controls_section(claim))
    assert "Fragile:" in text and "early under 41 of 81 threshold settings" in text
    assert "Dyck: the class condition comes out the same under 60 of 81 threshold settings" in text
    assert "the controls change this verdict" in text
    assert "Untestable here:" in text and "mamba × parity: not learned" in text
    card = claims.claim_card(claim, lambda p: p)
    assert any(getattr(c, "id", None) == "claim-2-fragile" for c in walk(card))


def test_no_section_for_claims_without_control_numbers_and_stable_is_said():
    assert controls_section({"id": 4, "verdict": "supported", "numbers": {"decoupled": 3}}) is None
    assert header_badges({"id": 4, "verdict": "supported", "numbers": {}}) == []
    stable = {"id": 1, "verdict": "supported", "numbers": {"floor": "majority rate", "fragile": False}}
    text = _text(controls_section(stable))
    assert "Stable:" in text and "Decided against the majority rate" in text
    assert agreement_lines({"s3": {"agree": 81, "of": 81}}) == [
        "S3: the class condition comes out the same under 81 of 81 threshold settings"
    ]


def test_claim_4_section_shows_its_verdict_beside_the_readings_without_controls():
    claim = {
        "id": 4,
        "verdict": "contradicted",
        "numbers": {
            "without_controls": {
                "raw drops": {"label": "drops read raw", "verdict": "contradicted", "groups": {}},
                "no removal rule": {"label": "every edit counted", "verdict": "not enough data", "groups": {}},
            }
        },
    }
    section = controls_section(claim)
    text = _text(section)
    assert "Decided beyond random removal of the same rank" in text and "every edit counted" in text
    badges = [c.children for c in walk(section) if "badge" in str(getattr(c, "className", "") or "")]
    assert badges == ["contradicted", "contradicted", "not enough data"]
    assert "the controls change this verdict" in text
    claim["numbers"]["without_controls"]["no removal rule"]["verdict"] = "contradicted"
    assert "the controls change this verdict" not in _text(controls_section(claim))
