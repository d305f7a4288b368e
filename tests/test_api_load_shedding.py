"""Load shedding: beyond LAYERSCOPE_LIMIT_CONCURRENCY heavy requests (exports,
aggregates) answer 503 with Retry-After at once, so /api/health answers while 150 exports
arrive together. A real uvicorn server in a thread, real concurrent HTTP clients.

Deterministic, no clock: every export is held inside the route (a gate) until the test lets
it go, so exactly ``limit`` of them hold a slot while the rest are shed and health is asked.
With the limit off the same load holds every thread of the server's pool and health waits
behind it — the limit is what keeps health answering: the thread pool's own count (anyio's
limiter, read when health asks it for a thread) shows every thread held, and health's answer
comes only once the gate opens. The test waits on conditions (the gate's, the server's start),
never a sleep or a read timeout; every wait has a hang guard. How fast, with the limit off and
on: benchmarks/bench_load_shedding.py (BENCHMARKS.md)."""

from __future__ import annotations

import contextvars
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import anyio.to_thread
import httpx
import pytest
import uvicorn

import backend.api.routes.export as export_route
from backend.api.main import create_app
from backend.api.middleware import is_heavy
from tests.conftest import seed_runs
from worker.queue import JobQueue

N_EXPORTS = 150
LIMIT = 4
POOL_THREADS = 40  # Starlette runs `def` routes in anyio's default thread pool: 40 threads
HANG_GUARD_S = 120.0  # a wait that runs out fails the test: a hang guard, never a timing assertion

IS_HEALTH = contextvars.ContextVar("is_health", default=False)  # set for a /api/health request's task


class MarkHealth:
    """The served app, with :data:`IS_HEALTH` set while a ``/api/health`` request runs."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        token = IS_HEALTH.set(scope["type"] == "http" and scope["path"] == "/api/health")
        try:
            await self.app(scope, receive, send)
        finally:
            IS_HEALTH.reset(token)


class ReadyServer(uvicorn.Server):
    """A uvicorn server that says when it listens (:attr:`ready`) instead of being polled."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()

    def run_until_stopped(self) -> None:
        try:
            self.run()
        finally:
            self.ready.set()  # a failed start must not leave the test waiting


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve(db_factory):
    """``serve(limit)`` → the base URL of a server with that concurrency limit."""
    settings, factory = db_factory
    seed_runs(factory, seeds=tuple(range(6)), eval_lengths=(40, 60, 80, 120), n_layers=4)
    servers = []

    def start(limit: int) -> str:
        app = create_app(
            settings.model_copy(update={"limit_concurrency": limit}),
            factory,
            queue=JobQueue.from_settings(settings),
            background=False,
        )
        port = _free_port()
        config = uvicorn.Config(MarkHealth(app), host="127.0.0.1", port=port, log_level="warning", access_log=False)
        srv = ReadyServer(config)
        thread = threading.Thread(target=srv.run_until_stopped, daemon=True)
        thread.start()
        servers.append((srv, thread))
        assert srv.ready.wait(HANG_GUARD_S) and srv.started, "the server did not start"
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in servers:
        srv.should_exit = True
        thread.join()


class Gate:
    """Exports wait inside the route until :attr:`open` is set. :attr:`inside` counts those that
    reached it, :attr:`answers` holds the responses the clients got; :meth:`until` waits for a
    state of both (threads notify a condition as they change it)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.changed = threading.Condition()
        self.inside = 0
        self.answers: list[httpx.Response] = []

    def entered(self) -> None:
        with self.changed:
            self.inside += 1
            self.changed.notify_all()

    def answered(self, response: httpx.Response) -> None:
        with self.changed:
            self.answers.append(response)
            self.changed.notify_all()

    def until(self, predicate: Callable[[], bool], what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, timeout=HANG_GUARD_S):
                pytest.fail(f"gave up waiting for {what}: {self.inside} inside, {len(self.answers)} answered")


@pytest.fixture
def gate(monkeypatch):
    """Exports wait inside the route until ``gate.open.set()``."""
    g = Gate()
    real = export_route.rows_for

    def held(*args, **kwargs):
        g.entered()
        g.open.wait(HANG_GUARD_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(export_route, "rows_for", held)
    yield g
    g.open.set()


@pytest.fixture
def health_thread(monkeypatch):
    """What the server's thread pool held when a health request first asked it for a thread:
    ``asked`` is set then, ``stats`` holds anyio's limiter statistics at that moment, and
    ``open_when_run`` whether the gate was open once that thread's work had run."""

    class Seen:
        asked = threading.Event()
        stats: list = []
        open_when_run: list[bool] = []
        gate: Gate | None = None

    real = anyio.to_thread.run_sync

    async def run_sync(func, *args, limiter=None, **kwargs):
        first = IS_HEALTH.get() and limiter is None and not Seen.asked.is_set()
        if first:  # in the event loop, just before it queues for one of the pool's threads
            Seen.stats.append(anyio.to_thread.current_default_thread_limiter().statistics())
            Seen.asked.set()
        out = await real(func, *args, limiter=limiter, **kwargs)
        if first and Seen.gate is not None:
            Seen.open_when_run.append(Seen.gate.open.is_set())
        return out

    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    return Seen


