"""Patching figures: site selection, corrupted-token marker, best star, undefined cells, untrained
flag, line view — plain functions, no browser."""

from dashboard.figures.patching import patching_by_position, patching_heatmaps, patching_table, run_title
from dashboard.pages.patching import default_layer, untrained_banner


def _rows(site="state", n_layers=2, L=10, p=3, none=False):
    return [
        {
            "site": site,
            "layer": ly,
            "position": t,
            "eval_length": L,
            "corrupt_position": p,
            "recovery": None if none else (1.0 if t >= p and ly == n_layers - 1 else 0.1 * ly),
            "recovery_lo": None if none else 0.0,
            "recovery_hi": None if none else 1.0,
            "ld_clean": 4.0,
            "ld_corrupted": -4.0,
            "n_pairs": 3 if none else 120,
            "n_dropped": 125 if none else 8,
            "note": "only 3 of 128 pairs have |LD_clean − LD_corrupted| ≥ 0.1 logits; need 8" if none else None,
        }
        for ly in range(n_layers)
        for t in range(L)
    ]


def _kind(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_heatmap_shows_one_site_and_marks_the_corruption_and_the_best_cell():
    grids = [{"title": "a", "run_id": 1, "rows": _rows("state") + _rows("resid_post")}]
    fig = patching_heatmaps(grids, eval_length=10, site="state")
    hm = _kind(fig, "heatmap")
    assert len(hm) == 1 and hm[0].meta["layers"] == 2 and hm[0].meta["positions"] == 10
    line = _kind(fig, "corruption")
    assert len(line) == 1 and list(line[0].x) == [3, 3]
    best = _kind(fig, "best")
    assert len(best) == 1 and best[0].y[0] == "1" and best[0].x[0] == 3
    assert fig.layout.meta["site"] == "state"


def test_undefined_cells_are_gaps_with_an_undefined_hover_and_no_star():
    fig = patching_heatmaps([{"title": "u", "run_id": 2, "rows": _rows(none=True)}], site="state")
    hm = _kind(fig, "heatmap")[0]
    assert all(v is None for row in hm.z for v in row)
    assert hm.customdata[0][0][0].startswith("undefined — only 3 of 128")
    assert not _kind(fig, "best")


def test_untrained_run_is_flagged_with_its_heldout_accuracy_and_labels_are_escaped():
    g = {"title": "<script>x</script>", "run_id": 3, "rows": _rows(), "trained": False, "heldout_acc": 0.52}
    assert run_title(g) == "&lt;script&gt;x&lt;/script&gt; · ⚠ untrained (held-out acc 52%)"
    fig = patching_heatmaps([g], site="state")
    assert fig.layout.annotations[0].text == run_title(g)
    banner = untrained_banner([g, {**g, "title": "ok", "trained": True}])
    # the shared untrained-run banner (dashboard.components), one per untrained run on screen
    from tests.test_dashboard_pages import texts

    text = " ".join(texts(banner))
    assert "held-out token accuracy 0.520 < 0.99" in text and text.count("Untrained run.") == 1
    assert untrained_banner([{**g, "trained": True}]) is None


def test_line_view_one_layer_with_gaps_and_the_corruption_line():
    rows = _rows()
    rows[-1] = {**rows[-1], "recovery": None}  # layer 1, last position undefined
    fig = patching_by_position([{"title": "a", "run_id": 1, "rows": rows}], layer=1, site="state")
    line = _kind(fig, "line")[0]
    assert list(line.x) == list(range(10)) and line.y[-1] is None and line.y[3] == 1.0
    assert line.connectgaps is False
    assert [s.x0 for s in fig.layout.shapes] == [3]
    assert default_layer([{"rows": rows}], None) == 1 and default_layer([{"rows": rows}], 0) == 0


def test_empty_inputs_give_empty_figures():
    assert patching_heatmaps([], site="state").layout.meta["empty"]
    assert patching_heatmaps([{"title": "t", "rows": _rows("resid_pre")}], site="state").layout.meta["empty"]
    assert patching_by_position([], layer=0).layout.meta["empty"]
    assert patching_table([{"title": "t", "run_id": 1, "rows": _rows()}], site="resid_post") == []
    assert len(patching_table([{"title": "t", "run_id": 1, "rows": _rows()}], site="state")) == 20
