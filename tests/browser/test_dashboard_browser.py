"""The dashboard in headless Chromium against `layerscope serve` on a seeded SQLite DB.

Each page is opened and screenshotted into artifacts/screenshots/ (look at them)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.browser.conftest import shot, wait_figure, wait_ready
from tests.fixtures.seed_results import XSS_NAME, XSS_VIEW_TITLE

pytestmark = pytest.mark.browser

FAMILIES = {"transformer", "mamba", "mamba2", "lstm", "gru"}
PAGES = {
    "runs": ("/", "#rn-grid .ag-row"),
    "curves": ("/curves", "#cv-graph .js-plotly-plot .trace"),
    "reversal": ("/reversal", "#rv-matrix .js-plotly-plot .hm, #rv-matrix .js-plotly-plot .heatmaplayer"),
    "probe-vs-causal": ("/probe-vs-causal", "#pc-heatmap .js-plotly-plot .heatmaplayer"),
    "patching": ("/patching", "#pt-graph .js-plotly-plot .heatmaplayer"),
    "claims": ("/claims", ".claim-card"),
    "jobs": ("/jobs", ".jobs-table"),
}
MEAN_FAMILIES_JS = (
    "() => { const g = document.querySelector('#cv-graph .js-plotly-plot');"
    " return g.data.filter(t => t.meta && t.meta.kind === 'mean')"
    ".map(t => [t.meta.task, t.meta.family, t.meta.eval_length]); }"
)


@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_opens(server, probe, name):
    page = probe.page
    path, selector = PAGES[name]
    page.goto(server.base + path)
    wait_ready(page)
    page.wait_for_selector(selector, state="attached")
    wait_ready(page)
    page.wait_for_timeout(400)  # let Plotly finish its transitions before the screenshot
    shot(page, name)
    assert not page.query_selector(".alert-danger"), page.inner_text(".alert-danger")
    assert page.inner_text(".nav-link.active")
    assert not probe.errors, probe.errors


def test_curves_one_trace_per_family(server, page):
    page.goto(server.base + "/curves")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    means = page.evaluate(MEAN_FAMILIES_JS)
    assert {f for _, f, _ in means} == FAMILIES
    by_task: dict[str, list[str]] = {}
    for task, fam, _ in means:
        by_task.setdefault(task, []).append(fam)
    assert set(by_task) == {"parity", "s3", "dyck", "code_depth"}
    for fams in by_task.values():
        assert sorted(fams) == sorted(FAMILIES)  # exactly one per family in each facet
    legend = page.eval_on_selector_all("#cv-graph .legendtext", "els => els.map(e => e.textContent)")
    assert {"Transformer", "Mamba", "Mamba-2", "LSTM", "GRU", "majority baseline"} <= set(legend)
    kinds = page.evaluate(
        "() => document.querySelector('#cv-graph .js-plotly-plot').data.map(t => t.meta && t.meta.kind)"
    )
    assert "ci" in kinds and "baseline" in kinds


def test_filter_then_reload_and_back_restore_the_state(server, page):
    page.goto(server.base + "/curves")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    page.click("#cv-x >> text=normalised depth")
    page.wait_for_function("() => location.search.includes('x=depth')")
    page.click("#cv-lengths >> text=120")
    page.wait_for_function("() => /lengths=40(,|%2C)120/.test(location.search)")
    wait_figure(
        page, "cv-graph", "g.layout.meta.x === 'depth' && g.data.some(t => t.meta && t.meta.eval_length === 120)"
    )
    shot(page, "curves-depth-ood")
    page.reload()
    wait_ready(page)
    wait_figure(
        page, "cv-graph", "g.layout.meta.x === 'depth' && g.data.some(t => t.meta && t.meta.eval_length === 120)"
    )
    assert page.is_checked("#cv-x input[value='depth']")
    assert page.eval_on_selector_all("#cv-lengths input:checked", "els => els.map(e => e.value)") == ["40", "120"]
    page.go_back()
    page.wait_for_function("() => !location.search.includes('120')")
    page.wait_for_function("() => document.querySelectorAll('#cv-lengths input:checked').length === 1")
    wait_figure(page, "cv-graph", "!g.data.some(t => t.meta && t.meta.eval_length === 120)")
    assert page.is_checked("#cv-x input[value='depth']")


def test_runs_table_filters_paginates_and_selects(server, page):
    page.goto(server.base + "/?size=25")  # the default suite, as on every page: the 60 synthetic runs
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row")
    assert "of 60 runs" in page.inner_text("#rn-total")
    page.click("#rn-next")
    page.wait_for_function("() => location.search.includes('page=2')")
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.startsWith('26–50')")
    page.goto(server.base + "/?family=lstm&page=1")
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.includes('of 12 runs')")
    page.click("#rn-grid .ag-row[row-index='0'] .ag-cell[col-id='name']")
    page.wait_for_selector("#rn-detail-card")
    page.wait_for_function("() => location.search.includes('run=')")
    page.wait_for_function("() => document.querySelectorAll('#rn-detail-card .js-plotly-plot .trace').length >= 2")
    shot(page, "runs-detail")


def test_user_text_is_escaped_everywhere(server, probe):
    page = probe.page
    page.goto(server.base + "/")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row")
    assert XSS_NAME in page.inner_text("#rn-grid")  # shown literally, not run
    rid = server.summary.xss_run_id
    page.goto(server.base + f"/probe-vs-causal?run={rid}")
    wait_ready(page)
    wait_figure(page, "pc-heatmap")
    assert XSS_NAME in page.inner_text("#pc-run-info")
    title = page.evaluate("() => document.querySelector('#pc-heatmap .js-plotly-plot').layout.title.text")
    assert "&lt;script&gt;" in title
    assert XSS_NAME in page.eval_on_selector("#pc-heatmap .gtitle", "e => e.textContent")  # drawn as text
    page.goto(server.base + f"/v/{server.summary.view_slug}")
    wait_ready(page)
    assert page.inner_text("#view-title") == XSS_VIEW_TITLE
    assert not page.query_selector("#page img")
    page.wait_for_timeout(500)
    assert not probe.dialogs


def test_save_view_and_open_it_in_a_fresh_browser(server, browser, page):
    page.goto(server.base + "/curves?tasks=parity,dyck&x=depth&lengths=40,120")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    page.click("#curves-save-open")
    page.fill("#curves-save-title", "Parity vs Dyck <in & out>")
    page.click("#curves-save-submit")
    page.wait_for_selector("#curves-save-link")
    href = page.get_attribute("#curves-save-link", "href")
    assert href.startswith("/v/")
    fresh = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        p2 = fresh.new_page()
        p2.set_default_timeout(90_000)
        p2.goto(server.base + href)
        wait_ready(p2)
        wait_figure(p2, "cv-graph", "g.layout.meta.x === 'depth'")
        assert p2.inner_text("#view-title") == "Parity vs Dyck <in & out>"
        tasks = p2.evaluate(MEAN_FAMILIES_JS)
        assert {t for t, _, _ in tasks} == {"parity", "dyck"}
        assert {L for _, _, L in tasks} == {40, 120}
        shot(p2, "saved-view")
    finally:
        fresh.close()


def test_embed_shows_the_figure_alone(server, page):
    page.goto(server.base + "/reversal?embed=1&fig=rv-matrix")
    wait_ready(page, "#page .page-embed")
    wait_figure(page, "rv-matrix")
    assert not page.is_visible("#navbar")
    assert not page.is_visible("#rv-length")
    assert not page.query_selector("#reversal-save-open")
    assert not page.is_visible("#rv-s3-card")
    assert not page.is_visible("#rv-matrix-csv")  # the figure alone, no chrome
    shot(page, "embed-reversal")


def test_download_csv_and_svg(server, page):
    page.goto(server.base + "/curves?lengths=40")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    with page.expect_download() as dl:
        page.click("#cv-graph-csv")
    d = dl.value
    assert d.suggested_filename == "layerscope-curves.csv"
    rows = list(csv.DictReader(io.StringIO(Path(d.path()).read_text(encoding="utf-8"))))
    assert {r["family"] for r in rows} == FAMILIES
    assert {"mean", "lo", "hi", "n", "seeds", "majority_baseline", "layer_name"} <= set(rows[0])
    with page.expect_download() as dl:
        page.click("#cv-graph-svg")
    assert dl.value.suggested_filename.endswith(".svg")
    assert Path(dl.value.path()).read_text(encoding="utf-8").lstrip().startswith("<svg")
    with page.expect_download() as dl:
        page.click("#cv-graph-png")
    assert dl.value.suggested_filename.endswith(".png")
    assert Path(dl.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.goto(server.base + "/")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row")
    with page.expect_download() as dl:
        page.click("#rn-export")
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text(encoding="utf-8"))))
    # every run of the default suite (the seeded 64 less the 4 of suite "pretrained")
    assert len(rows) == len(server.summary.run_ids) - 4 and {r["suite"] for r in rows} == {"synthetic"}
    assert any(r["name"] == XSS_NAME for r in rows)


def test_jobs_form_shows_the_server_message_at_the_field(server, page):
    page.goto(server.base + "/jobs")
    wait_ready(page)
    seed = 'input[id=\'{"name":"seed","type":"jf"}\']'
    msg = '[id=\'{"name":"seed","type":"jf-msg"}\']'
    page.fill(seed, "-5")
    page.click("#jb-submit")
    page.wait_for_selector(msg + ":not(:empty)")
    assert "greater than or equal to 0" in page.inner_text(msg)
    assert "Not launched" in page.inner_text("#jb-result")
    shot(page, "jobs-validation")
    # a bad run id for a probe job is reported at the run id field too
    page.click("#jb-kind >> text=probe")
    run_id = 'input[id=\'{"name":"run_id","type":"jf"}\']'
    page.fill(run_id, "999999")
    page.click("#jb-submit")
    page.wait_for_selector('[id=\'{"name":"run_id","type":"jf-msg"}\']:not(:empty)')
    assert "not found" in page.inner_text('[id=\'{"name":"run_id","type":"jf-msg"}\']')


def test_jobs_list_shows_progress_and_cancel(server, page):
    page.goto(server.base + "/jobs?show=active")
    wait_ready(page)
    page.wait_for_selector(".jobs-table")
    rows = page.query_selector_all(".job-row")
    assert rows and all(r.get_attribute("data-state") in ("queued", "running") for r in rows)
    page.click(".job-row button:has-text('Cancel')")
    page.wait_for_selector("#jb-action-msg .alert")
    assert "Cancel" in page.inner_text("#jb-action-msg")


def test_runs_grid_has_string_row_ids_and_a_trained_column(server, page):
    """AG Grid warned "getRowId callback must return a string" and "Duplicate node id 'undefined'"
    when the row id expression did not evaluate; the trained column shows each run's verdict."""
    warnings: list[str] = []
    page.on("console", lambda m: warnings.append(m.text) if m.type in ("warning", "error") else None)
    page.goto(server.base + "/?size=25")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row")
    ids = page.eval_on_selector_all(
        "#rn-grid .ag-center-cols-container .ag-row", "rs => rs.map(r => r.getAttribute('row-id'))"
    )
    assert ids and all(i and i != "undefined" for i in ids) and len(set(ids)) == len(ids)
    assert not [w for w in warnings if "getRowId" in w or "Duplicate node id" in w], warnings
    cells = page.eval_on_selector_all("#rn-grid .ag-cell[col-id='trained_label']", "cs => cs.map(c => c.textContent)")
    assert cells and set(cells) <= {"trained", "untrained", "–"}


def test_claims_table_then_the_full_text_on_one_click(server, probe):
    page = probe.page
    page.goto(server.base + "/claims")
    wait_ready(page)
    page.wait_for_selector("#claim-1-table")
    rows = page.eval_on_selector_all("#claim-1-table th", "ths => ths.map(t => t.textContent)")
    assert rows[:4] == ["verdict", "numbers", "cells read", "left out"]
    assert not page.query_selector("#claim-1 .claim-detail")  # the prose waits for its click
    page.click("#claim-1 .claim-why")
    page.wait_for_selector("#claim-1 .claim-detail")
    assert page.inner_text("#claim-1 .claim-detail").strip()
    shot(page, "claims-full-text")
    assert not probe.errors, probe.errors
