"""Warm the server at start-up: a first visitor pays no cold aggregate.

A page's first figure asks the API for an aggregate over the suite (``/api/claims``,
``/api/profiles``, ``/api/curves``) that costs seconds cold and milliseconds from the API's result
cache (``backend.api.across_seeds.ResultCache``, keyed by the request's filters and a fingerprint of
the result tables, so an entry warmed here is dropped as soon as results change). :func:`warm`
runs what each page computes on a first visit with no query string
(``dashboard.page_callbacks.first_draws``: the same functions, so the same requests and cache
keys), and asks for the dashboard's own first pages once (Dash builds its index on its first
request). ``layerscope serve`` runs it in a thread once the server answers.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import httpx
from dash import Dash

from dashboard.api_client import ApiClient, ApiError
from dashboard.page_callbacks import first_draws

log = logging.getLogger(__name__)

# Dash's index, layout and callback list: each built on its first request
DASH_PATHS = ("/", "/_dash-layout", "/_dash-dependencies")


def wait_until_up(api: ApiClient, timeout_s: float, poll_s: float = 0.25) -> bool:
    """True once ``api.health()`` answers; False after ``timeout_s`` seconds without."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            api.health()
            return True
        except (ApiError, httpx.HTTPError, OSError):
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


def warm(app: Dash, api: ApiClient, *, timeout_s: float = 120.0) -> dict[str, Any]:
    """Wait for the server (at most ``timeout_s``), then ask for Dash's first pages and run every
    page's first draw once. ``api``: the client the dashboard ``app`` was made with. A draw that
    fails is logged and skipped: warming is an optimisation.

    Returns:
        ``{up: bool, draws: N run, failed: N failed, seconds: wall time}``.
    """
    t0 = time.perf_counter()
    if not wait_until_up(api, timeout_s):
        log.warning("warm-up skipped: the server did not answer within %.0f s", timeout_s)
        return {"up": False, "draws": 0, "failed": 0, "seconds": time.perf_counter() - t0}
    root = api.base_url + app.config.requests_pathname_prefix.rstrip("/")  # served beside the API
    for path in DASH_PATHS:
        try:
            httpx.get(root + path, timeout=60)
        except httpx.HTTPError as exc:
            log.warning("warm-up: GET %s failed: %s", path, exc)
    draws = first_draws(app)
    failed = 0
    for draw in draws:
        try:
            draw()
        except Exception:  # a page that cannot draw now draws on its first visit, as before
            failed += 1
            log.warning("warm-up: a first draw failed", exc_info=True)
    out = {"up": True, "draws": len(draws), "failed": failed, "seconds": time.perf_counter() - t0}
    log.info("warm-up: %d first draws (%d failed) in %.1f s", out["draws"], failed, out["seconds"])
    return out


def warm_in_background(app: Dash, api: ApiClient, *, timeout_s: float = 120.0) -> threading.Thread:
    """:func:`warm` in a daemon thread (started; returned)."""
    thread = threading.Thread(
        target=warm, args=(app, api), kwargs={"timeout_s": timeout_s}, name="layerscope-warm", daemon=True
    )
    thread.start()
    return thread
