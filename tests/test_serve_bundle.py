"""``layerscope serve BUNDLE.zip``: the API and dashboard over a bundle, read-only, without a
results database where the user keeps theirs."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from backend.bundle_export import export_bundle
from backend.cli import main
from backend.serve_bundle import bundle_app
from store.config import get_settings
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
