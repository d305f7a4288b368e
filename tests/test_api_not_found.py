"""Unknown API paths answer JSON, never the dashboard's HTML (found by a new-user bug bash)."""

from fastapi.testclient import TestClient

from backend.app import create_app
from store.migrate import init_db
from store.session import make_engine, make_sessionmaker
from store.settings import Settings


def test_unknown_api_paths_are_json_404(tmp_path, sqlite_url):
    init_db(sqlite_url)
    settings = Settings(home=tmp_path, db_url=sqlite_url)
    app = create_app(settings, make_sessionmaker(make_engine(sqlite_url)), background=False)
    with TestClient(app) as c:
        r = c.get("/api/nonexistent")
        assert r.status_code == 404 and r.json()["detail"] == "no such endpoint: GET /api/nonexistent"
        r = c.put("/api/runs/1")  # a known path, the wrong method: 405 (was 404)
        assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, PATCH"
        r = c.delete("/api/nothing/1")
        assert r.status_code == 404 and "DELETE /api/nothing/1" in r.json()["detail"]
        assert c.get("/api/health").status_code == 200
        assert "text/html" in c.get("/curves").headers["content-type"]
