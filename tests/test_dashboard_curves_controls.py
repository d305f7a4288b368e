"""/curves and /reversal pages with controls: the at-initialisation rows asked for and
drawn by default, the CSV carrying them, every view captioned; against a fake API."""

from __future__ import annotations

from dashboard.figures.captions import add_caption
from dashboard.figures.common import empty_figure
from dashboard.pages import curves, reversal
from tests.dashboard_data import curve_rows
from tests.test_dashboard_pages import FakeApi


class ControlsApi(FakeApi):
    def __init__(self):
        super().__init__()
        self.curve_calls: list[dict] = []

    def suites(self):  # one suite: the default one, whose rows these are
        return super().suites()[:1]

    def curves(self, **kw):
        self.curve_calls.append(kw)
        rows = [{**r, "suite": "synthetic"} for r in curve_rows(lengths=(40, 120))]
        if kw.get("controls") == "only":
            return [{**r, "mean": 0.45, "control": "init"} for r in rows]
        return rows


def _kind(fig, kind):
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_at_initialisation_lines_on_by_default_and_off_on_request():
    api = ControlsApi()
    fig, _ = curves.build_figure(api, curves.SPEC.decode(""))
    assert len(_kind(fig, "control")) == 3 * 5  # a family per facet, every facet
    assert {"controls": "only", "suite": None, "eval_length": 40} in api.curve_calls
    assert "Suite synthetic" in fig.layout.meta["caption"] and "at initialisation" in fig.layout.meta["caption"]
    off, _ = curves.build_figure(api, curves.SPEC.decode("?controls=0"))
    assert not _kind(off, "control") and "at initialisation" not in off.layout.meta["caption"]


def test_csv_carries_the_control_points_marked():
    rows = curves.csv_rows(ControlsApi(), curves.SPEC.decode(""))
    marked = [r for r in rows if r["control"] == "init"]
    assert marked and len(marked) == len(rows) - len(marked)
    assert all(r["mean"] == 0.45 for r in marked)


def test_position_and_behaviour_views_and_the_s3_figure_are_captioned():
    api = ControlsApi()
    pos, _ = curves.build_figure(api, curves.SPEC.decode("?view=position"))
    assert "probe at the last layer" in pos.layout.meta["caption"]
    beh, _ = curves.build_figure(api, curves.SPEC.decode("?view=behaviour"))
    assert "random-init controls not included" in beh.layout.meta["caption"]
    out = reversal.build(api, reversal.SPEC.decode(""))
    assert "RMS distance between S3" in out[2].layout.meta["caption"]
    assert (
        "cells also against their random-init controls" in out[0].layout.meta["caption"]
        or "no random-init controls stored" in out[0].layout.meta["caption"]
    )


def test_a_message_figure_gets_no_caption():
    fig = add_caption(empty_figure("nothing"), "Suite x")
    assert fig.layout.meta == {"empty": True} and len(fig.layout.annotations) == 1


def test_patching_caption_names_site_length_pairs_and_mixed_settings():
    from dashboard.patching_captions import patching_caption
    from tests.dashboard_data import patching_rows

    gs = [
        {"title": "#1", "run_id": 1, "rows": patching_rows(1, n_layers=2, positions=[3])},
        {
            "title": "#2",
            "run_id": 2,
            "rows": [{**r, "n_pairs": 500} for r in patching_rows(2, n_layers=2, positions=[3])],
        },
    ]
    caption, notice = patching_caption(gs, {"site": "resid_post", "length": 40})
    assert caption.startswith("2 run(s) · site resid_post (output of block ℓ) · L=40 · pairs per cell 64/500")
    assert notice and "clean/corrupted pairs 64, 500" in notice
    same, none = patching_caption(gs[:1], {"site": "resid_post", "length": 40})
    assert none is None and "pairs per cell 64" in same
