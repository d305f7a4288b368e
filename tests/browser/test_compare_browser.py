"""The compare view in headless Chromium: two suites (the synthetic study, and a copy whose Dyck
Transformer curve was made flat), /reversal and /claims side by side with the change marked,
/curves overlaid one dash style per suite, the comparison in the URL and in a saved view."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from tests.browser.conftest import Server, shot, wait_figure, wait_ready
from tests.fixtures.seed_results import seed_database

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def two_suites(tmp_path_factory, chromium_path) -> Iterator[Server]:
    from store.models import ProbeResult, Run
    from store.session import make_engine, make_sessionmaker

    tmp = tmp_path_factory.mktemp("compare")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    summary = seed_database(
        url, tasks=("parity", "dyck"), replicas=2, detailed_replicas=1, jobs=False, xss=False, pretrained=False
    )
    engine = make_engine(url)
    with make_sessionmaker(engine)() as s:  # bench-01's Dyck Transformer: at the majority baseline (flat)
        ids = list(
            s.execute(
                select(Run.id).where(Run.suite == "bench-01", Run.task == "dyck", Run.family == "transformer")
            ).scalars()
        )
        s.execute(update(ProbeResult).where(ProbeResult.run_id.in_(ids)).values(accuracy=ProbeResult.majority_baseline))
        s.commit()
    engine.dispose()
    srv = Server(tmp, url, summary)
    yield srv
    srv.stop()


def test_reversal_shows_both_suites_classes_with_the_change_marked(two_suites, page):
    page.goto(two_suites.base + "/reversal?suite=synthetic&compare=bench-01")
    wait_ready(page)
    page.wait_for_selector("#rv-compare-table")
    heads = page.eval_on_selector_all("#rv-compare-table th", "els => els.map(e => e.textContent)")
    assert "class · synthetic" in heads and "class · bench-01" in heads
    changed = page.eval_on_selector_all(
        "#rv-compare-table tr.changed", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert [c[1:5] for c in changed if c[1] == "Dyck"] and all(c[0] == "≠" for c in changed)
    dyck_t = next(c for c in changed if c[1] == "Dyck" and c[2] == "Transformer")
    assert dyck_t[4] == "flat" and dyck_t[3] != "flat"
    unchanged = page.eval_on_selector_all("#rv-compare-table tr[data-changed='0']", "rows => rows.length")
    assert unchanged >= 1
    shot(page, "compare-reversal")


def test_claims_side_by_side_and_curves_overlay(two_suites, page):
    page.goto(two_suites.base + "/claims?suite=synthetic&compare=bench-01")
    wait_ready(page)
    page.wait_for_selector("#cl-compare-table")
    rows = page.eval_on_selector_all("#cl-compare-table tbody tr", "rows => rows.length")
    assert rows == 6
    shot(page, "compare-claims")
    page.goto(two_suites.base + "/curves?suite=synthetic&compare=bench-01&tasks=dyck")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    dashes = page.evaluate(
        "() => { const g = document.querySelector('#cv-graph .js-plotly-plot'); const o = {};"
        " g.data.filter(t => t.meta && t.meta.kind === 'mean').forEach(t => {"
        " (o[t.meta.suite] = o[t.meta.suite] || []).push(t.line.dash); }); return o; }"
    )
    assert set(dashes) == {"synthetic", "bench-01"}
    assert set(dashes["bench-01"]) == {"dashdot"} and "dashdot" not in dashes["synthetic"]
    assert len(dashes["bench-01"]) == len(dashes["synthetic"]) == 5
    shot(page, "compare-curves")


def test_the_comparison_survives_a_saved_view(two_suites, browser, page):
    page.goto(two_suites.base + "/reversal?suite=synthetic&compare=bench-01")
    wait_ready(page)
    page.wait_for_selector("#rv-compare-table")
    page.click("#reversal-save-open")
    page.fill("#reversal-save-title", "75 s vs 240 s")
    page.click("#reversal-save-submit")
    page.wait_for_selector("#reversal-save-link")
    href = page.get_attribute("#reversal-save-link", "href")
    fresh = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        p2 = fresh.new_page()
        p2.set_default_timeout(90_000)
        p2.goto(two_suites.base + href)
        wait_ready(p2)
        p2.wait_for_selector("#rv-compare-table tr.changed")
        assert p2.input_value("#rv-compare") == "bench-01"
    finally:
        fresh.close()


def test_a_view_saved_on_the_default_suite_keeps_that_suite(two_suites, page):
    """A page opened without ?suite= shows the default suite; the view saved there records it, so
    its link still shows that suite after another suite becomes the default."""
    import httpx

    page.goto(two_suites.base + "/claims")
    wait_ready(page)
    page.click("#claims-save-open")
    page.fill("#claims-save-title", "claims as shown")
    page.click("#claims-save-submit")
    page.wait_for_selector("#claims-save-link")
    slug = page.get_attribute("#claims-save-link", "href").rsplit("/", 1)[-1]
    view = httpx.get(f"{two_suites.base}/api/views/{slug}", timeout=10).json()
    shown = httpx.get(f"{two_suites.base}/api/suites", timeout=10).json()
    assert view["state"]["suite"] in {"synthetic", "bench-01"}, view
    assert view["state"]["suite"] in str(shown)
