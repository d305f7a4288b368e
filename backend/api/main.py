"""The app factory: ``create_app(settings=None, session_factory=None)``.

Tests hand it a throwaway DB (a session factory on a temp SQLite file or Postgres database);
``backend.app`` adds the dashboard at ``/``. On start the API re-enqueues queued jobs missing
from the queue (restarting the API loses none) and then runs the reaper periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from backend import __version__
from backend.api.across_seeds import ResultCache
from backend.api.db_errors import on_database_error
from backend.api.deps import UNAUTHORIZED, SentTokenCheck
from backend.api.docs import add_swagger_ui, security_where_needed
from backend.api.middleware import BodySizeLimit, HeavyRouteLimit, JsonBodyChecks, SecurityHeaders
from backend.api.queries import NotFound
from backend.api.routes import aggregates, export, health, jobs, meta, runs, suites, tasks, views, weights
from backend.api.routes.tasks import STREAMED_UPLOADS
from layerscope_core.json_checks import MAX_JSON_DEPTH
from layerscope_core.text import printable, readable_error
from store.jobs import JobNotFound, JobStateError
from store.session import make_engine, make_sessionmaker
from store.settings import Settings, get_settings
from worker.queue import JobQueue, reap, requeue_orphans

log = logging.getLogger(__name__)

API_PREFIX = "/api"
DOCS_URL, OPENAPI_URL = "/api/docs", "/api/openapi.json"


def _safe(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-encodable for an error body: non-finite floats and strings that are
    not valid Unicode (or hold control characters) become printable strings. Inputs reaching
    here nest at most MAX_JSON_DEPTH deep (the body checks run first); past that, cut."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return printable(value)
    if depth > MAX_JSON_DEPTH + 8:
        return "…"
    if isinstance(value, dict):
        return {printable(str(k)): _safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v, depth + 1) for v in value]
    return value


def _normalise_loc(err: dict[str, Any]) -> dict[str, Any]:
    """Tagged-union errors name the field, not the union tag: ("body", "train", "params", "x")
    → ("body", "params", "x"); an unknown/missing kind → ("body", "kind")."""
    loc = list(err.get("loc", ()))
    if err.get("type") in ("union_tag_invalid", "union_tag_not_found") and loc[:1] == ["body"]:
        return {**err, "loc": ("body", "kind")}
    if len(loc) >= 2 and loc[0] == "body" and loc[1] in jobs.JOB_CREATE_MODELS:
        return {**err, "loc": tuple([loc[0], *loc[2:]])}
    return err


def _errors_handler(settings: Settings):
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_normalise_loc(e) for e in exc.errors()]
        for e in errors:
            e.pop("url", None)
            if isinstance(e.get("msg"), str):  # for people: no "Value error, " (``type`` still says it)
                e["msg"] = readable_error(e["msg"])
            ctx = e.get("ctx")
            if ctx:  # exceptions inside ctx are not JSON
                e["ctx"] = {
                    k: (v if isinstance(v, (str, int, float, bool, type(None))) else str(v)) for k, v in ctx.items()
                }
        return JSONResponse(status_code=422, content={"detail": _safe(jsonable_encoder(errors))})

    return on_validation_error


# The handlers take ``Exception``, as Starlette's add_exception_handler types them; each is
# registered for one class (_add_error_handlers).
async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=404, content={"detail": str(exc.args[0]) if exc.args else "not found"})


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(app: FastAPI, scope: Mapping[str, Any]) -> set[str]:
    """The methods some API route answers on ``scope``'s path (Starlette's own matching, so
    included routers count too); a catch-all route (``route.catch_all``) and the dashboard
    mounted at ``/`` do not count."""
    allowed: set[str] = set()
    for route in app.router.routes:
        if getattr(getattr(route, "endpoint", None), "catch_all", False) or (
            isinstance(route, Mount) and route.path in ("", "/")
        ):
            continue
        for method in _METHODS:
            if route.matches({**scope, "method": method})[0] == Match.FULL:
                allowed.add(method)
    return allowed


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette answers 405 with the methods of the first route on the path only; list them all."""
    if not isinstance(exc, StarletteHTTPException):  # registered for it alone
        raise exc
    if exc.status_code == 405:
        methods = allowed_methods(request.app, request.scope)
        return JSONResponse(
            {"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": ", ".join(sorted(methods))}
        )
    return await http_exception_handler(request, exc)


