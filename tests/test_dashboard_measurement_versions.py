"""A view that combines results of two measurement versions says so (docs/SCIENCE.md#measurement-versions),
through the same notice as mixed settings: the probe-vs-causal heatmap (probes and edits of one run
checked together), the cross-run summary's settings and the patching grids."""

from __future__ import annotations

from dashboard.figures.captions import MEASUREMENT_VERSION_SETTING, mixed_settings
from dashboard.figures.probe_causal import probe_causal_heatmap
from dashboard.figures.probe_causal_table import EDIT_SETTINGS_ACROSS_RUNS
from dashboard.pages.probe_causal import EDIT_FIELDS
from dashboard.patching_captions import patching_caption
from science.methods import traits_meta
from tests.dashboard_data import intervention_rows, probe_rows

TRAITS = traits_meta()  # how each built-in method's rows read (GET /api/meta's method_traits)


def test_the_heatmap_says_when_its_probes_and_edits_come_from_two_versions():
    probes = [{**p, "measurement_version": 1} for p in probe_rows()]
    edits = [{**r, "measurement_version": 2} for r in intervention_rows()]
    fig = probe_causal_heatmap(probes, edits, eval_length=40, n_layers=4, method_traits=TRAITS)
    notice = fig.layout.meta["settings_notice"]
    assert notice and "measurement versions 1, 2" in notice and "SCIENCE.md#measurement-versions" in notice
    same = probe_causal_heatmap(
        probes, [{**r, "measurement_version": 1} for r in edits], eval_length=40, n_layers=4, method_traits=TRAITS
    )
    assert same.layout.meta["settings_notice"] is None


def test_the_cross_run_summary_and_patching_check_the_version_too():
    assert MEASUREMENT_VERSION_SETTING in EDIT_SETTINGS_ACROSS_RUNS
    assert "measurement_version" in EDIT_FIELDS.split(",")  # the summary asks the API for it
    edits = [{"n_sequences": 256, "measurement_version": v} for v in (1, 2, 2)]
    assert "measurement versions 1, 2" in (mixed_settings(edits, EDIT_SETTINGS_ACROSS_RUNS) or "")
    grid = [{"n_pairs": 64, "layer": 0, "position": 0, "recovery": 1.0, "measurement_version": v} for v in (1, 2)]
    _, notice = patching_caption([{"title": "a", "run_id": 1, "rows": grid}], {"site": "resid_post", "length": 40})
    assert notice and "measurement versions 1, 2" in notice
    _, none = patching_caption(
        [{"title": "a", "run_id": 1, "rows": [{**grid[0]}, {**grid[1], "measurement_version": 1}]}],
        {"site": "resid_post", "length": 40},
    )
    assert none is None
