"""Layerwise-curve figure builders: plain functions, data in, go.Figure out."""

from __future__ import annotations

from collections import Counter

from dashboard.figures.curves import layerwise_curves, position_curves
from dashboard.theme import FAMILY_COLORS
from tests.dashboard_data import FAMILIES, curve_rows


def _kinds(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_one_mean_trace_per_family_per_facet():
    fig = layerwise_curves(curve_rows())
    means = _kinds(fig, "mean")
    per_task = Counter((t.meta["task"], t.meta["family"]) for t in means)
    assert set(per_task.values()) == {1}
    assert {t.meta["family"] for t in means} == set(FAMILIES)
    assert len(means) == 3 * len(FAMILIES)
    # one legend entry per family
    assert sorted(t.name for t in means if t.showlegend) == sorted(["Transformer", "Mamba", "Mamba-2", "LSTM", "GRU"])


def test_ci_band_and_baseline_present():
    fig = layerwise_curves(curve_rows(tasks=("parity",)))
    bands = _kinds(fig, "ci")
    assert len(bands) == len(FAMILIES)
    band = bands[0]
    assert band.fill == "toself"
    n = 5  # emb + 4 layers
    assert len(band.x) == 2 * n and len(band.y) == 2 * n
    assert max(band.y) > max(_kinds(fig, "mean")[0].y)  # upper edge above the mean
    base = _kinds(fig, "baseline")
    assert len(base) == 1 and base[0].line.dash == "dash" and base[0].y[0] == 0.5
    assert not _kinds(layerwise_curves(curve_rows(), show_ci=False, show_baseline=False), "ci")
    assert not _kinds(layerwise_curves(curve_rows(), show_baseline=False), "baseline")


def test_family_colours_are_consistent_and_colour_blind_safe():
    fig = layerwise_curves(curve_rows())
    for t in _kinds(fig, "mean"):
        assert t.line.color == FAMILY_COLORS[t.meta["family"]]
    assert len(set(FAMILY_COLORS.values())) == len(FAMILY_COLORS)


def test_facets_per_task_and_eval_lengths_side_by_side():
    fig = layerwise_curves(curve_rows(lengths=(40, 120)))
    titles = [a.text for a in fig.layout.annotations]
    assert any("L=40 (in-distribution)" in t for t in titles)
    assert any("L=120 (out-of-distribution)" in t for t in titles)
    assert len(titles) == 3 * 2  # tasks × lengths
    means = _kinds(fig, "mean")
    assert Counter(t.meta["eval_length"] for t in means) == {40: 15, 120: 15}


def test_depth_axis_and_axis_titles():
    fig = layerwise_curves(curve_rows(), x="depth")
    assert fig.layout.meta["x"] == "depth"
    m = _kinds(fig, "mean")[0]
    assert min(m.x) == 0.0 and max(m.x) == 1.0
    assert "normalised depth" in fig.layout.xaxis.title.text
    assert fig.layout.yaxis.title.text == "probe accuracy"
    assert fig.layout.yaxis.tickformat == ".0%"
    layer_fig = layerwise_curves(curve_rows())
    assert list(layer_fig.layout.xaxis.ticktext)[0] == "emb"


def test_pretrained_models_get_their_own_line_on_the_depth_axis():
    rows = curve_rows(tasks=("dyck",)) + curve_rows(
        tasks=("dyck",), families=("transformer",), n_layers=12, pretrained="EleutherAI/pythia-160m"
    )
    fig = layerwise_curves(rows, x="depth")
    names = {t.name for t in _kinds(fig, "mean")}
    assert "pythia-160m (12 layers)" in names
    pre = next(t for t in _kinds(fig, "mean") if t.meta.get("pretrained"))
    assert len(pre.x) == 13 and pre.x[-1] == 1.0


def test_seed_traces_on_demand():
    rows = curve_rows(tasks=("parity",))
    seeds = [
        {
            "task": r["task"],
            "family": r["family"],
            "eval_length": 40,
            "layer": r["layer"],
            "depth": r["depth"],
            "n_layers": 4,
            "seed": s,
            "accuracy": r["mean"] + 0.01 * s,
        }
        for r in rows
        for s in (0, 1, 2)
    ]
    fig = layerwise_curves(rows, seed_rows=seeds)
    st = _kinds(fig, "seed")
    assert len(st) == len(FAMILIES)  # all seeds of a family in one trace, separated by gaps
    assert st[0].meta["seeds"] == [0, 1, 2]
    assert sum(v is None for v in st[0].y) == 3 and len(st[0].y) == 3 * 6
    assert not any(t.showlegend for t in st)
    assert not _kinds(layerwise_curves(rows), "seed")


def test_empty_selection_gives_a_message_not_an_error():
    fig = layerwise_curves([])
    assert fig.layout.meta == {"empty": True}
    assert "No probe results" in fig.layout.annotations[0].text


def test_position_curves():
    rows = [
        {
            "task": "parity",
            "family": f,
            "eval_length": 120,
            "position": t,
            "mean": 0.9,
            "lo": 0.85,
            "hi": 0.95,
            "n": 3,
            "majority_baseline": 0.5,
        }
        for f in FAMILIES
        for t in range(1, 121)
    ]
    fig = position_curves(rows)
    assert len(_kinds(fig, "mean")) == len(FAMILIES)
    assert len(_kinds(fig, "ci")) == len(FAMILIES)
    assert len(_kinds(fig, "baseline")) == 1
    assert fig.layout.xaxis.title.text == "position t in the sequence"
    assert any(s.type == "line" for s in fig.layout.shapes)  # the training length, marked


def test_a_line_with_untrained_runs_is_drawn_faint_with_open_markers():
    rows = curve_rows(tasks=("parity",))
    for r in rows:
        r["run_ids"] = [1, 2, 3] if r["family"] == "mamba" else [4, 5, 6]
        if r["family"] == "mamba":
            r["untrained_run_ids"] = [2]
    means = {t.meta["family"]: t for t in _kinds(layerwise_curves(rows), "mean")}
    faint = means["mamba"]
    assert faint.opacity < 1 and faint.marker.symbol.endswith("-open")
    assert "(untrained: 1 of 3)" in faint.name and "1 untrained run" in faint.hovertemplate
    for fam in ("transformer", "lstm"):
        assert means[fam].opacity == 1 and not means[fam].marker.symbol.endswith("-open")
        assert "untrained" not in means[fam].hovertemplate
