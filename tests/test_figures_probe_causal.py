"""Probe-versus-causal heatmap, decoupling summary, patching heatmaps."""

from __future__ import annotations

from dashboard.figures.patching import patching_heatmaps, patching_table
from dashboard.figures.probe_causal import (
    best_probe_layer,
    decoupling_points,
    decoupling_summary,
    most_damaging_layer,
    probe_causal_heatmap,
    probe_causal_table,
)
from tests.dashboard_data import intervention_rows, patching_rows, probe_rows


def _by_kind(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_heatmap_layers_by_measures():
    fig = probe_causal_heatmap(probe_rows(), intervention_rows(), eval_length=40, n_layers=4)
    acc, drop = (t for t in fig.data if t.type == "heatmap")
    # rows: emb, 0..3, plus "all layers" for Conv1D removed everywhere
    assert list(acc.y) == ["emb", "0", "1", "2", "3", "all layers"]
    assert len(acc.z) == 6 and len(drop.z) == 6
    assert acc.meta["columns"][0] == "probe"
    assert "refit:project_out" in acc.meta["columns"]
    assert drop.meta["columns"] == ["drop:project_out", "drop:inlp", "drop:leace", "drop:pca_top_k", "drop:mean",
                                    "drop:conv1d_removal"]
    assert len(drop.z[0]) == 6
    assert drop.zmid == 0


def test_best_probe_and_most_damaging_marked():
    fig = probe_causal_heatmap(probe_rows(best=3), intervention_rows(damaging=1), eval_length=40, n_layers=4)
    assert _by_kind(fig, "best_probe")[0].meta["layer"] == 3
    dmg = _by_kind(fig, "most_damaging")[0].meta["layers"]
    assert dmg["drop:project_out"] == 1
    acc = next(t for t in fig.data if t.type == "heatmap")
    assert acc.text[4][0].startswith("★")  # layer 3 row, probe column
    assert len(fig.layout.shapes) >= 2
    drop = [t for t in fig.data if t.type == "heatmap"][1]
    assert "n.s." in drop.text[1][0]  # layer 0 project-out is not significant


def test_helpers_and_table():
    assert best_probe_layer(probe_rows(best=2)) == 2
    assert most_damaging_layer(intervention_rows(damaging=2), "inlp") == 2
    table = probe_causal_table(probe_rows(), intervention_rows())
    units = {r["measure"]: r["unit"] for r in table}
    assert units["probe"] == "accuracy" and units["drop:leace"] == "pp"


def test_escapes_run_names_in_titles():
    fig = probe_causal_heatmap(probe_rows(), intervention_rows(), title="<script>alert(1)</script>")
    assert "<script>" not in fig.layout.title.text
    assert "&lt;script&gt;" in fig.layout.title.text


def test_decoupling_summary():
    runs = [{"id": 1, "name": "a", "family": "transformer", "task": "parity", "seed": 0, "n_layers": 4},
            {"id": 2, "name": "b", "family": "lstm", "task": "parity", "seed": 0, "n_layers": 4}]
    probes = probe_rows(1, best=3) + probe_rows(2, best=3)
    interventions = intervention_rows(1, damaging=1) + intervention_rows(2, damaging=3)
    pts = decoupling_points(runs, probes, interventions, method="project_out")
    assert [p["decoupled"] for p in pts] == [True, False]
    fig = decoupling_summary(pts)
    hm = fig.data[0]
    assert list(hm.y) == ["Transformer", "LSTM"] and hm.z[0][0] == 1.0 and hm.z[1][0] == 0.0
    assert fig.layout.meta["decoupled"] == 1


def test_patching_heatmaps_side_by_side():
    grids = [{"title": "run <b>1</b>", "run_id": 1, "rows": patching_rows(1)},
             {"title": "run 2", "run_id": 2, "rows": patching_rows(2, positions=[20])}]
    fig = patching_heatmaps(grids, eval_length=40)
    hms = [t for t in fig.data if t.type == "heatmap"]
    assert len(hms) == 2
    assert hms[0].meta["layers"] == 5 and hms[0].meta["positions"] == 40
    assert len(hms[0].z) == 5 and len(hms[0].z[0]) == 40
    assert hms[1].meta["positions"] == 1
    assert sum(1 for h in hms if h.showscale) == 1  # one shared colour scale
    assert fig.layout.annotations[0].text == "run &lt;b&gt;1&lt;/b&gt;"
    best = _by_kind(fig, "best")
    assert len(best) == 2 and best[0].y[0] == "3" and best[0].x[0] == 39
    assert len(patching_table(grids)) == 5 * 40 + 5
