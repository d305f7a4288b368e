"""Read-only serving (``layerscope serve BUNDLE.zip``): every write to the API is refused.

A pure ASGI middleware: under ``/api`` only GET, HEAD and OPTIONS pass; any other method is a 405
naming why, before a route (or a token check) runs. The dashboard's own callbacks (Dash posts to
``/_dash-update-component``) are reads of the API and pass.
"""

from __future__ import annotations

import json
from typing import Any

READ_METHODS = ("GET", "HEAD", "OPTIONS")


class ReadOnlyApi:
    def __init__(self, app: Any, *, prefix: str = "/api", why: str = "this server is read-only") -> None:
        self.app = app
        self.prefix = prefix
        self.why = why

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] == "http"
            and scope.get("method", "GET").upper() not in READ_METHODS
            and (path == self.prefix or path.startswith(self.prefix + "/"))
        ):
            body = json.dumps({"detail": f"{self.why}: {scope['method']} {path} refused"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 405,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"allow", b"GET, HEAD, OPTIONS"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
