"""Load shedding: beyond LAYERSCOPE_LIMIT_CONCURRENCY heavy requests (exports,
aggregates) answer 503 with Retry-After at once, so /api/health answers while 150 exports
arrive together. A real uvicorn server in a thread, real concurrent HTTP clients.

Deterministic, no clock: every export is held inside the route (a gate) until the test lets
it go, so exactly ``limit`` of them hold a slot while the rest are shed and health is asked.
With the limit off the same load holds every thread of the server's pool and health waits
behind it — the limit is what keeps health answering. How fast, with the limit off and on:
benchmarks/bench_load_shedding.py (BENCHMARKS.md)."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

import backend.api.routes.export as export_route
from backend.api.main import create_app
from backend.api.middleware import is_heavy
from tests.conftest import seed_runs
from tests.lab.conftest import wait_for
from worker.queue import JobQueue

N_EXPORTS = 150
LIMIT = 4
POOL_THREADS = 40  # Starlette runs `def` routes in anyio's default thread pool: 40 threads


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
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        servers.append((srv, thread))
        while not srv.started:
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in servers:
        srv.should_exit = True
        thread.join()


@pytest.fixture
def gate(monkeypatch):
    """Exports wait inside the route until ``gate.open.set()``; ``gate.inside`` counts them."""

    class Gate:
        open = threading.Event()
        inside = 0
        lock = threading.Lock()

    real = export_route.rows_for

    def held(*args, **kwargs):
        with Gate.lock:
            Gate.inside += 1
        Gate.open.wait(120)  # a hang guard only
        return real(*args, **kwargs)

    monkeypatch.setattr(export_route, "rows_for", held)
    yield Gate
    Gate.open.set()


PATHS = ("/api/export/probes.csv", "/api/export/interventions.json", "/api/export/curves.csv", "/api/export/runs.csv")


def _fire(base: str, answers: list[httpx.Response]) -> ThreadPoolExecutor:
    start = threading.Barrier(N_EXPORTS + 1)

    def export(i: int) -> None:
        with httpx.Client(base_url=base, timeout=120) as c:
            start.wait()
            answers.append(c.get(PATHS[i % len(PATHS)]))

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
    answers: list[httpx.Response] = []
    health_times: list[float] = []
    with httpx.Client(base_url=base, timeout=60) as c:
        pool = _fire(base, answers)
        # exactly LIMIT exports hold a slot (held at the gate); every other one is shed at once
        wait_for(
            lambda: len(answers) == N_EXPORTS - LIMIT and gate.inside == LIMIT,
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
    codes = [r.status_code for r in answers]
    assert (codes.count(200), codes.count(503), len(codes)) == (LIMIT, N_EXPORTS - LIMIT, N_EXPORTS)
    for r in answers:
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) >= 1 and "busy" in r.json()["detail"]
    print(f"\nhealth while {LIMIT} exports held their slots: max {max(health_times) * 1000:.0f} ms")


def test_without_the_limit_health_waits_behind_the_exports(serve, gate) -> None:
    """The same load with the limit far above it: nothing is shed, the exports take every thread
    of the pool, and health (a plain ``def`` route too) queues behind them until they finish."""
    base = serve(10_000)
    answers: list[httpx.Response] = []
    pool = _fire(base, answers)
    wait_for(lambda: gate.inside == POOL_THREADS, "the exports to take every thread of the pool")
    with httpx.Client(base_url=base, timeout=httpx.Timeout(60, read=2)) as c, pytest.raises(httpx.ReadTimeout):
        c.get("/api/health")  # waits for a thread the held exports keep
    gate.open.set()
    pool.shutdown(wait=True)
    assert gate.inside == N_EXPORTS and [r.status_code for r in answers] == [200] * N_EXPORTS
    with httpx.Client(base_url=base, timeout=60) as c:
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
