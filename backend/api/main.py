"""The app factory: ``create_app(settings=None, session_factory=None)``.

Tests hand it a throwaway DB (a session factory on a temp SQLite file or Postgres database);
``backend.app`` adds the dashboard at ``/``. On start the API re-enqueues queued jobs missing
from the queue (restarting the API loses none) and then runs the reaper periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend import __version__
from backend.api.aggregate import ResultCache
from backend.api.middleware import BodySizeLimit, SecurityHeaders
from backend.api.queries import NotFound
from backend.api.routes import aggregates, export, health, jobs, runs, suites, views
from backend.core.config import Settings, get_settings
from backend.db.jobs import JobNotFound, JobStateError
from backend.db.session import make_engine, make_sessionmaker
from worker.queue import JobQueue, reap, requeue_orphans

log = logging.getLogger(__name__)

API_PREFIX = "/api"
DOCS_URL, REDOC_URL, OPENAPI_URL = "/api/docs", "/api/redoc", "/api/openapi.json"


def _normalise_loc(err: dict[str, Any]) -> dict[str, Any]:
    """Tagged-union errors name the field, not the union tag: ("body", "train", "params", "x")
    → ("body", "params", "x"); an unknown/missing kind → ("body", "kind")."""
    loc = list(err.get("loc", ()))
    if err.get("type") in ("union_tag_invalid", "union_tag_not_found") and loc[:1] == ["body"]:
        return {**err, "loc": ("body", "kind")}
    if len(loc) >= 2 and loc[0] == "body" and loc[1] in jobs.JOB_CREATE_MODELS:
        return {**err, "loc": tuple([loc[0], *loc[2:]])}
    return err


def _errors_handler(settings: Settings):  # noqa: ANN202
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_normalise_loc(e) for e in exc.errors()]
        for e in errors:
            e.pop("url", None)
            ctx = e.get("ctx")
            if ctx:  # exceptions inside ctx are not JSON
                e["ctx"] = {k: (v if isinstance(v, (str, int, float, bool, type(None))) else str(v)) for k, v in ctx.items()}
        return JSONResponse(status_code=422, content={"detail": jsonable_encoder(errors)})

    return on_validation_error


async def _not_found(request: Request, exc: LookupError) -> JSONResponse:
    return JSONResponse(status_code=404, content={"detail": str(exc.args[0]) if exc.args else "not found"})


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette answers 405 with the methods of the first route on the path only; list them all."""
    if exc.status_code == 405:
        methods: set[str] = set()
        for route in request.app.router.routes:
            if isinstance(route, APIRoute) and route.path_regex.match(request.url.path):
                methods |= route.methods - {"HEAD"}
        return JSONResponse({"detail": "Method Not Allowed"}, status_code=405,
                            headers={"Allow": ", ".join(sorted(methods))})
    return await http_exception_handler(request, exc)


async def _conflict(request: Request, exc: JobStateError) -> JSONResponse:
    return JSONResponse(status_code=409, content={"detail": str(exc)})


def create_app(
    settings: Settings | None = None,
    session_factory: sessionmaker[Session] | None = None,
    *,
    queue: JobQueue | None = None,
    background: bool = True,
) -> FastAPI:
    """The API under ``/api``.

    Args:
        settings: default ``get_settings()`` (env vars / .env).
        session_factory: default a new engine on ``settings.resolved_db_url`` (migrated by
            the caller: ``init_db`` in ``layerscope serve``).
        queue: default the Huey queue of ``settings``.
        background: run the orphan re-enqueue at start and the periodic reaper.
    """
    settings = settings or get_settings()
    engine = None
    if session_factory is None:
        engine = make_engine(settings.resolved_db_url)
        session_factory = make_sessionmaker(engine)
    queue = queue or JobQueue.from_settings(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = None
        if background:
            # Restarting the API loses no queued job: re-enqueue the ones missing from the queue.
            await run_in_threadpool(requeue_orphans, session_factory, queue)
            task = asyncio.create_task(_reaper_loop(settings, session_factory, queue))
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if engine is not None:
                engine.dispose()

    app = FastAPI(
        title="layerscope API",
        version=__version__,
        description="Layerwise probes, interventions and activation patching of sequence models on "
        "state-tracking tasks: runs, results, server-side aggregates over seeds, jobs, saved views, export.",
        docs_url=DOCS_URL, redoc_url=REDOC_URL, openapi_url=OPENAPI_URL, lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.queue = queue
    app.state.aggregate_cache = ResultCache()

    for router in (health.router, runs.router, aggregates.router, jobs.router, views.router, export.router,
                   suites.router):
        app.include_router(router, prefix=API_PREFIX)

    app.add_exception_handler(RequestValidationError, _errors_handler(settings))
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(JobNotFound, _not_found)
    app.add_exception_handler(JobStateError, _conflict)

    # Outermost last: CORS answers preflights; security headers on everything; body limit first.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, prefix=API_PREFIX)
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors, docs_paths=(DOCS_URL, REDOC_URL))
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"], allow_credentials=False, max_age=600,
        )
    return app


async def _reaper_loop(settings: Settings, factory: sessionmaker[Session], queue: JobQueue) -> None:
    while True:
        await asyncio.sleep(settings.reap_every_seconds)
        try:
            await run_in_threadpool(reap, factory, queue, settings.stale_after_seconds)
            await run_in_threadpool(requeue_orphans, factory, queue, max(settings.stale_after_seconds, 5.0))
        except Exception:  # the reaper is a safety net; log and try again next round
            log.exception("API reaper failed")
