"""Pure-ASGI middleware: request body limit (413, every path), JSON body checks (422),
security headers (CSP included) and the concurrency limit of heavy routes (503)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from layerscope_core.json_checks import body_errors, encoding_error

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _send_json(send: Send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once, then defers to the server's."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class BodySizeLimit:
    """413 for request bodies over ``max_bytes`` on every path under ``prefix`` (default all:
    the API and the dashboard's ``/_dash-update-component`` alike).

    A Content-Length over the limit is refused before any of the body is read; a streamed
    (chunked) body is refused as soon as it passes the limit. A body within it is buffered and
    replayed to the app."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, prefix: str = "/", streamed: dict[str, tuple[int, str]] | None = None
    ) -> None:
        self.app, self.max_bytes, self.prefix = app, max_bytes, prefix
        # paths whose route streams its body (a file upload, spooled to disk): (their own limit,
        # what it is for the 413's text); a body with a Content-Length within it is not buffered
        self.streamed = streamed or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        limit, what = self.streamed.get(scope["path"].rstrip("/"), (self.max_bytes, ""))
        detail = f"request body larger than {limit} bytes{what}"
        length = None
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await _send_json(send, 400, {"detail": "invalid Content-Length header"})
                    return
                if length > limit:
                    await _send_json(send, 413, {"detail": detail})
                    return
        # the server holds a body to its Content-Length: a streamed route's body passes unbuffered
        if scope.get("method") not in ("POST", "PUT", "PATCH") or (length is not None and what):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send_json(send, 413, {"detail": detail})
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replaying(b"".join(chunks), receive), send)


class JsonBodyChecks:
    """422 for a JSON body under ``prefix`` that nests too deep, holds a non-finite number, or
    a string that breaks the text rule (:mod:`layerscope_core.json_checks`), before any route
    parses or stores it; each error names the field (``loc``) like FastAPI's. A body that is not
    text at all (invalid UTF-8) is a 400 saying so.

    Runs inside :class:`BodySizeLimit`, so the body it buffers is bounded."""

    def __init__(self, app: ASGIApp, prefix: str = "/api") -> None:
        self.app, self.prefix = app, prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not scope["path"].startswith(self.prefix)
            or scope.get("method") not in ("POST", "PUT", "PATCH")
        ):
            await self.app(scope, receive, send)
            return
        content_type = next((v for k, v in scope.get("headers", []) if k == b"content-type"), b"")
        if content_type and b"json" not in content_type.lower():  # the framework parses JSON only
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and (why := encoding_error(body)):  # not text: no field to name, the body as a whole
            await _send_json(send, 400, {"detail": why})
            return
        errors = body_errors(body) if body else []
        if errors:
            await _send_json(send, 422, {"detail": [{**e, "loc": list(e["loc"])} for e in errors]})
            return
        await self.app(scope, _replaying(body, receive), send)


def dashboard_csp(frame_ancestors: str) -> str:
    # Dash renders its config and renderer bootstrap as inline <script>s and Plotly injects
    # inline styles; some component libraries evaluate code strings: hence 'unsafe-inline' and
    # 'unsafe-eval' for scripts. Everything else is same-origin; images may be data:/blob:
    # (Plotly's PNG/SVG download).
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            f"frame-ancestors {frame_ancestors}",
        ]
    )


API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
# Swagger UI loads its bundle from this server (swagger-ui-py) and runs an inline bootstrap script.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "font-src 'self' data:; img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)


class SecurityHeaders:
    """nosniff, referrer policy, COOP, permissions policy, and a CSP per kind of response."""

    def __init__(self, app: ASGIApp, frame_ancestors: str = "*", docs_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self.docs_paths = docs_paths
        self.dash_csp = dashboard_csp(frame_ancestors).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        is_api = path == "/api" or path.startswith("/api/")
        if path in self.docs_paths:
            csp = DOCS_CSP.encode()
        elif is_api:
            csp = API_CSP.encode()
        else:
            csp = self.dash_csp
        extra = [
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"strict-origin-when-cross-origin"),
            (b"cross-origin-opener-policy", b"same-origin"),
            (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
            (b"content-security-policy", csp),
        ]
        if is_api and path not in self.docs_paths:
            extra.append((b"x-frame-options", b"DENY"))
            extra.append((b"cache-control", b"no-store"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in extra if k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


AGGREGATE_PATHS = ("/api/curves", "/api/profiles", "/api/claims")
UPLOAD_PATHS = ("/api/tasks", "/api/tasks/upload")  # a POST here validates a file someone else made (bundles: the CLI)


def is_heavy(path: str, method: str = "GET") -> bool:
    """Exports, server-side aggregates, suite bundles and uploads (a task file): the
    routes that cost seconds or memory over a large DB or file (``/api/suites``, the list, and
    ``GET /api/tasks`` are light)."""
    return (
        path.startswith("/api/export/")
        or path in AGGREGATE_PATHS
        or (path.startswith("/api/suites/") and path.endswith("/bundle"))
        or (method == "POST" and path.rstrip("/") in UPLOAD_PATHS)
    )


class HeavyRouteLimit:
    """At most ``limit`` heavy requests (:func:`is_heavy`) in progress; more answer 503 with
    ``Retry-After`` at once, without queueing — so the thread pool, the DB and the CPU stay free
    for ``/api/health``, light reads and the dashboard (150 concurrent exports once made health
    take 28 s). Counted per process; the event loop is single-threaded, so a plain counter."""

    def __init__(self, app: ASGIApp, limit: int, retry_after: int = 2) -> None:
        self.app, self.limit, self.retry_after = app, max(1, int(limit)), retry_after
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_heavy(scope["path"], scope.get("method", "GET")):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            data = json.dumps(
                {
                    "detail": f"server busy: {self.in_flight} exports/aggregates/uploads in progress (the limit, "
                    f"LAYERSCOPE_LIMIT_CONCURRENCY / serve --limit-concurrency); retry after "
                    f"{self.retry_after} s"
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(data)).encode()),
                        (b"retry-after", str(self.retry_after).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": data})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
