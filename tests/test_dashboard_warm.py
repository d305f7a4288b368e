"""The start-up warm-up (dashboard/warm.py): each page's first draw, run once, leaves every
aggregate that draw asks for in the API's result cache."""

from __future__ import annotations

import httpx

from dashboard.api_client import ApiClient
from dashboard.app import create_dash
from dashboard.page_callbacks import first_draws
from dashboard.warm import warm
from tests.conftest import seed_runs


def _dashboard_on(api) -> tuple:
    def handler(request: httpx.Request) -> httpx.Response:  # the dashboard's client, answered by the app
        r = api.client.request(request.method, request.url.raw_path.decode(), headers=request.headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    # port 9 (discard): Dash's own pages, asked over the network, are refused at once and skipped
    client = ApiClient("http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    return create_dash("http://127.0.0.1:9", client=client), client, api.app.state.aggregate_cache


def test_warm_up_runs_every_first_draw_and_caches_what_they_ask(api) -> None:
    seed_runs(api.factory)
    dash_app, client, cache = _dashboard_on(api)
    draws = first_draws(dash_app)
    assert len(draws) >= 5  # the figures of /curves, /reversal, /probe-vs-causal, /patching and /claims
    out = warm(dash_app, client, timeout_s=30)
    assert out["up"] and out["draws"] == len(draws) and out["failed"] == 0
    assert cache.misses > 0  # claims, profiles and curves computed
    misses, hits = cache.misses, cache.hits
    for draw in draws:  # a first visit now: every aggregate answered from the cache
        draw()
    assert cache.misses == misses and cache.hits > hits


def test_warm_up_gives_up_when_the_server_never_answers() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = ApiClient("http://127.0.0.1:9", transport=httpx.MockTransport(refuse))
    out = warm(create_dash("http://127.0.0.1:9", client=client), client, timeout_s=0)
    assert out["up"] is False and out["draws"] == 0
