"""/curves' issue-20 lines: the at-initialisation control per family, accuracy per token type,
and the caption saying what the figure shows."""

from __future__ import annotations

from dashboard.curves_controls import curves_caption, token_type_rows
from dashboard.figures.curve_extras import type_accuracy_rows
from dashboard.figures.curves import layerwise_curves
from dashboard.theme import FAMILY_COLORS
from tests.dashboard_data import FAMILIES, curve_rows


def _kinds(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def _controls(rows):
    return [
        {**r, "mean": 0.4 + 0.01 * r["layer"], "lo": None, "hi": None, "control": "init", "run_ids": [9]} for r in rows
    ]


def test_a_dashed_control_line_per_family_in_its_colour_with_its_legend_entry():
    rows = curve_rows(tasks=("dyck",))
    fig = layerwise_curves(rows, control_rows=_controls(rows))
    ctrl = _kinds(fig, "control")
    assert len(ctrl) == len(FAMILIES)
    for t in ctrl:
        assert t.line.dash == "dash"
        assert t.line.color == FAMILY_COLORS[t.meta["family"]]
        assert list(t.y) == [0.4 + 0.01 * ly for ly in range(-1, 4)]
    assert sorted(t.name for t in ctrl if t.showlegend) == sorted(
        f"{f} at initialisation" for f in ("Transformer", "Mamba", "Mamba-2", "LSTM", "GRU")
    )
    assert not _kinds(layerwise_curves(rows), "control")


def test_control_legend_entry_once_across_facets():
    rows = curve_rows(tasks=("parity", "dyck"), families=("lstm",))
    fig = layerwise_curves(rows, control_rows=_controls(rows))
    ctrl = _kinds(fig, "control")
    assert len(ctrl) == 2 and sum(bool(t.showlegend) for t in ctrl) == 1


def test_type_accuracy_rows_average_over_seeds_and_skip_untyped_rows():
    probes = [
        {
            "task": "dyck",
            "family": "lstm",
            "n_layers": 2,
            "eval_length": 40,
            "layer": 0,
            "seed": s,
            "type_accuracy": {"open": 0.6 + 0.1 * s, "close": 0.9},
        }
        for s in (0, 1, 2)
    ]
    probes.append(
        {
            "task": "parity",
            "family": "lstm",
            "n_layers": 2,
            "eval_length": 40,
            "layer": 0,
            "seed": 0,
            "type_accuracy": None,
        }
    )
    out = {r["token_type"]: r for r in type_accuracy_rows(probes)}
    assert set(out) == {"open", "close"}
    assert abs(out["open"]["mean"] - 0.7) < 1e-9 and out["open"]["n"] == 3
    assert out["open"]["lo"] < 0.7 < out["open"]["hi"] and out["open"]["lo"] >= 0.0 and out["open"]["hi"] <= 1.0
    assert out["close"]["lo"] == out["close"]["hi"] == 0.9  # identical seeds: a zero-width interval
    assert out["open"]["depth"] == 0.5


def test_type_interval_stays_inside_accuracy_range():
    probes = [
        {
            "task": "dyck",
            "family": "gru",
            "n_layers": 1,
            "eval_length": 40,
            "layer": 0,
            "seed": s,
            "type_accuracy": {"close": v},
        }
        for s, v in enumerate((1.0, 0.99, 0.6))
    ]
    (r,) = token_type_rows(probes)
    assert r["hi"] <= 1.0 and r["lo"] >= 0.0


def test_token_type_lines_drawn_per_family_and_type():
    rows = curve_rows(tasks=("dyck",), families=("lstm", "transformer"))
    probes = [
        {
            "task": "dyck",
            "family": f,
            "n_layers": 4,
            "eval_length": 40,
            "layer": ly,
            "seed": 0,
            "type_accuracy": {"open": 0.5, "close": 0.95},
        }
        for f in ("lstm", "transformer")
        for ly in range(-1, 4)
    ]
    fig = layerwise_curves(rows, type_rows=token_type_rows(probes))
    tt = _kinds(fig, "token_type")
    assert sorted((t.meta["family"], t.meta["token_type"]) for t in tt) == [
        ("lstm", "close"),
        ("lstm", "open"),
        ("transformer", "close"),
        ("transformer", "open"),
    ]
    assert {t.name for t in tt} >= {"LSTM · open tokens", "Transformer · close tokens"}
    assert len({t.line.dash for t in tt}) == 2  # open and close apart


def test_caption_names_suite_lengths_seeds_and_the_all_token_accuracy():
    rows = [{**r, "suite": "paper"} for r in curve_rows(tasks=("dyck",))]
    text = curves_caption(rows, {"suite": None, "trained": True}, n_control_points=5, types_shown=True)
    assert "Suite paper" in text and "L=40" in text and "3 seeds" in text
    assert "all tokens" in text and "at initialisation" in text and "token type" in text
    fig = layerwise_curves(rows, caption=text)
    assert fig.layout.meta["caption"] == text
    assert any("Suite paper" in (a.text or "") for a in fig.layout.annotations)
    bare = curves_caption(rows, {"suite": None, "trained": False}, n_control_points=0, types_shown=False)
    assert "at initialisation" not in bare and "trained runs only" not in bare
