"""Untrained runs on the pages: the reusable switch and banner, the legend suffix, the hatched
cell, and the pages' requests carrying the "trained runs only" filter (on by default)."""

from __future__ import annotations

from dashboard.components import trained_filter, trained_switch, untrained_banner
from dashboard.figures.curves import layerwise_curves
from dashboard.figures.reversal import reversal_matrix
from dashboard.pages import curves, probe_causal, reversal
from tests.dashboard_data import curve_rows, intervention_rows, probe_rows, profile_rows
from tests.test_dashboard_pages import FakeApi, texts

UNTRAINED = {"id": 7, "name": "mamba-s3-s0", "trained": False, "heldout_acc": 0.273, "early_stop_acc": 0.99}


class RecordingApi(FakeApi):
    """FakeApi that records the filters each request carried."""

    def __init__(self, run_record=None):
        super().__init__()
        self.calls: list[tuple[str, dict]] = []
        self.run_record = run_record

    def suites(self):  # one suite, the default: its rows are the ones these tests read
        return super().suites()[:1]

    def curves(self, **kw):
        self.calls.append(("curves", kw))
        return super().curves(**kw)

    def profiles(self, **kw):
        self.calls.append(("profiles", kw))
        return super().profiles(**kw)

    def runs(self, **kw):
        self.calls.append(("runs", kw))
        return super().runs(**kw)

    def run(self, run_id):
        return self.run_record if self.run_record and run_id == self.run_record["id"] else super().run(run_id)


def test_banner_names_the_accuracy_and_is_absent_for_trained_runs():
    banner = untrained_banner(UNTRAINED)
    text = " ".join(texts(banner))
    assert "0.273 < 0.99" in text and "#7" in text and "untrained-banner" in banner.className
    assert untrained_banner({**UNTRAINED, "trained": True, "heldout_acc": 0.995}) is None
    assert untrained_banner({"id": 1}) is None and untrained_banner(None) is None


def test_switch_and_filter():
    sw = trained_switch("x-trained", True)
    box = next(c for c in sw.children if getattr(c, "id", None) == "x-trained")
    assert box.value == ["on"] and "trained runs only" in box.options[0]["label"]
    assert trained_filter(True) is True and trained_filter(False) is None


def test_switch_is_on_by_default_and_kept_in_the_url():
    for page in (curves, reversal, probe_causal):
        state = page.SPEC.decode("")
        assert state["trained"] is True
        assert "trained=1" in page.SPEC.encode(state)
        assert page.SPEC.decode("?trained=0")["trained"] is False


def test_curve_legend_marks_untrained_runs_and_selectivity_line():
    rows = curve_rows(tasks=("parity",), families=("lstm", "gru"))
    for r in rows:
        r["selectivity"] = 0.3
        if r["family"] == "lstm":
            r["untrained_run_ids"] = [2]
    fig = layerwise_curves(rows, show_selectivity=True)
    names = {t.name for t in fig.data if (t.meta or {}).get("kind") == "mean"}
    assert names == {"LSTM (untrained: 1 of 3)", "GRU"}
    sel = [t for t in fig.data if (t.meta or {}).get("kind") == "selectivity"]
    assert len(sel) == 2 and all(y == 0.3 for y in sel[0].y)
    assert not [t for t in layerwise_curves(rows).data if (t.meta or {}).get("kind") == "selectivity"]


def test_reversal_cells_with_untrained_runs_are_hatched():
    profs = profile_rows(tasks=("parity", "dyck"))
    profs[0]["untrained_run_ids"] = [101]
    fig = reversal_matrix(profs)
    hatched = [t for t in fig.data if (t.meta or {}).get("kind") == "untrained"]
    assert len(hatched) == 1 and hatched[0].fillpattern.shape == "/"
    assert (hatched[0].meta["family"], hatched[0].meta["task"]) == (profs[0]["family"], profs[0]["task"])
    assert "untrained: 1 of 3" in fig.data[0].text[0][0]
    assert fig.layout.meta["untrained_cells"] == 1
    assert not [t for t in reversal_matrix(profile_rows()).data if (t.meta or {}).get("kind") == "untrained"]
    # the hatching leaves the cell readable: no tint, faint thin lines
    assert hatched[0].fillcolor == "rgba(0, 0, 0, 0)" and hatched[0].fillpattern.fgopacity < 0.5
    lines = max(t.count("<br>") + 1 for row in fig.data[0].text for t in row if t)
    assert fig.layout.height >= 110 + 19 * lines * len(fig.data[0].y)  # every line inside its cell


def test_intervals_never_read_negative_zero():
    from dashboard.figures.common import fmt_ci

    assert fmt_ci(-1e-9, -0.001, 0.002) == "0.00 [0.00, 0.00]"
    assert fmt_ci(-0.02, -0.05, 0.01) == "-0.02 [-0.05, 0.01]"
    assert fmt_ci(-1e-5, -2e-5, 0.0, pct=True) == "0.0% [0.0, 0.0]"


def test_pages_ask_the_api_for_trained_runs_by_default():
    api = RecordingApi()
    curves.build_figure(api, curves.SPEC.decode(""))
    runs_calls = [c for c in api.calls if c[0] == "curves" and "controls" not in c[1]]
    assert runs_calls[-1] == ("curves", {"suite": None, "eval_length": 40, "trained": True})
    # the at-initialisation lines: the controls, asked for without a trained filter (never trained)
    assert api.calls[-1] == ("curves", {"suite": None, "eval_length": 40, "controls": "only"})
    curves.build_figure(api, curves.SPEC.decode("?trained=0&controls=0"))
    assert api.calls[-1][0] == "curves" and api.calls[-1][1]["trained"] is None
    reversal.profiles(api, reversal.SPEC.decode(""))
    assert api.calls[-1][0] == "profiles" and api.calls[-1][1]["trained"] is True
    probe_causal.run_options(api, probe_causal.SPEC.decode(""))
    assert api.calls[-1][0] == "runs" and api.calls[-1][1]["trained"] is True


