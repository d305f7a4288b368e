"""``layerscope serve BUNDLE.zip``: the API and dashboard over a bundle, read-only, without a
results database where the user keeps theirs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.bundle_export import export_bundle
from backend.cli import main
from backend.serve_bundle import bundle_app
from store.settings import get_settings
from tests.conftest import seed_runs

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper.layerscope.zip"


def test_the_shipped_bundle_is_served_read_only(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAYERSCOPE_DB_URL", raising=False)
    get_settings.cache_clear()
    try:
        settings, app = bundle_app(BUNDLE, port=8123)
    finally:
        get_settings.cache_clear()
    with TestClient(app) as c:
        runs = c.get("/api/runs", params={"suite": "paper", "limit": 1000, "controls": "exclude"}).json()
        assert runs["total"] == 60  # the study's runs; its random-init controls are listed apart
        claims = c.get("/api/claims", params={"suite": "paper"}).json()
        assert claims[1]["verdict"] == "contradicted"
        for method, path, body in (
            ("post", "/api/jobs", {"kind": "probe", "params": {"run_id": 1}}),
            ("post", "/api/views", {"title": "t", "page": "/curves", "state": {}}),
            ("delete", "/api/runs/1", None),
            ("patch", "/api/runs/1", {"notes": "x"}),
        ):
            r = getattr(c, method)(path, **({"json": body} if body is not None else {}))
            assert r.status_code == 405 and "read-only" in r.json()["detail"], (method, path)
        assert c.get("/api/runs/1").status_code == 200  # the delete was refused
        page = c.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert not (tmp_path / "home").exists()  # no results DB, queue or store where the user keeps theirs
    assert str(settings.port) == "8123" and "layerscope-bundle-" in settings.resolved_db_url


def test_a_small_bundle_serves_its_suite(tmp_path, db_factory) -> None:
    _, factory = db_factory
    seed_runs(factory, families=("lstm",), tasks=("dyck",), seeds=(0, 1), suite="mine")
    path = tmp_path / "mine.layerscope.zip"
    with factory() as s:
        export_bundle(s, "mine", path)
    _, app = bundle_app(path)
    with TestClient(app) as c:
        assert [s["name"] for s in c.get("/api/suites").json()] == ["mine"]


def test_serve_a_missing_bundle_is_one_line(tmp_path, capsys) -> None:
    assert main(["serve", str(tmp_path / "nope.zip")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.zip: no such file" in err[0]


def _find(node, cid):
    """The component with id ``cid`` in a Dash tree (None when absent)."""
    stack = [node]
    while stack:
        c = stack.pop()
        if getattr(c, "id", None) == cid:
            return c
        kids = getattr(c, "children", None)
        stack.extend(kids if isinstance(kids, (list, tuple)) else [kids] if kids is not None else [])
    return None


def test_a_read_only_server_says_so_on_every_page_and_disables_writes(tmp_path, db_factory) -> None:
    """Launch, Save view and the task upload are disabled up front, not live until pressed."""
    from dashboard.api_client import ApiClient
    from dashboard.app import render_page

    _, factory = db_factory
    seed_runs(factory, families=("lstm",), tasks=("dyck",), seeds=(0,), suite="mine")
    path = tmp_path / "mine.layerscope.zip"
    with factory() as s:
        export_bundle(s, "mine", path)
    _, app = bundle_app(path)
    with TestClient(app) as c:
        assert "mine.layerscope.zip" in c.get("/api/meta").json()["read_only"]

        def handler(request: httpx.Request) -> httpx.Response:  # the dashboard's client, answered by the app
            r = c.request(request.method, str(request.url), content=request.content, headers=request.headers)
            return httpx.Response(r.status_code, headers=r.headers, content=r.content)

        api = ApiClient("http://testserver", transport=httpx.MockTransport(handler))
        for page, writes in (
            ("/jobs", ("jb-submit", "jb-task-add")),
            ("/curves", ("curves-save-open",)),
        ):
            body, _ = render_page(page, "", api=api, path_for=lambda p: p)
            banner = _find(body, "read-only-banner")
            assert banner is not None and "mine.layerscope.zip" in banner.children, page
            for cid in writes:
                assert _find(body, cid).disabled is True, (page, cid)


def test_a_server_that_writes_shows_no_read_only_line(api) -> None:
    assert api.client.get("/api/meta").json().get("read_only") is None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_serve_a_bundle_removes_its_temporary_folder_on_a_signal(tmp_path, db_factory, sig) -> None:
    """A real ``layerscope serve BUNDLE.zip`` process, stopped by ``kill -INT`` / ``kill -TERM``
    once it answers: its ``layerscope-bundle-*`` folder is gone (SIGTERM left it before). Ready is
    uvicorn's "Uvicorn running on" line (printed once it listens), read as it comes."""
    import os
    import signal
    import subprocess
    import sys

    from tests.output_lines import OutputLines

    _, factory = db_factory
    seed_runs(factory, families=("lstm",), tasks=("dyck",), seeds=(0,), suite="mine")
    path = tmp_path / "mine.layerscope.zip"
    with factory() as s:
        export_bundle(s, "mine", path)
    tmp = tmp_path / "tmp"  # the folder mkdtemp makes the bundle's database in
    tmp.mkdir()
    port = _free_port()
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(root),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("LAYERSCOPE_DB_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend.cli", "serve", str(path), "--port", str(port), "--no-dashboard"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stderr = OutputLines(proc.stderr)
    try:
        stderr.wait_for("Uvicorn running on", hang_guard_s=300)  # start-up on a loaded machine
        assert httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=60).status_code == 200
        assert [p.name[:18] for p in tmp.iterdir()] == ["layerscope-bundle-"]  # its temporary folder
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp.iterdir()) == [], stderr.text()[-2000:]
