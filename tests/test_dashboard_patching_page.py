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
    # controls in BINDS order: task, family, runs, length, site, layer, trained switch; then the saved-view base
    heat, line, layer_opts, banner, info, error = fn(None, None, [untrained, 2], 40, "state", None, ["on"], None)
    assert error is None
    assert heat.layout.meta["site"] == "state" and heat.layout.meta["runs"] == 2
    assert [o["label"] for o in layer_opts] == ["emb", "0", "1", "2", "3"]
    assert line.layout.meta["layer"] == 3  # no layer picked: the last one
    assert "held-out token accuracy 0.500 < 0.99" in " ".join(texts(banner))
    _, line, *_ = fn(None, None, [2], 40, "state", 0, ["on"], None)
    assert line.layout.meta["layer"] == 0
