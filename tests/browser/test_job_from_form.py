"""Launch a real job from the /jobs form, watch a `layerscope worker` finish it, and find its
results in the runs table and on the curves page (needs the pipeline: slow)."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest

from tests.browser.conftest import ROOT, Server, layerscope_cmd, shot, wait_figure, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOB_GUARD_S = 1800  # hang guard for training + measuring a tiny model on a busy CPU


@pytest.fixture(scope="module")
def empty_server(tmp_path_factory, chromium_path):
    from store.migrate import init_db

    tmp = tmp_path_factory.mktemp("jobs-e2e")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    init_db(url)
    srv = Server(tmp, url, None)
    log = open(tmp / "worker.log", "w")  # noqa: SIM115
    worker = subprocess.Popen(
        [*layerscope_cmd(), "worker", "--device", "cpu"],
        cwd=ROOT,
        env=srv.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield srv
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGINT)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        log.close()
        srv.stop()


def field(name: str) -> str:
    return f'[id=\'{{"name":"{name}","type":"jf"}}\']'


def test_job_launched_from_the_form_finishes_and_its_results_appear(empty_server, page):
    srv = empty_server
    page.goto(srv.base + "/jobs")
    wait_ready(page)
    page.click("#jb-kind >> text=train")
    # family and task default to LSTM / Parity in the form
    page.fill("input" + field("seed"), "3")
    page.fill("input" + field("n_layers"), "2")
    page.fill("input" + field("d_model"), "16")
    page.fill("input" + field("max_steps"), "30")
    page.fill("input" + field("name"), "e2e-from-the-form")
    page.click("#jb-submit")
    page.wait_for_selector("#jb-launched")
    job_id = int(re.search(r"#(\d+)", page.inner_text("#jb-launched")).group(1))
    row = f"#job-{job_id}"
    page.wait_for_selector(row)
    # the row's state as the page's poll updates it, waited for (Playwright watches the DOM)
    finished = ", ".join(f"{row}[data-state={s}]" for s in ("succeeded", "failed", "cancelled"))
    page.wait_for_selector(f":is({finished})", timeout=JOB_GUARD_S * 1000)
    state = page.get_attribute(row, "data-state")
    shot(page, "jobs-finished")
    assert state == "succeeded", page.inner_text(row)
    page.goto(srv.base + "/")
    wait_ready(page)
    page.wait_for_selector("#rn-grid .ag-row")
    assert "e2e-from-the-form" in page.inner_text("#rn-grid")
    # a few-step run from the form is usually not trained: /curves shows it with the switch off
    page.goto(srv.base + "/curves?tasks=parity&families=lstm&trained=0")
    wait_ready(page)
    wait_figure(page, "cv-graph")
    fams = page.evaluate(
        "() => document.querySelector('#cv-graph .js-plotly-plot').data"
        ".filter(t => t.meta && t.meta.kind === 'mean').map(t => t.meta.family)"
    )
    assert fams == ["lstm"]
    shot(page, "curves-after-job")
