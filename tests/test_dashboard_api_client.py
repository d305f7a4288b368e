"""The dashboard's HTTP client, against a mock transport (no server)."""

from __future__ import annotations

import json

import httpx
import pytest

from dashboard.api_client import ApiClient, ApiError


def make(handler):
    return ApiClient("http://api.test", transport=httpx.MockTransport(handler))


def test_query_lists_are_repeated_and_empty_values_dropped():
    seen = {}

    def handler(req: httpx.Request):
        seen["url"] = str(req.url)
        return httpx.Response(200, json={"items": [], "total": 0, "limit": 50, "offset": 0})

    make(handler).runs(task=["parity", "s3"], family=None, seed=0, suite="")
    assert "task=parity&task=s3" in seen["url"] and "seed=0" in seen["url"]
    assert "family" not in seen["url"] and "suite" not in seen["url"]


def test_errors_carry_status_and_detail():
    def handler(req):
        if req.url.path == "/api/runs/42":
            return httpx.Response(404, json={"detail": "run 42 not found"})
        return httpx.Response(422, json={"detail": [{"loc": ["body", "params", "seed"], "msg": "too small"}]})

    api = make(handler)
    with pytest.raises(ApiError) as e:
        api.run(42)
    assert e.value.status == 404 and e.value.message == "run 42 not found"
    with pytest.raises(ApiError) as e:
        api.create_job("train", {"seed": -1})
    assert e.value.status == 422 and e.value.message == "params.seed: too small"


def test_unreachable_server_is_an_api_error():
    def handler(req):
        raise httpx.ConnectError("refused")

    with pytest.raises(ApiError) as e:
        make(handler).health()
    assert e.value.status == 503


def test_all_runs_pages_through():
    items = [{"id": i} for i in range(1, 2501)]

    def handler(req):
        q = dict(req.url.params)
        lim, off = int(q["limit"]), int(q["offset"])
        return httpx.Response(
            200, json={"items": items[off : off + lim], "total": len(items), "limit": lim, "offset": off}
        )

    got = make(handler).all_runs(limit=5000)
    assert len(got) == 2500 and got[-1]["id"] == 2500


def test_posts_json_bodies():
    bodies = []

    def handler(req):
        bodies.append((req.url.path, json.loads(req.content)))
        return httpx.Response(201, json={"slug": "abc", "url": "/v/abc"})

    assert make(handler).create_view("t", "/curves", {"x": "depth"})["slug"] == "abc"
    assert bodies == [("/api/views", {"title": "t", "page": "/curves", "state": {"x": "depth"}})]
