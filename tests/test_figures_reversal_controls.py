"""/reversal against the controls: the control-adjusted class where stored, fragile
classes marked, intervals inside the metric's range, the caption."""

from __future__ import annotations

from dashboard.figures.reversal import metric, reversal_matrix
from dashboard.reversal_controls import control_csv_columns, matrix_caption
from tests.dashboard_data import profile_rows


def _with_controls(rows):
    out = []
    for p in rows:
        p = {**p, "suite": "paper", "stability": {"class": p["profile_class"], "agree": 81, "of": 81, "stable": True}}
        if p["family"] == "lstm" and p["task"] == "dyck":
            p["against_control"] = {"profile_class": "late", "class_votes": {"late": 3}}
            p["stability"] = {"class": p["profile_class"], "agree": 41, "of": 81, "stable": False}
        out.append(p)
    return out


def _cell(fig, family_label, task_label):
    hm = fig.data[0]
    return hm.text[list(hm.y).index(family_label)][list(hm.x).index(task_label)], hm.customdata[
        list(hm.y).index(family_label)
    ][list(hm.x).index(task_label)]


def test_control_adjusted_class_and_fragility_shown_where_stored():
    fig = reversal_matrix(_with_controls(profile_rows()))
    text, custom = _cell(fig, "LSTM", "Dyck")
    assert "vs init: late" in text and text.startswith("<b>gradual</b> ⚑")  # the flag beside the fragile class
    assert "fragile: 41/81 settings" in custom[4] and "vs init fragile" not in custom[4]
    other, other_custom = _cell(fig, "GRU", "Dyck")
    assert "vs init" not in other and "⚑" not in other and "no random-init control" in other_custom[4]
    assert fig.layout.meta["control_cells"] == 1 and fig.layout.meta["fragile_cells"] == 1
    assert "vs init: the class against the random-init controls" in fig.layout.meta["caption"]


def test_a_fragile_class_against_the_control_is_flagged_on_its_own_line():
    rows = _with_controls(profile_rows())
    for p in rows:
        if p["family"] == "gru" and p["task"] == "dyck":
            p["against_control"] = {"profile_class": "early", "stability": {"agree": 50, "of": 81, "stable": False}}
    text, custom = _cell(reversal_matrix(rows), "GRU", "Dyck")
    assert "vs init: early ⚑" in text and not text.startswith("<b>gradual</b> ⚑")
    assert "vs init fragile: 50/81 settings" in custom[4]


def test_intervals_stay_inside_the_metric_range():
    p = {
        "n_layers": 4,
        "metrics": {
            "depth_first_95": {"mean": 0.05, "lo": -0.10, "hi": 0.2, "n": 3},
            "first_95": {"mean": -0.8, "lo": -1.3, "hi": -0.2, "n": 3},
            "best_layer": {"mean": 2.9, "lo": 1.5, "hi": 4.2, "n": 3},
            "auc": {"mean": 0.97, "lo": 0.9, "hi": 1.05, "n": 3},
        },
    }
    assert metric(p, "first_95") == {"mean": 0.05, "lo": 0.0, "hi": 0.2}  # the normalised depth, not the index
    assert metric(p, "best_layer")["hi"] == 3.0 and metric(p, "best_layer")["lo"] == 1.5
    assert metric(p, "auc")["hi"] == 1.0
    # late concentration has no fixed range (a dipping last block gives < 0): left as stored
    q = {"metrics": {"late_concentration": {"mean": 0.1, "lo": -0.3, "hi": 0.5, "n": 3}}}
    assert metric(q, "late_concentration")["lo"] == -0.3


def test_csv_columns_and_caption():
    rows = _with_controls(profile_rows())
    lstm = next(p for p in rows if p["family"] == "lstm" and p["task"] == "dyck")
    cols = control_csv_columns(lstm)
    assert cols == {
        "control_class": "late",
        "control_class_votes": "3 late",
        "stable": False,
        "stability_agree": 41,
        "stability_of": 81,
    }
    assert control_csv_columns({})["control_class"] is None
    text = matrix_caption(rows, {"length": 40, "trained": True, "suite": None})
    assert text.startswith("Suite paper · L=40 (in-distribution) · 3 seeds per cell · trained runs only")
    assert f"1 of {len(rows)} cells also against their random-init controls" in text
    assert "no random-init controls stored" in matrix_caption(profile_rows(), {"length": 40, "suite": "x"})
