"""The API's own documentation: Swagger UI (5.x, which renders OpenAPI 3.1) served from the
static files of the installed ``swagger-ui-py`` package (works offline, no CDN) and an OpenAPI document that marks a token as required only
on the operations that need one under the running settings."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from backend.api.deps import token_needed
from store.settings import Settings


def swagger_ui_dir() -> Path:
    """The Swagger UI distribution inside the installed ``swagger_ui`` package (located, not
    imported: only its static files are used)."""
    spec = find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is missing: pip install -e . installs it")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def add_swagger_ui(app: FastAPI, docs_url: str, openapi_url: str) -> None:
    """``docs_url``: Swagger UI; its script, stylesheet and icon under ``docs_url + "/assets"``."""
    assets = f"{docs_url}/assets"
    app.mount(assets, StaticFiles(directory=swagger_ui_dir()), name="swagger-ui-assets")

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} — Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from swagger.io
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

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the schema
