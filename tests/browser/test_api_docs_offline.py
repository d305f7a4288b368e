"""Swagger UI at /api/docs renders with the network beyond the server cut off (its
assets come from the installed swagger-ui-py package, not a CDN)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser


def test_swagger_ui_renders_offline(server, probe) -> None:
    page = probe.page
    own = urlsplit(server.base).netloc
    off_site: list[str] = []

    def only_this_server(route) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            off_site.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(server.base + "/api/docs")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "layerscope API" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock-summary-path")  # the operations are listed
    assert page.locator(".opblock-summary-path").count() >= 10
    assert off_site == [] and probe.errors == []
