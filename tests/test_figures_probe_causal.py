"""Probe-versus-causal heatmap, decoupling summary, patching heatmaps."""

from __future__ import annotations

from dashboard.figures.decoupling import decoupling_points, decoupling_summary
from dashboard.figures.patching import patching_heatmaps, patching_table
from dashboard.figures.probe_causal import probe_causal_heatmap
from dashboard.figures.probe_causal_table import best_probe_layer, most_damaging_layer, probe_causal_table
from science.methods import traits_meta
from tests.dashboard_data import intervention_rows, patching_rows, probe_rows

TRAITS = traits_meta()  # how each built-in method's rows read (GET /api/meta's method_traits)


def _by_kind(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_heatmap_layers_by_measures():
    fig = probe_causal_heatmap(probe_rows(), intervention_rows(), eval_length=40, n_layers=4, method_traits=TRAITS)
    acc, drop = (t for t in fig.data if t.type == "heatmap")
    # rows: emb, 0..3, plus "all layers" for Conv1D removed everywhere
    assert list(acc.y) == ["emb", "0", "1", "2", "3", "all layers"]
    assert len(acc.z) == 6 and len(drop.z) == 6
    assert acc.meta["columns"][0] == "probe"
    assert "refit:project_out" in acc.meta["columns"]
    assert drop.meta["columns"] == [
        "drop:project_out",
        "drop:inlp",
        "drop:leace",
        "drop:pca_top_k",
        "drop:mean",
        "drop:conv1d_removal",
    ]
    assert len(drop.z[0]) == 6
    assert drop.zmid == 0


def test_best_probe_and_most_damaging_marked():
    fig = probe_causal_heatmap(
        probe_rows(best=3), intervention_rows(damaging=1), eval_length=40, n_layers=4, method_traits=TRAITS
    )
    assert _by_kind(fig, "best_probe")[0].meta["layer"] == 3
    dmg = _by_kind(fig, "most_damaging")[0].meta["layers"]
    # changed: project-out's refit still reads the variable here (not removed), so claim 4's rule
    # gives it no most-damaging layer; LEACE removed it
    assert dmg["drop:leace"] == 1 and "drop:project_out" not in dmg
    acc = next(t for t in fig.data if t.type == "heatmap")
    assert acc.text[4][0].startswith("★")  # layer 3 row, probe column
    assert len(fig.layout.shapes) >= 2
    drop = [t for t in fig.data if t.type == "heatmap"][1]
    assert "n.s." in drop.text[1][0]  # layer 0 project-out is not significant


def test_helpers_and_table():
    assert best_probe_layer(probe_rows(best=2)) == 2
    assert most_damaging_layer(intervention_rows(damaging=2), "inlp") == 2
    table = probe_causal_table(probe_rows(), intervention_rows(), method_traits=TRAITS)
    units = {r["measure"]: r["unit"] for r in table}
    assert units["probe"] == "accuracy" and units["drop:leace"] == "pp"


def test_escapes_run_names_in_titles():
    fig = probe_causal_heatmap(
        probe_rows(), intervention_rows(), title="<script>alert(1)</script>", method_traits=TRAITS
    )
    assert "<script>" not in fig.layout.title.text
    assert "&lt;script&gt;" in fig.layout.title.text


def test_decoupling_summary():
    runs = [
        {"id": 1, "name": "a", "family": "transformer", "task": "parity", "seed": 0, "n_layers": 4},
        {"id": 2, "name": "b", "family": "lstm", "task": "parity", "seed": 0, "n_layers": 4},
    ]
    probes = probe_rows(1, best=3) + probe_rows(2, best=3)
    interventions = intervention_rows(1, damaging=1) + intervention_rows(2, damaging=3)
    # LEACE removed the variable (refit at the majority rate); claim 4's rule decides (changed:
    # the summary used to call any best ≠ most-damaging run decoupled, whatever the refit said)
    pts = decoupling_points(runs, probes, interventions, method="leace")
    assert [p["decoupled"] for p in pts] == [True, False]
    fig = decoupling_summary(pts)
    hm = fig.data[0]
    assert list(hm.y) == ["Transformer", "LSTM"] and hm.z[0][0] == 1.0 and hm.z[1][0] == 0.0
    assert fig.layout.meta["decoupled"] == 1
    assert fig.layout.title.text.startswith("1 of 2 runs decoupled (2 usable, 0 not removed)")


def test_decoupling_summary_follows_claim_4_not_removed_and_ties():
    """The fixture's project-out refit probe reads 0.9 against a 0.5 majority: the variable was not
    removed, so no run counts as decoupled: the summary says "not removed", as /claims does."""
    from science import claims as C

    runs = [
        {"id": 1, "name": "a", "family": "transformer", "task": "parity", "seed": 0, "n_layers": 4},
        {"id": 2, "name": "b", "family": "lstm", "task": "parity", "seed": 0, "n_layers": 4},
    ]
    probes = probe_rows(1, best=3) + probe_rows(2, best=3)
    interventions = intervention_rows(1, damaging=1) + intervention_rows(2, damaging=3)
    pts = decoupling_points(runs, probes, interventions, method="project_out")
    assert [p["status"] for p in pts] == ["not removed", "not removed"]
    assert all(p["decoupled"] is None and p["damage_layer"] is None for p in pts)
    fig = decoupling_summary(pts)
    assert fig.layout.title.text.startswith("0 of 2 runs decoupled (0 usable, 2 not removed)")
    assert "2 not removed" not in fig.data[0].text[0][0] and "1 not removed" in fig.data[0].text[0][0]
    # the same rows through claim 4's own function give the same statuses (one definition)
    ref = C.run_decouplings([{**r, "pretrained": None} for r in runs], probes, interventions, method="project_out")
    assert [r["status"] for r in ref] == ["not removed", "not removed"]
    # auto = claim 4's choice: LEACE before project-out
    auto = decoupling_points(runs, probes, interventions)
    assert {p["method"] for p in auto} == {"leace"} and [p["status"] for p in auto] == ["decoupled", "not decoupled"]
    # a four-way plateau (LSTM/GRU probes at 100% from emb to layer 2): a tie, never decoupled within it
    flat = [{**p, "accuracy": 1.0 if p["layer"] <= 2 else 0.9} for p in probe_rows(3)]
    tie = decoupling_points([{**runs[1], "id": 3}], flat, intervention_rows(3, damaging=2), method="leace")
    assert tie[0]["tie"] and tie[0]["near_best_layers"] == [-1, 0, 1, 2] and tie[0]["decoupled"] is False
    assert "(tie)" in decoupling_summary(tie).data[0].text[0][0]


def test_heatmap_marks_ties_and_no_most_damaging_cell_without_a_significant_drop():
    flat = [{**p, "accuracy": 1.0 if p["layer"] <= 2 else 0.9} for p in probe_rows()]
    ns = [
        {**r, "significant": False, "p_holm": 0.9, "delta_pp": 0.0 if r["layer"] == 0 else -1.0}
        for r in intervention_rows(conv1d=False)
    ]
    fig = probe_causal_heatmap(flat, ns, eval_length=40, n_layers=4, method_traits=TRAITS)
    best = _by_kind(fig, "best_probe")[0]
    assert best.meta["tie"] == [-1, 0, 1, 2] and "tie" in best.name
    acc = next(t for t in fig.data if t.type == "heatmap")
    assert [acc.text[i][0].startswith("★") for i in range(5)] == [True, True, True, True, False]
    assert not _by_kind(fig, "most_damaging")  # every drop n.s.: no ▼ marker
    drop = [t for t in fig.data if t.type == "heatmap"][1]
    assert not any("▼" in str(c) for row in drop.text for c in row)
    assert most_damaging_layer(ns, "leace") is None


def test_patching_heatmaps_side_by_side():
    grids = [
        {"title": "run <b>1</b>", "run_id": 1, "rows": patching_rows(1)},
        {"title": "run 2", "run_id": 2, "rows": patching_rows(2, positions=[20])},
    ]
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


def test_heatmap_not_removed_edits_are_flagged_and_never_most_damaging():
    """The fixture's project-out refit reads 0.9 (majority 0.5): claim 4 calls that edit 'not
    removed', so its −20 pp drop is flagged and gets no ▼; LEACE (refit at the majority) keeps it."""
    fig = probe_causal_heatmap(
        probe_rows(best=3), intervention_rows(damaging=1), eval_length=40, n_layers=4, method_traits=TRAITS
    )
    dmg = _by_kind(fig, "most_damaging")[0].meta["layers"]
    assert "drop:project_out" not in dmg and dmg["drop:leace"] == 1
    drop = [t for t in fig.data if t.type == "heatmap"][1]
    col = drop.meta["columns"].index("drop:project_out")
    assert "n.r." in drop.text[2][col] and "not removed" in drop.customdata[2][col][2]
    assert "n.r." not in drop.text[2][drop.meta["columns"].index("drop:leace")]
