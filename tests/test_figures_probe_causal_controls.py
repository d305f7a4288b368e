"""/probe-vs-causal against its controls: drops beyond rank-matched random removal,
INLP rank as a share of the width ("not selective" over half), causal ties, the mixed-settings
notice, and the decoupling grid coloured by count with n shown."""

from __future__ import annotations

from dashboard.figures.causal_controls import NOT_SELECTIVE_SHARE, rank_share, tied_worst
from dashboard.figures.decoupling import decoupling_summary
from dashboard.figures.probe_causal import probe_causal_heatmap
from dashboard.figures.probe_causal_table import probe_causal_table
from dashboard.pvc_captions import heatmap_prefix, summary_caption
from science.methods import traits_meta
from tests.dashboard_data import intervention_rows, probe_rows

TRAITS = traits_meta()  # how each built-in method's rows read (GET /api/meta's method_traits)


def _drop_heatmap(fig):
    return next(t for t in fig.data if (t.meta or {}).get("panel") == "drop")


def _cell(hm, layer_label, column):
    return hm.y.index(layer_label), list(hm.meta["columns"]).index(column)


def test_drops_read_beyond_random_removal_with_the_random_interval_in_hover():
    edits = [
        {
            **r,
            "random_delta_pp": -4.0,
            "random_delta_lo": -6.0,
            "random_delta_hi": -2.5,
            "random_draws": 5,
            "rank_removed": 2,
        }
        if r["method"] == "leace"
        else r
        for r in intervention_rows(conv1d=False)
    ]
    table = probe_causal_table(probe_rows(), edits, method_traits=TRAITS)
    leace1 = next(r for r in table if r["measure"] == "drop:leace" and r["layer"] == 1)
    assert leace1["value"] == -20.0 - (-4.0) and leace1["delta_raw_pp"] == -20.0 and leace1["beyond_random"]
    mean1 = next(r for r in table if r["measure"] == "drop:mean" and r["layer"] == 1)
    assert mean1["value"] == -20.0 and not mean1["beyond_random"]  # no random control: raw
    fig = probe_causal_heatmap(probe_rows(), edits, eval_length=40, n_layers=4, method_traits=TRAITS)
    hm = _drop_heatmap(fig)
    yi, xi = _cell(hm, "1", "drop:leace")
    assert hm.z[yi][xi] == -16.0
    hover = hm.customdata[yi][xi][3]
    assert "raw Δ −20.0 pp" in hover and "−4.0 pp [−6.0, −2.5]" in hover and "5 draws" in hover
    assert "beyond random" in fig.layout.annotations[1].text  # the drop panel's subplot title
    assert fig.layout.meta["beyond_random"] == 4 and fig.layout.meta["drops"] == 20


def test_inlp_rank_as_share_of_width_and_flagged_not_selective_over_half():
    edits = intervention_rows(conv1d=False)
    for r in edits:
        r["rank_removed"] = {"inlp": 128 if r["layer"] == 1 else 40, "project_out": 1}.get(r["method"])
    fig = probe_causal_heatmap(probe_rows(), edits, eval_length=40, n_layers=4, d_model=128, method_traits=TRAITS)
    hm = _drop_heatmap(fig)
    yi, xi = _cell(hm, "1", "drop:inlp")
    assert "n.sel." in hm.text[yi][xi] and "128 of 128 (100% of the width)" in hm.customdata[yi][xi][3]
    assert "not selective" in hm.customdata[yi][xi][3]
    yi2, _ = _cell(hm, "2", "drop:inlp")
    assert "n.sel." not in hm.text[yi2][xi] and "31% of the width" in hm.customdata[yi2][xi][3]  # 40/128
    _, xp = _cell(hm, "1", "drop:project_out")
    assert "n.sel." not in hm.text[yi][xp]  # only INLP is flagged
    assert fig.layout.meta["not_selective"] == [1]
    assert rank_share({"rank_removed": 64}, 128) == 0.5 and NOT_SELECTIVE_SHARE == 0.5
    assert rank_share({"rank_removed": 64}, None) is None
    # without the width no share and no flag
    hm2 = _drop_heatmap(probe_causal_heatmap(probe_rows(), edits, eval_length=40, n_layers=4, method_traits=TRAITS))
    assert not any("n.sel." in t for row in hm2.text for t in row)


def test_ties_are_marked_on_the_causal_side():
    edits = intervention_rows(conv1d=False)
    for r in edits:
        if r["method"] == "mean":
            r["delta_pp"] = -50.65 if r["layer"] in (1, 2, 3) else -2.0
            r["significant"] = True
    fig = probe_causal_heatmap(probe_rows(), edits, eval_length=40, n_layers=4, method_traits=TRAITS)
    hm = _drop_heatmap(fig)
    marked = [
        hm.y[i] for i, row in enumerate(hm.text) if row[list(hm.meta["columns"]).index("drop:mean")].startswith("▼")
    ]
    assert marked == ["1", "2", "3"]
    legend = next(t for t in fig.data if (t.meta or {}).get("kind") == "most_damaging")
    assert legend.meta["ties"]["drop:mean"] == [1, 2, 3] and "a tie" in legend.name
    # a single most-damaging layer stays single
    _, xl = _cell(hm, "1", "drop:leace")
    assert [hm.y[i] for i, row in enumerate(hm.text) if row[xl].startswith("▼")] == ["1"]
    assert tied_worst({0: -10.0, 1: -9.5, 2: -8.0}, 0) == [0, 1]


