"""Two suites side by side: claims' verdicts, cells' classes, the curves overlay, the state in
the URL and the CSV (dashboard/compare.py and the /claims, /reversal, /curves pages)."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.compare import claims_side_by_side, classes_side_by_side, side_by_side_table
from dashboard.figures.compare import overlay_suites
from dashboard.pages import claims, curves, reversal
from tests.conftest import find_component


def _profile(suite, task, family, cls, n=3):
    return {
        "suite": suite,
        "task": task,
        "family": family,
        "pretrained": None,
        "eval_length": 40,
        "n": n,
        "seeds": [0, 1, 2][:n],
        "profile_class": cls,
        "class_counts": {cls: n},
        "metrics": {},
        "untrained_run_ids": [],
    }


class Api:
    """Two suites: 'a' (Dyck Transformer early, LSTM gradual), 'b' (Transformer gradual)."""

    CLASSES = {"a": {"transformer": "early", "lstm": "gradual"}, "b": {"transformer": "gradual", "lstm": "gradual"}}

    def suites(self):
        return [{"name": "a", "n_runs": 6}, {"name": "b", "n_runs": 3}]

    def runs(self, **_):
        return {"items": [{"id": 1, "suite": "a"}], "total": 1}

    def profiles(self, *, suite=None, **_):
        return [_profile(suite, "dyck", f, c) for f, c in self.CLASSES[suite].items()]

    def claims(self, suite=None):
        return [
            {"id": 1, "title": "one", "verdict": "supported"},
            {"id": 2, "title": "two", "verdict": "contradicted" if suite == "a" else "not enough data"},
        ]

    def all_runs(self, *, suite=None, **_):
        return [
            {"id": i, "suite": suite, "task": "dyck", "family": f, "pretrained": None, "trained": True}
            for i, f in enumerate(self.CLASSES[suite])
        ]

    def curves(self, *, suite=None, **_):
        return [
            {
                "suite": suite,
                "task": "dyck",
                "family": f,
                "pretrained": None,
                "eval_length": 40,
                "layer": layer,
                "layer_name": str(layer),
                "depth": (layer + 1) / 2,
                "n_layers": 2,
                "mean": 0.5 + 0.1 * layer,
                "lo": 0.4,
                "hi": 0.6,
                "n": 3,
                "seeds": [0, 1, 2],
                "run_ids": [1],
                "majority_baseline": 0.5,
                "untrained_run_ids": [],
                "selectivity": None,
            }
            for f in self.CLASSES[suite]
            for layer in (-1, 0, 1)
        ]


def test_verdicts_and_classes_side_by_side_mark_the_changes() -> None:
    rows = claims_side_by_side(Api().claims("a"), Api().claims("b"))
    assert [(r["id"], r["verdict_a"], r["verdict_b"], r["changed"]) for r in rows] == [
        (1, "supported", "supported", False),
        (2, "contradicted", "not enough data", True),
    ]
    cells = classes_side_by_side(Api().profiles(suite="a"), Api().profiles(suite="b")[:1])
    assert [(r["family"], r["class_a"], r["class_b"], r["changed"]) for r in cells] == [
        ("lstm", "gradual", None, True),
        ("transformer", "early", "gradual", True),
    ]
    table = side_by_side_table(
        cells, [("family", "arch"), ("class_a", "class"), ("class_b", "class")], suite_a="a", suite_b="b", table_id="t"
    )
    assert "2 of 2 differ between a and b" in table.children[0].children
    head = find_component(table, "t").children[0].children.children
    assert [h.children for h in head] == ["", "arch", "class · a", "class · b"]


def test_reversal_compare_section_and_csv() -> None:
    state = reversal.SPEC.decode("?suite=a&compare=b")
    assert state["compare"] == "b"
    rows = reversal.compare_rows(Api(), state)
    assert {(r["family"], r["changed"]) for r in rows} == {("transformer", True), ("lstm", False)}
    csv = reversal.matrix_csv(Api(), state)
    assert {(r["suite"], r["family"], r["class_changed"]) for r in csv} == {
        ("a", "transformer", True),
        ("a", "lstm", False),
        ("b", "transformer", True),
        ("b", "lstm", False),
    }
    assert reversal.compare_section(Api(), reversal.SPEC.decode("?suite=a")) is None
    assert reversal.compare_rows(Api(), reversal.SPEC.decode("?suite=a&compare=a")) is None  # itself: no comparison
    assert "compare=b" in reversal.SPEC.encode(state)  # in the URL (and so in saved views)


def test_claims_compare_rows() -> None:
    rows = claims.compare_rows(Api(), None, "b")  # none chosen: the default suite, 'a'
    assert [r["changed"] for r in rows] == [False, True]
    assert claims.compare_rows(Api(), "a", None) is None


def test_curves_overlay_one_dash_style_per_suite() -> None:
    state = curves.SPEC.decode("?suite=a&compare=b&ci=1")
    fig, _ = curves.build_figure(Api(), state)
    means = [t for t in fig.data if t.meta and t.meta.get("kind") == "mean"]
    by_suite = {}
    for t in means:
        by_suite.setdefault(t.meta["suite"], set()).add(t.line.dash)
    assert set(by_suite) == {"a", "b"} and by_suite["b"] == {"dashdot"} and "dashdot" not in by_suite["a"]
    assert not [t for t in fig.data if t.meta and t.meta.get("suite") == "b" and t.meta.get("kind") == "ci"]
    rows = curves.csv_rows(Api(), state)
    assert {r["suite"] for r in rows} == {"a", "b"}


def test_overlay_keeps_the_first_figure() -> None:
    a = go.Figure(go.Scatter(x=[0], y=[1], name="LSTM", meta={"kind": "mean"}))
    b = go.Figure(
        [
            go.Scatter(x=[0], y=[2], name="LSTM", meta={"kind": "mean"}),
            go.Scatter(x=[0], y=[2], name="band", meta={"kind": "ci"}),
        ]
    )
    fig = overlay_suites(a, b, "x", "y")
    assert [t.name for t in fig.data] == ["LSTM · x", "LSTM · y"]
    assert a.data[0].name == "LSTM"  # the input figure is untouched


def test_overlay_names_both_suites_in_its_meta() -> None:
    a = go.Figure(go.Scatter(x=[0], y=[1], name="LSTM", meta={"kind": "mean"}), layout={"meta": {"figure": "x"}})
    fig = overlay_suites(a, go.Figure(), "p", "q")
    assert fig.layout.meta == {"figure": "x", "suites": ["p", "q"], "second_dash": "dashdot"}
