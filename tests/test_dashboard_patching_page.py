"""/patching callbacks with a fake API: site picker, line view layer options, untrained banner."""

from dashboard.pages import patching
from tests.test_dashboard_pages import FakeApi, texts


class RecordingApp:
    """Collects the functions ``register`` decorates, in order."""

    def __init__(self):
        self.fns = []

    def callback(self, *args, **kwargs):
        def deco(fn):
            self.fns.append(fn)
            return fn

        return deco

    def clientside_callback(self, *args, **kwargs):
        pass


def _figure_callback(api):
    app = RecordingApp()
    patching.register(app, api, path_for=lambda p: p)
    return next(fn for fn in app.fns if fn.__name__ == "_figure")


def test_figure_callback_site_line_view_and_banner():
    api = FakeApi()
    untrained = api.runs_list[0]["id"]
    original = api.run

    def run(rid):
        r = original(rid)
        return {**r, "trained": rid != untrained, "heldout_acc": 0.5 if rid == untrained else 1.0}

    api.run = run
    fn = _figure_callback(api)
    # controls in BINDS order: task, family, runs, length, site, layer, trained switch, suite; then the saved-view base
    heat, line, layer_opts, banner, info, error = fn(None, None, [untrained, 2], 40, "state", None, ["on"], None, None)
    assert error is None
    assert heat.layout.meta["site"] == "state" and heat.layout.meta["runs"] == 2
    assert [o["label"] for o in layer_opts] == ["emb", "0", "1", "2", "3"]
    assert line.layout.meta["layer"] == 3  # no layer picked: the last one
    assert "held-out token accuracy 0.500 < 0.99" in " ".join(texts(banner))
    _, line, *_ = fn(None, None, [2], 40, "state", 0, ["on"], None, None)
    assert line.layout.meta["layer"] == 0


def test_line_view_csv_keeps_only_its_layer():
    rows = [
        {"layer": ly, "position": p, "eval_length": 40, "recovery": 0.5, "site": "state"}
        for ly in (0, 1)
        for p in (0, 1)
    ]
    gs = [{"title": "#1", "run_id": 1, "rows": rows}]
    out = patching.line_rows(gs, {"layer": None, "length": 40, "site": "state"})
    assert {r["layer"] for r in out} == {1} and len(out) == 2  # no layer picked: the last one
    assert {r["layer"] for r in patching.line_rows(gs, {"layer": 0, "length": 40, "site": "state"})} == {0}


def test_a_state_callback_reads_the_controls_it_is_given():
    """dashboard.page_callbacks: a page's callback gets the page state read from its controls
    (those left out by ``without`` are not inputs), under the function's own name."""
    import pytest
    from dash import Output

    from dashboard.page_callbacks import Page

    app = RecordingApp()
    page = Page(app=app, spec=patching.SPEC, binds=patching.BINDS, base_id="patching-base")

    @page.on_state(Output("x", "children"), without=("runs", "layer"))
    def _show(state):
        return state

    (registered,) = app.fns
    assert registered.__name__ == "_show"
    # task, family, length, site, trained switch, suite; then the saved-view base
    state = registered("dyck", None, 60, "resid_post", [], "paper", {"layer": 2})
    assert state["task"] == "dyck" and state["length"] == 60 and state["suite"] == "paper"
    assert state["trained"] is False and state["layer"] == 2 and state["runs"] == []  # layer from the base
    with pytest.raises(ValueError, match="no control"):
        page.on_state(Output("x", "children"), without=("nope",))


def test_state_site_on_runs_without_a_state_says_why_and_what_to_pick():
    """A suite whose shown runs are all Transformers (paper-steps so far) opened on the default
    site, the recurrent state: no run carries one, so the page must say so and name the
    residual-stream sites, not only "No patching results for this selection"."""
    api = FakeApi()
    api.runs_list = [{**r, "family": "transformer"} for r in api.runs_list]
    fn = _figure_callback(api)
    heat, line, layer_opts, banner, info, error = fn(None, None, None, 40, "state", None, ["on"], None, None)
    assert error is None and layer_opts == []
    said = " ".join(texts(info))
    assert "no recurrent state" in said and "Transformer" in said, said
    assert "resid_post" in said, said
