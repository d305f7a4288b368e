"""Load shedding: beyond LAYERSCOPE_LIMIT_CONCURRENCY heavy requests (exports,
aggregates) answer 503 with Retry-After at once, so /api/health stays under 1 s while 150
exports arrive together. A real uvicorn server in a thread, real concurrent HTTP clients."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from backend.api.main import create_app
from backend.api.middleware import is_heavy
from tests.conftest import seed_runs
from worker.queue import JobQueue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(db_factory):
    settings, factory = db_factory
    seed_runs(factory, seeds=tuple(range(6)), eval_lengths=(40, 60, 80, 120), n_layers=4)
    app = create_app(
        settings.model_copy(update={"limit_concurrency": 4}),
        factory,
        queue=JobQueue.from_settings(settings),
        background=False,
    )
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join()


def test_heavy_paths() -> None:
    assert is_heavy("/api/export/probes.csv") and is_heavy("/api/curves") and is_heavy("/api/suites/t/bundle")
    assert not is_heavy("/api/health") and not is_heavy("/api/runs") and not is_heavy("/api/suites")


def test_health_stays_fast_during_150_concurrent_exports(server) -> None:
    paths = [
        "/api/export/probes.csv",
        "/api/export/interventions.json",
        "/api/export/curves.csv",
        "/api/profiles",
        "/api/curves",
    ]
    start = threading.Barrier(151)
    answers: list[httpx.Response] = []

    def export(i: int) -> None:
        with httpx.Client(base_url=server, timeout=120) as c:
            start.wait()
            answers.append(c.get(paths[i % len(paths)]))

    health_times: list[float] = []
    with ThreadPoolExecutor(150) as pool:
        futures = [pool.submit(export, i) for i in range(150)]
        start.wait()
        with httpx.Client(base_url=server, timeout=30) as c:
            for _ in range(10):
                t0 = time.perf_counter()
                r = c.get("/api/health")
                health_times.append(time.perf_counter() - t0)
                assert r.status_code == 200
                assert c.get("/api/runs", params={"limit": 5}).status_code == 200
        for f in futures:
            f.result()
    assert max(health_times) < 1.0, health_times
    codes = [r.status_code for r in answers]
    assert len(codes) == 150 and set(codes) <= {200, 503}, set(codes)
    assert codes.count(503) > 0 and codes.count(200) >= 4, (codes.count(200), codes.count(503))
    for r in answers:
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) >= 1 and "busy" in r.json()["detail"]


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
