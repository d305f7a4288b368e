"""On `/` in headless Chromium: a run tagged in its panel is found by the search box, several
selected runs' loss curves are overlaid, and a deleted run (DELETE /api/runs/{id}) is gone."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from store.models import Run
from store.session import make_engine, make_sessionmaker
from tests.browser.conftest import Server, shot, wait_ready
from tests.fixtures.seed_results import seed_database
from worker.persist import REMEASURING

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small(tmp_path_factory, chromium_path) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("runs-housekeeping")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    summary = seed_database(url, tasks=("parity",), jobs=False, xss=False, pretrained=False)
    srv = Server(tmp, url, summary)
    yield srv
    srv.stop()


def test_tag_in_the_panel_find_by_search_then_delete(small, page):
    page.goto(small.base + "/?family=gru")
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.includes('of 3 runs')")
    page.click("#rn-grid .ag-row[row-index='0'] .ag-cell[col-id='name']")
    page.wait_for_selector("#rn-detail-card #rn-tags")
    run_id = int(page.evaluate("() => new URLSearchParams(location.search).get('run')"))
    page.fill("#rn-tags", "keeper, lr-sweep")
    page.fill("#rn-notes", "the one to keep")
    page.click("#rn-annotate")
    page.wait_for_function("() => document.querySelector('#rn-annotate-msg').textContent.startsWith('saved')")
    page.goto(small.base + "/")
    wait_ready(page)
    page.fill("#rn-q", "KEEPER")
    page.press("#rn-q", "Enter")
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.includes('of 1 runs')")
    assert "q=KEEPER" in page.evaluate("() => location.search")
    cells = page.eval_on_selector_all("#rn-grid .ag-row .ag-cell[col-id='id']", "els => els.map(e => e.textContent)")
    assert cells == [str(run_id)]
    shot(page, "runs-search")
    r = httpx.delete(f"{small.base}/api/runs/{run_id}", timeout=30)
    assert r.status_code == 200 and r.json()["deleted"]["runs"] == 1
    page.reload()
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.includes('0 runs')")


def test_several_runs_loss_curves_overlaid(small, page):
    page.goto(small.base + "/?family=lstm")
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#rn-total').textContent.includes('of 3 runs')")
    for i in range(3):
        page.click(
            f"#rn-grid .ag-row[row-index='{i}'] .ag-selection-checkbox input, "
            f"#rn-grid .ag-row[row-index='{i}'] .ag-checkbox-input"
        )
    page.wait_for_function(
        "() => { const g = document.querySelector('#rn-losses-graph .js-plotly-plot');"
        " return g && g.data && g.data.length === 3; }"
    )
    ids = page.evaluate("() => document.querySelector('#rn-losses-graph .js-plotly-plot').data.map(t => t.meta.run_id)")
    assert len(set(ids)) == 3
    shot(page, "runs-loss-overlay")


def test_saved_views_listed_and_deleted(small, page):
    made = httpx.post(
        f"{small.base}/api/views", json={"title": "to go", "page": "/curves", "state": {}}, timeout=30
    ).json()
    kept = httpx.post(
        f"{small.base}/api/views", json={"title": "to keep", "page": "/claims", "state": {}}, timeout=30
    ).json()
    page.goto(small.base + "/views")
    wait_ready(page)
    page.wait_for_selector(f"#vw-table tr[data-slug='{made['slug']}']")
    page.click(f"#vw-table tr[data-slug='{made['slug']}'] button")
    page.wait_for_selector(f"#vw-table tr[data-slug='{made['slug']}']", state="detached")
    assert page.query_selector(f"#vw-table tr[data-slug='{kept['slug']}']") is not None
    assert httpx.get(f"{small.base}/api/views/{made['slug']}", timeout=30).status_code == 404
    shot(page, "views")


def test_rebuild_from_the_jobs_form_says_why_not_for_a_run_with_weights(small, page):
    page.goto(small.base + "/jobs")
    wait_ready(page)
    page.fill("#jb-rebuild-run", "99999")
    page.click("#jb-rebuild")
    page.wait_for_function("() => document.querySelector('#jb-rebuild-result').textContent.includes('not found')")


def test_the_bundle_link_asks_for_a_partial_bundle_while_a_run_is_rebuilt(small, page):
    # a run of the suite marked as a worker marks a rebuilt run until its measurements are stored
    with make_sessionmaker(make_engine(small.db_url))() as s:
        run = s.scalars(select(Run).where(Run.suite == "synthetic", Run.family == "lstm")).first()
        run.status = REMEASURING
        s.commit()
    page.goto(small.base + "/?suite=synthetic")
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#rn-bundle').textContent.includes('being rebuilt')")
    link = page.locator("#rn-bundle")
    assert link.text_content() == "Download suite bundle (partial: 1 run is being rebuilt)"
    href = link.get_attribute("href")
    assert href == "/api/suites/synthetic/bundle?allow_partial=true"
    assert (
        httpx.get(small.base + "/api/suites/synthetic/bundle", timeout=60).status_code == 409
    )  # the plain link's answer
    r = httpx.get(small.base + href, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    shot(page, "runs-bundle-partial")
