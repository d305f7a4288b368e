"""in headless Chromium: /curves draws each family's at-initialisation line, / lists
controls with their badge and hides them on request, /probe-vs-causal reads drops beyond random
removal. Screenshots: artifacts/screenshots/controls-*.png (look at them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.conftest import Server, shot, wait_figure, wait_ready
from tests.fixtures.seed_controls import add_controls
from tests.fixtures.seed_results import seed_database

pytestmark = pytest.mark.browser

LABELS = {"Transformer", "Mamba", "Mamba-2", "LSTM", "GRU"}


@pytest.fixture(scope="module")
def controls_server(tmp_path_factory, chromium_path) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("served-controls")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    summary = seed_database(url, jobs=False, xss=False, pretrained=False, eval_lengths=(40, 120))
    counts = add_controls(url)
    assert counts["controls"] and counts["typed"] and counts["random"]
    srv = Server(tmp, url, summary)
    yield srv
    srv.stop()


def test_curves_draw_the_at_initialisation_line_per_family(controls_server, page):
    page.goto(controls_server.base + "/curves?tasks=dyck&types=1")
    wait_ready(page)
    wait_figure(page, "cv-graph", "g.data.some(t => t.meta && t.meta.kind === 'control')")
    ctrl = page.evaluate(
        "() => document.querySelector('#cv-graph .js-plotly-plot').data"
        ".filter(t => t.meta && t.meta.kind === 'control').map(t => [t.name, t.line.dash])"
    )
    assert {n for n, _ in ctrl} == {f"{f} at initialisation" for f in LABELS}
    assert {d for _, d in ctrl} == {"dash"}
    legend = page.eval_on_selector_all("#cv-graph .legendtext", "els => els.map(e => e.textContent)")
    assert "LSTM at initialisation" in legend and "LSTM · open tokens" in legend
    assert "all tokens" in page.inner_text("#cv-graph")  # the caption says which accuracy the classes use
    shot(page, "controls-curves")


def test_runs_list_controls_with_their_badge_and_hide_them(controls_server, page):
    page.goto(controls_server.base + "/?sort=-id&controls=include")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row", state="attached")
    page.wait_for_selector("#rn-grid .cell-control", state="attached")
    assert "control: at init" in page.inner_text("#rn-grid")
    shot(page, "controls-runs")
    page.goto(controls_server.base + "/?sort=-id&controls=exclude")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row", state="attached")
    wait_ready(page)
    assert "control: at init" not in page.inner_text("#rn-grid")


def test_probe_vs_causal_reads_drops_beyond_random_removal(controls_server, page):
    page.goto(controls_server.base + "/probe-vs-causal?run=1")
    wait_ready(page)
    wait_figure(page, "pc-heatmap", "g.layout.meta && g.layout.meta.beyond_random > 0")
    # the figure's data lands before its SVG text is drawn: under load the text came a moment later
    page.wait_for_function("() => document.querySelector('#pc-heatmap').innerText.includes('n.sel.')")
    text = page.inner_text("#pc-heatmap")
    assert "beyond random removal" in text and "n.sel." in text
    shot(page, "controls-probe-vs-causal")