def test_a_notice_when_the_view_mixes_measurement_settings():
    probes = [{**p, "n_train": 64 if p["layer"] < 1 else 500, "n_test": 64, "config_hash": "a"} for p in probe_rows()]
    edits = [{**r, "n_sequences": 256, "config_hash": "b"} for r in intervention_rows()]
    fig = probe_causal_heatmap(
        probes, edits, eval_length=40, n_layers=4, caption="Run #1 · suite paper", method_traits=TRAITS
    )
    notice = fig.layout.meta["settings_notice"]
    assert notice and "probe training sequences 64, 500" in notice and "edit" not in notice.split("64")[-1]
    assert "Run #1 · suite paper" in fig.layout.meta["caption"] and "256 sequences" in fig.layout.meta["caption"]
    same = probe_causal_heatmap(
        [{**p, "n_train": 500} for p in probe_rows()], edits, eval_length=40, n_layers=4, method_traits=TRAITS
    )
    assert same.layout.meta["settings_notice"] is None
    assert any((a.text or "").startswith("⚠") for a in fig.layout.annotations)


def test_decoupling_grid_coloured_by_count_with_n_shown():
    pts = [
        {
            "run_id": 1,
            "family": "transformer",
            "task": "dyck",
            "best_layer": 0,
            "near_best_layers": [0],
            "damage_layer": 2,
            "status": "decoupled",
            "decoupled": True,
        }
    ]
    pts += [
        {
            "run_id": i,
            "family": "transformer",
            "task": "dyck",
            "best_layer": 0,
            "near_best_layers": [0],
            "damage_layer": None,
            "status": "not removed",
            "decoupled": None,
        }
        for i in (2, 3)
    ]
    pts += [
        {
            "run_id": 4,
            "family": "lstm",
            "task": "dyck",
            "best_layer": 1,
            "near_best_layers": [1],
            "damage_layer": 1,
            "status": "not decoupled",
            "decoupled": False,
        }
    ]
    fig = decoupling_summary(pts)
    hm = fig.data[0]
    assert hm.z[0][0] == 1 and hm.zmax == 3  # a count, on a scale up to the largest cell's n
    assert "1 decoupled of 1 usable · n = 3, 2 not removed" in hm.text[0][0]
    assert "%" not in hm.text[0][0] and hm.colorbar.tickformat != ".0%"
    assert fig.layout.title.text.startswith("1 of 4 runs decoupled (2 usable, 2 not removed)")


def test_captions_name_run_suite_and_summary_scope():
    run = {
        "id": 7,
        "suite": "paper",
        "family": "lstm",
        "task": "dyck",
        "seed": 0,
        "d_model": 64,
        "config_hash": "1a2b3c4d5e6f",
        "control": None,
    }
    assert heatmap_prefix(run) == "Run #7 · suite paper · LSTM × Dyck, seed 0 · d_model 64 · config 1a2b3c4d5e"
    text = summary_caption(
        {"method": "auto", "task": "dyck", "family": None, "seed": None, "length": 40, "trained": True},
        n_runs=12,
        beyond=30,
        n_edits=60,
    )
    assert "12 runs (Dyck) · L=40" in text and "30 of 60 edit rows read beyond" in text and "trained runs only" in text


def test_across_runs_only_the_counts_are_compared():
    from dashboard.figures.captions import mixed_settings
    from dashboard.figures.probe_causal_table import EDIT_SETTINGS_ACROSS_RUNS

    edits = [{"run_id": i, "config_hash": f"job-{i}", "n_sequences": 500, "n_fit_sequences": 1000} for i in (1, 2)]
    assert mixed_settings(edits, EDIT_SETTINGS_ACROSS_RUNS) is None  # follow-up jobs hash their run id
    edits[1]["n_sequences"] = 64
    assert "edit evaluation sequences 64, 500" in mixed_settings(edits, EDIT_SETTINGS_ACROSS_RUNS)


def test_mean_ablation_reads_raw_even_with_a_random_control_stored():
    """Mean ablation removes the whole width: its stored "random removal" (one draw of D random
    directions) is mean ablation itself, so beyond it every cell would read 0 — the ceiling hidden
    and "most damaging" marks on −0.0 (the paper-steps bundle). It reads raw, as the caption says."""
    edits = [
        {**r, "random_delta_pp": r["delta_pp"], "random_draws": 1, "rank_removed": 128} if r["method"] == "mean" else r
        for r in intervention_rows(conv1d=False)
    ]
    table = probe_causal_table(probe_rows(), edits, method_traits=TRAITS)
    mean1 = next(r for r in table if r["measure"] == "drop:mean" and r["layer"] == 1)
    assert mean1["value"] == -20.0 and not mean1["beyond_random"]
    fig = probe_causal_heatmap(probe_rows(), edits, eval_length=40, n_layers=4, method_traits=TRAITS)
    hm = _drop_heatmap(fig)
    yi, xi = _cell(hm, "1", "drop:mean")
    assert hm.z[yi][xi] == -20.0
    assert fig.layout.meta["beyond_random"] == 0
