"""The API's own documentation: Swagger UI served from the installed ``swagger-ui-bundle``
package (works offline, no CDN) and an OpenAPI document that marks a token as required only
on the operations that need one under the running settings."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from backend.api.deps import token_needed
from backend.core.config import Settings


def add_swagger_ui(app: FastAPI, docs_url: str, openapi_url: str) -> None:
    """``docs_url``: Swagger UI; its script, stylesheet and icon under ``docs_url + "/assets"``."""
    assets = f"{docs_url}/assets"
    app.mount(assets, StaticFiles(directory=swagger_ui_path), name="swagger-ui-assets")

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title} — Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js", swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon-32x32.png",
        )


def security_where_needed(app: FastAPI, settings: Settings) -> None:
    """Post-process the generated document: an operation keeps its ``security`` requirement only
    when ``settings`` make it need a token: a write (POST/PUT/PATCH/DELETE) when the server
    listens beyond loopback, a read (GET) with LAYERSCOPE_REQUIRE_TOKEN_FOR_READS — the rule
    ``backend.api.deps.require_write`` / ``require_read`` enforce."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = generate()
        for operations in spec.get("paths", {}).values():
            for method, op in operations.items():
                if isinstance(op, dict) and not token_needed(method, settings):
                    op.pop("security", None)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
