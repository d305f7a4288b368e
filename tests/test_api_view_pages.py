"""A saved view must open a page of the dashboard served beside the API: an unknown page is a
422 at the body's ``page`` naming the pages, and nothing is stored (found by a new user's trial:
such a view was saved, then its link showed an error)."""

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from dashboard.all_pages import PAGES
from store.migrate import init_db
from store.session import make_engine, make_sessionmaker
from store.settings import Settings


@pytest.fixture
def client(tmp_path, sqlite_url):
    init_db(sqlite_url)
    settings = Settings(home=tmp_path, db_url=sqlite_url)
    app = create_app(settings, make_sessionmaker(make_engine(sqlite_url)), background=False)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("page", ["/nowhere", "/curve", "/api", "/v/abc"])
def test_an_unknown_page_is_422_at_page_and_not_stored(client, page) -> None:
    r = client.post("/api/views", json={"title": "t", "page": page, "state": {}})
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "page"] and page in err["msg"] and "/curves" in err["msg"]
    assert client.get("/api/views").json() == []


def test_every_dashboard_page_can_be_saved(client) -> None:
    pages = [p.path for p in PAGES] + ["/curves/"]  # a trailing slash opens the page itself
    for page in pages:
        r = client.post("/api/views", json={"title": page, "page": page, "state": {}})
        assert r.status_code == 201, (page, r.text)
    assert sorted(v["page"] for v in client.get("/api/views").json()) == sorted(pages)