PATHS = ("/api/export/probes.csv", "/api/export/interventions.json", "/api/export/curves.csv", "/api/export/runs.csv")


def _fire(base: str, gate: Gate) -> ThreadPoolExecutor:
    start = threading.Barrier(N_EXPORTS + 1)

    def export(i: int) -> None:
        with httpx.Client(base_url=base, timeout=HANG_GUARD_S) as c:
            start.wait()
            gate.answered(c.get(PATHS[i % len(PATHS)]))

    pool = ThreadPoolExecutor(N_EXPORTS)
    for i in range(N_EXPORTS):
        pool.submit(export, i)
    start.wait()
    return pool


def test_heavy_paths() -> None:
    assert is_heavy("/api/export/probes.csv") and is_heavy("/api/curves") and is_heavy("/api/suites/t/bundle")
    assert not is_heavy("/api/health") and not is_heavy("/api/runs") and not is_heavy("/api/suites")


def test_beyond_the_limit_exports_are_shed_and_health_answers_throughout(serve, gate) -> None:
    base = serve(LIMIT)
    health_times: list[float] = []
    with httpx.Client(base_url=base, timeout=HANG_GUARD_S) as c:
        pool = _fire(base, gate)
        # exactly LIMIT exports hold a slot (held at the gate); every other one is shed at once
        gate.until(
            lambda: len(gate.answers) == N_EXPORTS - LIMIT and gate.inside == LIMIT,
            "the requests beyond the limit to be answered, the others to reach the gate",
        )
        for _ in range(10):  # while the heavy requests hold their slots
            t0 = time.perf_counter()
            assert c.get("/api/health").status_code == 200
            health_times.append(time.perf_counter() - t0)
            assert c.get("/api/runs", params={"limit": 5}).status_code == 200
        gate.open.set()
        pool.shutdown(wait=True)
        assert c.get("/api/health").status_code == 200
    codes = [r.status_code for r in gate.answers]
    assert (codes.count(200), codes.count(503), len(codes)) == (LIMIT, N_EXPORTS - LIMIT, N_EXPORTS)
    for r in gate.answers:
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) >= 1 and "busy" in r.json()["detail"]
    print(f"\nhealth while {LIMIT} exports held their slots: max {max(health_times) * 1000:.0f} ms")


def test_without_the_limit_health_waits_behind_the_exports(serve, gate, health_thread) -> None:
    """The same load with the limit far above it: nothing is shed, the exports take every thread
    of the pool, and health (a plain ``def`` route too) queues behind them until they finish."""
    base = serve(10_000)
    health_thread.gate = gate
    pool = _fire(base, gate)
    gate.until(lambda: gate.inside == POOL_THREADS, "the exports to take every thread of the pool")
    with httpx.Client(base_url=base, timeout=HANG_GUARD_S) as c, ThreadPoolExecutor(1) as asker:
        health = asker.submit(c.get, "/api/health")
        assert health_thread.asked.wait(HANG_GUARD_S), "health never asked for a thread"
        (stats,) = health_thread.stats
        # every thread of the pool held by an export waiting at the gate: health waits for one
        assert (stats.borrowed_tokens, stats.total_tokens) == (POOL_THREADS, POOL_THREADS), stats
        gate.open.set()
        assert health.result().status_code == 200
    pool.shutdown(wait=True)
    assert health_thread.open_when_run == [True]  # health's work ran only once the exports were let go
    assert gate.inside == N_EXPORTS and [r.status_code for r in gate.answers] == [200] * N_EXPORTS
    with httpx.Client(base_url=base, timeout=HANG_GUARD_S) as c:
        assert c.get("/api/health").status_code == 200


def test_the_dashboard_client_waits_out_a_shed_read() -> None:
    """A GET answered 503 + Retry-After is asked again (the dashboard shows data, not 'busy');
    a write is never repeated."""
    from dashboard import api_client
    from dashboard.api_client import ApiClient, ApiError

    calls = {"GET": 0, "POST": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls[request.method] += 1
        if calls[request.method] <= 2:
            return httpx.Response(503, json={"detail": "server busy"}, headers={"Retry-After": "1"})
        return httpx.Response(200, json={"ok": True})

    client = ApiClient("http://x", transport=httpx.MockTransport(handler))
    waits = api_client.BUSY_RETRY_WAITS
    api_client.BUSY_RETRY_WAITS = (0.0, 0.0, 0.0)
    try:
        assert client.get("/api/curves") == {"ok": True} and calls["GET"] == 3
        with pytest.raises(ApiError) as err:
            client.post("/api/jobs", {"kind": "train"})
        assert err.value.status == 503 and calls["POST"] == 1
    finally:
        api_client.BUSY_RETRY_WAITS = waits
