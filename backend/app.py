"""The served application: the API under ``/api`` and the Dash dashboard at ``/``.

The dashboard (``dashboard.app.create_dash``) is a Flask/WSGI app, mounted through a2wsgi; it
talks to the API over HTTP at ``settings.resolved_api_url`` like any other client.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, HTTPException, Request
from sqlalchemy.orm import Session, sessionmaker

from backend.api.main import allowed_methods
from backend.api.main import create_app as create_api
from store.settings import Settings, get_settings
from worker.queue import JobQueue

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    session_factory: sessionmaker[Session] | None = None,
    *,
    queue: JobQueue | None = None,
    background: bool = True,
    dashboard: bool = True,
) -> FastAPI:
    """API + dashboard. ``dashboard=False`` serves the API alone."""
    settings = settings or get_settings()
    app = create_api(settings, session_factory, queue=queue, background=background)
    if dashboard:
        _api_not_found(app)
        mount_dashboard(app, settings)
    return app


def _api_not_found(app: FastAPI) -> None:
    """Unknown ``/api/...`` paths answer JSON 404, and a known path with the wrong method 405
    (with ``Allow``), rather than falling through to the dashboard mounted at ``/``."""

    @app.api_route(
        "/api/{path:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        include_in_schema=False,
    )
    def _not_found(path: str, request: Request) -> None:
        if allowed_methods(app, request.scope):
            raise HTTPException(status_code=405, detail="Method Not Allowed")  # the handler adds Allow
        raise HTTPException(status_code=404, detail=f"no such endpoint: {request.method} /api/{path}")

    _not_found.catch_all = True  # type: ignore[attr-defined]  # a marker on the function, read by allowed_methods


def mount_dashboard(app: FastAPI, settings: Settings) -> None:
    from a2wsgi import WSGIMiddleware

    from dashboard.all_pages import PAGES
    from dashboard.api_client import ApiClient
    from dashboard.app import create_dash

    api_url = settings.resolved_api_url
    client = ApiClient(api_url, token=settings.dashboard_token)
    dash_app = create_dash(api_url, "/", client=client)
    app.mount("/", WSGIMiddleware(dash_app.server), name="dashboard")  # type: ignore[arg-type]  # a2wsgi's ASGI types, not Starlette's: one protocol
    app.state.dash = dash_app
    app.state.dash_client = client
    app.state.view_pages = frozenset(p.path for p in PAGES)  # a saved view must open one of them


def warm_when_up(app: FastAPI) -> None:
    """With the dashboard mounted: ``dashboard.warm`` in a background thread, which waits for the
    server to answer, then runs each page's first draw once (the API's result cache then holds
    what a first visitor asks for). Without the dashboard: nothing."""
    dash_app = getattr(app.state, "dash", None)
    if dash_app is not None:
        from dashboard.warm import warm_in_background

        warm_in_background(dash_app, app.state.dash_client)