async def _conflict(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=409, content={"detail": str(exc)})


DESCRIPTION = (
    "Layerwise probes, interventions and activation patching of sequence models on "
    "state-tracking tasks: runs, results, server-side aggregates over seeds, jobs, saved views, export.\n\n"
    f"Every JSON body is refused with a 422 naming the field when it nests deeper than {MAX_JSON_DEPTH} "
    "arrays/objects, holds a non-finite number (NaN, Infinity, 1e400), or a string that is not valid "
    "Unicode or holds control characters; a body that is not UTF-8 text is a 400; bodies over "
    "LAYERSCOPE_MAX_BODY_BYTES are a 413 on every path."
)
ROUTERS = (
    health.router,
    meta.router,
    runs.router,
    aggregates.router,
    jobs.router,
    views.router,
    export.router,
    suites.router,
    tasks.router,
    weights.router,
)  # each included under API_PREFIX


def _lifespan(
    settings: Settings, session_factory: sessionmaker[Session], queue: JobQueue, engine: Any, background: bool
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Start-up and shut-down: with ``background``, re-enqueue the queued jobs missing from the
    queue and run the reaper until shut-down; dispose of ``engine`` (the app's own, else None)."""

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

    return lifespan


def _add_error_handlers(app: FastAPI, settings: Settings) -> None:
    """422 with JSON-safe details, 405 with every allowed method, 404 for unknown ids, 409 for a
    job state that forbids the request, 503 / 507 for the database (``db_errors``)."""
    app.add_exception_handler(RequestValidationError, _errors_handler(settings))
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(JobNotFound, _not_found)
    app.add_exception_handler(JobStateError, _conflict)
    # A corrupt file, a full disk, an unreachable server: 503 / 507 saying which (db_errors).
    app.add_exception_handler(SQLAlchemyError, on_database_error)
    app.add_exception_handler(OSError, on_database_error)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Outermost last: CORS answers preflights; security headers on everything; the body limit
    (every path, the mounted dashboard too) before the heavy-route limit and the JSON body
    checks (/api)."""
    app.add_middleware(JsonBodyChecks, prefix=API_PREFIX)
    app.add_middleware(HeavyRouteLimit, limit=settings.limit_concurrency)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, streamed=STREAMED_UPLOADS)
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors, docs_paths=(DOCS_URL,))
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
            allow_credentials=False,
            max_age=600,
        )


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
    app = FastAPI(
        title="layerscope API",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url=OPENAPI_URL,
        lifespan=_lifespan(settings, session_factory, queue, engine, background),
        dependencies=[SentTokenCheck],
        responses=UNAUTHORIZED,
    )
    add_swagger_ui(app, DOCS_URL, OPENAPI_URL)
    security_where_needed(app, settings)
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.queue = queue
    app.state.aggregate_cache = ResultCache()

    from science.tasks import use_task_store

    use_task_store(settings.resolved_store_dir / "tasks")  # job params may name its file tasks
    for router in ROUTERS:
        app.include_router(router, prefix=API_PREFIX)
    _add_error_handlers(app, settings)
    _add_middleware(app, settings)
    return app


async def _reaper_loop(settings: Settings, factory: sessionmaker[Session], queue: JobQueue) -> None:
    while True:
        await asyncio.sleep(settings.reap_every_seconds)
        try:
            await run_in_threadpool(reap, factory, queue, settings.stale_after_seconds)
            await run_in_threadpool(requeue_orphans, factory, queue, max(settings.stale_after_seconds, 5.0))
        except Exception:  # the reaper is a safety net; log and try again next round
            log.exception("API reaper failed")