def test_probe_vs_causal_opens_untrained_run_with_a_banner():
    api = RecordingApi(run_record={**UNTRAINED, "family": "mamba", "task": "s3", "seed": 0, "n_layers": 4})
    api.run_probes = lambda rid, eval_length=None: probe_rows(rid)
    api.run_interventions = lambda rid, eval_length=None, method=None: intervention_rows(rid)
    fig, _info, err, banner = probe_causal.heatmap_view(api, lambda p: p, probe_causal.SPEC.decode("?run=7&trained=0"))
    assert err is None and fig.data
    assert "0.273 < 0.99" in " ".join(texts(banner))
    trained_run = {**api.run_record, "trained": True, "heldout_acc": 0.995}
    api.run_record = trained_run
    assert probe_causal.heatmap_view(api, lambda p: p, probe_causal.SPEC.decode("?run=7"))[3] is None


def test_curves_page_notes_untrained_runs_when_the_switch_is_off():
    class Api(RecordingApi):
        def curves(self, **kw):
            rows = super().curves(**kw)
            for r in rows:
                r["untrained_run_ids"] = [2] if r["family"] == "lstm" else []
            return rows

    api = Api()
    fig, note = curves.build_figure(api, curves.SPEC.decode("?trained=0&tasks=parity"))
    assert "1 untrained run(s)" in note
    assert any("(untrained: 1 of 3)" in (t.name or "") for t in fig.data)
    api.runs_list[0]["trained"] = False
    _, note = curves.build_figure(api, curves.SPEC.decode("?trained=0&view=behaviour"))
    assert "1 untrained run(s)" in note


def test_patching_page_has_the_switch_and_asks_for_trained_runs():
    from dashboard.pages import patching

    state = patching.SPEC.decode("")
    assert state["trained"] is True and patching.SPEC.decode("?trained=0")["trained"] is False
    api = RecordingApi()
    patching.candidate_runs(api, {"task": "parity", "family": None, "trained": True})
    patching.candidate_runs(api, {"task": "parity", "family": None, "trained": False})
    sent = [kw.get("trained") for name, kw in api.calls if name == "runs"]
    assert sent == [True, None]


def test_patching_banner_names_each_untrained_run():
    from dashboard.pages import patching

    banner = patching.untrained_banner(
        [
            {"run_id": 7, "title": "#7", "run": UNTRAINED},
            {"run_id": 8, "title": "#8", "run": {**UNTRAINED, "id": 8, "trained": True}},
        ]
    )
    text = " ".join(texts(banner))
    assert "#7" in text and "0.273 < 0.99" in text and "#8" not in text
    assert patching.untrained_banner([{"run_id": 8, "title": "#8", "run": {"id": 8, "trained": True}}]) is None


def test_probe_vs_causal_says_when_the_linked_run_does_not_exist():
    from dashboard.api_client import ApiError

    api = RecordingApi()

    def missing(rid):
        raise ApiError(404, f"run {rid} not found")

    api.run = missing
    fig, _info, err, _banner = probe_causal.heatmap_view(api, lambda p: p, probe_causal.SPEC.decode("?run=99999"))
    assert err is None and "Run #99999 not found" in str(fig.layout)


class NoneTrainedApi(RecordingApi):
    """Every run stored and measured, none trained (a smoke suite, the quick first look)."""

    def curves(self, **kw):
        return [] if kw.get("trained") else super().curves(**kw)

    def profiles(self, **kw):
        return [] if kw.get("trained") else super().profiles(**kw)

    def runs(self, **kw):
        out = super().runs(**kw)
        if kw.get("trained"):
            return {**out, "items": [], "total": 0}
        return {**out, "items": [{**r, "trained": False} for r in out["items"]]}


def test_curves_page_with_no_trained_run_says_so_rather_than_no_results_yet():
    """A suite whose runs are all stored and probed but none trained (a smoke suite, a first look)
    showed only "No probe results for this selection yet" with the switch on: it must say the
    runs are there, untrained, and how to see them."""
    api = NoneTrainedApi()
    n = len(api.runs(task="parity", limit=5000)["items"])
    _, note = curves.build_figure(api, curves.SPEC.decode("?tasks=parity"))
    assert note and f"{n} run(s) of this selection are stored but none is trained" in note, note
    assert 'untick "trained runs only"' in note, note
    _, note = curves.build_figure(api, curves.SPEC.decode("?tasks=parity&trained=0"))  # switch off: drawn
    assert not note or "none is trained" not in note


def test_reversal_probe_causal_and_patching_with_no_trained_run_say_so():
    from dashboard.pages import patching

    api = NoneTrainedApi()
    n = len(api.runs_list)
    said = f"{n} run(s) of this selection are stored but none is trained"
    _, listing, *_ = reversal.build(api, reversal.SPEC.decode(""))
    assert said in " ".join(texts(listing)) and 'untick "trained runs only"' in " ".join(texts(listing))
    _, info, _, _ = probe_causal.heatmap_view(api, lambda p: p, probe_causal.SPEC.decode(""))
    assert said in " ".join(texts(info))
    _, _, _, _, info, _ = patching.figures(api, patching.SPEC.decode("?site=resid_post"))
    assert said in " ".join(texts(info))
