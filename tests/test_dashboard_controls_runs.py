"""/: random-init controls listed with their own badge, the stop reason shown, a filter to hide
controls — page functions against a recording fake API."""

from __future__ import annotations

from dashboard.pages import runs
from dashboard.run_kind import control_badge, stop_reason_label

RUN = {
    "id": 1,
    "name": "lstm-dyck-s0",
    "family": "lstm",
    "task": "dyck",
    "seed": 0,
    "n_layers": 2,
    "d_model": 64,
    "n_params": 1000,
    "steps": 900,
    "suite": "paper",
    "pretrained": None,
    "behaviour": {},
    "trained": True,
    "heldout_acc": 0.995,
    "early_stop_acc": 0.99,
    "control": None,
    "stop_reason": "trained",
}
CONTROL = {
    **RUN,
    "id": 2,
    "name": "lstm-dyck-s0-init",
    "steps": 0,
    "trained": False,
    "heldout_acc": 0.4,
    "control": "init",
    "stop_reason": None,
}


def test_a_control_row_carries_its_badge_and_no_stop_reason_of_training():
    row, ctrl = runs.table_row(RUN), runs.table_row(CONTROL)
    assert ctrl["control_badge"] == "control: at init" and row["control_badge"] == ""
    assert ctrl["stop_reason_label"] == "not trained"
    assert row["stop_reason_label"] == "trained (criterion)"
    assert stop_reason_label({**RUN, "stop_reason": "plateau"}) == "plateau"
    assert stop_reason_label({**RUN, "stop_reason": "budget"}).startswith("budget")
    assert stop_reason_label({**RUN, "stop_reason": None}) == "–"
    assert control_badge({"control": "shuffled"}) == "control: shuffled"  # an unknown kind is named, not hidden


def test_the_grid_has_the_control_and_stop_columns_with_a_badge_style():
    cols = {c["field"]: c for c in runs.COLUMNS}
    assert "control_badge" in cols and "stop_reason_label" in cols
    assert "cell-control" in cols["control_badge"]["cellClassRules"]


def test_the_controls_filter_is_sent_to_the_server_and_defaults_to_exclude():
    class Recorder:
        def runs(self, **kw):
            self.kw = kw
            return {"items": [], "total": 0, "limit": kw["limit"], "offset": kw["offset"]}

    api = Recorder()
    runs.fetch_page(api, runs.SPEC.decode("?controls=include", {}))
    assert api.kw["controls"] == "include"
    runs.fetch_page(api, runs.SPEC.decode("", {}))  # as the CLI and every other page: controls left out
    assert api.kw["controls"] == "exclude"
    assert runs.SPEC.decode("?controls=bogus", {})["controls"] == "exclude"  # not a choice: the default
    from typing import get_args

    from backend.api.query_params import ControlsQ

    assert {v for v, _ in runs.CONTROLS_FILTER} == set(get_args(get_args(ControlsQ)[0]))


def test_a_control_run_panel_says_what_it_is_not_untrained():
    flag = runs.trained_flag(CONTROL)
    assert "control: at init" in flag.children and "Untrained" not in flag.children
    assert "Untrained" in runs.trained_flag({**RUN, "trained": False, "heldout_acc": 0.5}).children


def test_the_runs_page_says_how_many_controls_it_leaves_out():
    class Counter:
        def runs(self, **kw):
            self.kw = kw
            return {"items": [], "total": 7 if kw["controls"] == "only" else 0, "limit": 1, "offset": 0}

    api = Counter()
    state = runs.SPEC.decode("?suite=paper", {})
    assert runs.controls_left_out(api, state) == " · 7 random-init control(s) left out (Controls: runs and controls)"
    assert api.kw["suite"] == "paper" and api.kw["controls"] == "only"
    assert runs.controls_left_out(api, {**state, "controls": "include"}) == ""
