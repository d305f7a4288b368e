"""Your own data from the browser: a 5 MB JSONL of 20-token rows uploads from /jobs
(multipart, with a progress bar; a bad file is refused in one line), and its suite's curve is
drawn on /curves from the pickers alone (the suite typed, the eval length offered: 20, the
task's, not the study's 40–120). Screenshots: artifacts/screenshots/own-data-*.png."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Server, shot, wait_figure, wait_ready
from tests.fixtures.seed_results import seed_database

pytestmark = pytest.mark.browser

TASK, SUITE, L = "byo_mod3", "byo_mod3", 20


def mod3_rows(n: int, seed: int = 0) -> list[dict]:
    """Rows of 20 digits, each labelled with the running sum of the digits mod 3."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        digits = [rng.randint(0, 9) for _ in range(L)]
        rows.append({"tokens": digits, "labels": [sum(digits[: t + 1]) % 3 for t in range(L)]})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def own_server(tmp_path_factory, chromium_path) -> Iterator[Server]:
    """The synthetic study (the default suite, measured at 40 and 120) and nothing of the file task
    yet: the test uploads it."""
    tmp = tmp_path_factory.mktemp("served-own-data")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    summary = seed_database(
        url,
        families=("lstm", "gru"),
        tasks=("parity",),
        jobs=False,
        xss=False,
        pretrained=False,
        eval_lengths=(40, 120),
    )
    srv = Server(tmp, url, summary)
    yield srv
    srv.stop()


def upload(page, path: Path, name: str) -> str:
    """Choose ``path``, name it, press Add task; the outcome line's text once it lands."""
    page.set_input_files("#jb-task-file", str(path))
    page.fill("#jb-task-name", name)
    page.click("#jb-task-add")
    page.wait_for_selector("#jb-task-result[data-outcome]", timeout=180_000)
    return page.inner_text("#jb-task-result")


def test_a_5_mb_jsonl_uploads_from_the_browser(own_server, page, tmp_path):
    big = write_jsonl(tmp_path / "mod3.jsonl", mod3_rows(40_000))
    assert big.stat().st_size > 5 * 2**20  # past the 1 MB body limit the old base64 callback hit
    page.goto(own_server.base + "/jobs")
    wait_ready(page)
    text = upload(page, big, TASK)
    assert page.get_attribute("#jb-task-result", "data-outcome") == "added", text
    assert f"Task {TASK} added: 40000 rows, lengths {L}..{L}, classes 0, 1, 2" in text
    shot(page, "own-data-upload")
    # a bad file: one line naming the row and why, nothing stored
    rows = mod3_rows(10)
    rows[3]["labels"] = rows[3]["labels"][:5]
    bad = write_jsonl(tmp_path / "bad.jsonl", rows)
    page.goto(own_server.base + "/jobs")
    wait_ready(page)
    text = upload(page, bad, "bad_one")
    assert page.get_attribute("#jb-task-result", "data-outcome") == "refused"
    assert text.startswith("bad.jsonl refused (HTTP 422): row 4") and "\n" not in text.strip()
    shot(page, "own-data-upload-refused")


def _store_runs_of_the_task(url: str) -> None:
    """Two GRU seeds of the file task, trained and probed at its rows' length, as a suite run
    leaves them (the measurements themselves are synthetic: the page is under test)."""
    from store.models import ProbeResult, Run
    from store.session import make_engine, make_sessionmaker

    with make_sessionmaker(make_engine(url))() as s:
        for seed in (0, 1):
            run = Run(
                name=f"gru-{TASK}-s{seed}",
                suite=SUITE,
                family="gru",
                task=TASK,
                seed=seed,
                n_layers=2,
                d_model=32,
                n_params=20_000,
                train_config={"train_length": L},
                config_hash=f"{'ab' * 31}{seed:02d}",
                status="complete",
                steps=600,
                heldout_acc=1.0,
                early_stop_acc=0.99,
                behaviour={str(L): {"token_acc": 1.0, "last_acc": 1.0, "n": 64}},
            )
            s.add(run)
            s.flush()
            for layer, acc in ((-1, 0.36), (0, 0.82), (1, 0.99)):
                s.add(
                    ProbeResult(
                        run_id=run.id,
                        layer=layer,
                        eval_length=L,
                        accuracy=acc + 0.01 * seed,
                        majority_baseline=0.34,
                        n_train=100,
                        n_test=25,
                        converged=True,
                        n_iter=50,
                        config_hash="cd" * 32,
                    )
                )
        s.commit()


def test_the_tasks_curve_is_drawn_from_the_pickers_alone(own_server, page):
    _store_runs_of_the_task(own_server.db_url)
    page.goto(own_server.base + "/curves")
    wait_ready(page)
    wait_figure(page, "cv-graph")  # the default suite (the synthetic study) first
    page.fill("#cv-suite", SUITE)
    page.press("#cv-suite", "Enter")
    # the length picker now offers the suite's length, ticked; the figure draws the GRU's line
    page.wait_for_function(
        "() => [...document.querySelectorAll('#cv-lengths input')].map(i => i.value + ':' + i.checked).join()"
        f" === '{L}:true'"
    )
    assert "20 (train)" in page.inner_text("#cv-lengths")
    wait_figure(page, "cv-graph", "g.data.some(t => (t.name || '').startsWith('GRU'))")
    assert f"lengths={L}" in page.url and f"suite={SUITE}" in page.url
    # the facet's title and the caption name the length (SVG text: textContent, not innerText)
    page.wait_for_function(f"() => document.querySelector('#cv-graph').textContent.includes('{SUITE} · L={L}')")
    assert "stored but not probed" not in page.inner_text("body")
    shot(page, "own-data-curves")
    # /probe-vs-causal titles the run at its length, never "L=None"
    page.goto(own_server.base + f"/probe-vs-causal?suite={SUITE}")
    wait_ready(page)
    page.wait_for_function(f"() => document.querySelector('#pc-length').innerText.includes('L={L}')")
    assert "L=None" not in page.evaluate("() => document.body.textContent")
    shot(page, "own-data-probe-vs-causal")
