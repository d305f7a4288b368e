"""Auth (tokens beyond loopback), security headers, CORS."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.api.main import create_app
from backend.core.security import create_token, hash_token, revoke_token
from store.models import ApiToken

TRAIN = {"kind": "train", "params": {"family": "lstm", "task": "parity"}}


def client_for(api, **overrides) -> TestClient:
    settings = api.settings.model_copy(update=overrides)
    return TestClient(create_app(settings, api.factory, queue=api.queue, background=False))


def test_loopback_needs_no_token(api) -> None:
    assert api.client.post("/api/jobs", json=TRAIN).status_code == 201


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::"])
def test_beyond_loopback_every_write_needs_a_token(api, host) -> None:
    c = client_for(api, host=host)
    with api.factory() as s:
        _, token = create_token(s, "alice")
    for path, body in (
        ("/api/jobs", TRAIN),
        ("/api/views", {"title": "t", "page": "/c", "state": {}}),
        ("/api/jobs/1/cancel", None),
        ("/api/jobs/1/retry", None),
    ):
        r = c.post(path, json=body)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"] == "Bearer" and "token" in r.json()["detail"]
        r = c.post(path, json=body, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json()["detail"] == "invalid or revoked token"
    auth = {"Authorization": f"Bearer {token}"}
    r = c.post("/api/jobs", json=TRAIN, headers=auth)
    assert r.status_code == 201
    assert c.post(f"/api/jobs/{r.json()['id']}/cancel", headers=auth).status_code == 200
    # reads stay open
    assert c.get("/api/runs").status_code == 200 and c.get("/api/jobs").status_code == 200
    with api.factory() as s:
        assert revoke_token(s, "alice") == 1
    assert c.post("/api/jobs", json=TRAIN, headers=auth).status_code == 401


def test_tokens_are_stored_hashed(api) -> None:
    with api.factory() as s:
        _, token = create_token(s, "bob")
        row = s.query(ApiToken).one()
        assert row.token_hash == hash_token(token) and token not in row.token_hash and len(row.token_hash) == 64


def test_token_required_for_reads(api) -> None:
    c = client_for(api, require_token_for_reads=True)
    with api.factory() as s:
        _, token = create_token(s, "carol")
    for path in ("/api/runs", "/api/runs/1", "/api/jobs", "/api/curves", "/api/views/abc", "/api/export/runs.csv"):
        assert c.get(path).status_code == 401, path
    assert c.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert c.get("/api/health").status_code == 200  # liveness stays open


def test_security_headers(api) -> None:
    r = api.client.get("/api/runs")
    h = r.headers
    assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY"
    assert "default-src 'none'" in h["content-security-policy"]
    assert h["referrer-policy"] and h["cache-control"] == "no-store"
    docs = api.client.get("/api/docs")
    # Swagger UI's assets come from this server (swagger-ui-py), not a CDN.
    assert docs.status_code == 200 and "cdn.jsdelivr.net" not in docs.headers["content-security-policy"]
    assert api.client.get("/api/runs/999").headers["x-content-type-options"] == "nosniff"  # errors too


def test_cors_from_settings(api) -> None:
    c = client_for(api, cors_origins=["https://lab.example.org"])
    pre = c.options(
        "/api/jobs",
        headers={
            "Origin": "https://lab.example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "https://lab.example.org"
    r = c.get("/api/runs", headers={"Origin": "https://evil.example.com"})
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in api.client.get("/api/runs", headers={"Origin": "https://x.org"}).headers


def test_openapi_is_complete(api) -> None:
    spec = api.client.get("/api/openapi.json").json()
    paths = spec["paths"]
    for p in (
        "/api/health",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/probes",
        "/api/runs/{run_id}/interventions",
        "/api/runs/{run_id}/patching",
        "/api/curves",
        "/api/profiles",
        "/api/claims",
        "/api/jobs",
        "/api/jobs/{job_id}",
        "/api/jobs/{job_id}/cancel",
        "/api/jobs/{job_id}/retry",
        "/api/views",
        "/api/views/{slug}",
        "/api/export/{resource}.{fmt}",
    ):
        assert p in paths, p
        for op in paths[p].values():
            assert "200" in op["responses"] or "201" in op["responses"]
            assert op.get("summary")
    body = paths["/api/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "discriminator" in body or "oneOf" in body
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
