"""Browser-test fixtures: `layerscope serve` on a free port over a seeded SQLite DB, and
headless Debian Chromium driven by Playwright. Screenshots go to artifacts/screenshots/
(git-ignored). Waits have generous timeouts: they are hang guards, not performance checks."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.fixtures.seed_results import SeedSummary, seed_database

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("LAYERSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
HANG_GUARD_MS = 90_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def layerscope_cmd() -> list[str]:
    exe = shutil.which("layerscope")
    return [exe] if exe else [sys.executable, "-c", "from backend.cli import main; main()"]


def server_env(tmp: Path, db_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "LAYERSCOPE_DB_URL": db_url,
            "LAYERSCOPE_HOME": str(tmp / "home"),
            "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp / 'queue.db'}",
            "LAYERSCOPE_STORE_DIR": str(tmp / "store"),
            "LAYERSCOPE_DEVICE": "cpu",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("LAYERSCOPE_API_URL", None)
    return env


class Server:
    def __init__(self, tmp: Path, db_url: str, summary: SeedSummary | None, args: Sequence[str] = ()):
        """``layerscope serve`` on a free port over ``db_url``; ``args``: more options of serve."""
        self.tmp, self.db_url, self.summary = tmp, db_url, summary
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = server_env(tmp, db_url)
        self.log = open(tmp / "serve.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*layerscope_cmd(), "serve", "--port", str(self.port), *args],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"layerscope serve exited: {(tmp / 'serve.log').read_text()[-3000:]}")
            try:
                if httpx.get(self.base + "/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("layerscope serve did not answer /api/health")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="session")
def server(tmp_path_factory, chromium_path) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("served")
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    summary = seed_database(url)
    srv = Server(tmp, url, summary)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageProbe:
    """A page plus what it logged; a JavaScript dialog (alert) fails the test: it means
    user text was executed."""

    def __init__(self, context):
        self.context = context
        self.page = context.new_page()
        self.page.set_default_timeout(HANG_GUARD_MS)
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", self._dialog)

    def _dialog(self, d):
        self.dialogs.append(d.message)
        d.dismiss()


@pytest.fixture
def probe(browser) -> Iterator[PageProbe]:
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1440, "height": 1000})
    pp = PageProbe(ctx)
    yield pp
    ctx.close()
    assert not pp.dialogs, f"a script ran: dialogs {pp.dialogs}"


@pytest.fixture
def page(probe):
    return probe.page


def wait_ready(page, selector: str = "#page .page") -> None:
    """Dash rendered the page and no callback is still loading."""
    page.wait_for_selector(selector, timeout=HANG_GUARD_MS)
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=HANG_GUARD_MS)


def wait_figure(page, gid: str, predicate: str = "true") -> None:
    """The Plotly figure in ``#gid`` has traces and ``predicate`` (JS over ``g``) holds."""
    page.wait_for_function(
        "([gid, pred]) => { const g = document.querySelector('#' + gid + ' .js-plotly-plot');"
        " if (!g || !g.data || !g.data.length) return false; return Function('g', 'return ' + pred)(g); }",
        arg=[gid, predicate],
        timeout=HANG_GUARD_MS,
    )


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
