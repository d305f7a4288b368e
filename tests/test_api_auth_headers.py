"""Several Authorization headers are a 400: only the first used to be checked, so a
valid token followed by a revoked one wrote."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.api.main import create_app
from backend.core.security import create_token, revoke_token

TRAIN = {"kind": "train", "params": {"family": "lstm", "task": "parity"}}


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
@pytest.mark.parametrize("order", ["valid-first", "revoked-first", "both-valid"])
def test_two_authorization_headers_are_400(api, host, order) -> None:
    c = TestClient(
        create_app(api.settings.model_copy(update={"host": host}), api.factory, queue=api.queue, background=False)
    )
    with api.factory() as s:
        _, good = create_token(s, "alice")
        _, bad = create_token(s, "bob")
        revoke_token(s, "bob")
    pair = {"valid-first": (good, bad), "revoked-first": (bad, good), "both-valid": (good, good)}[order]
    headers = [("Authorization", f"Bearer {t}") for t in pair]
    before = api.client.get("/api/jobs").json()["total"]
    r = c.post("/api/jobs", json=TRAIN, headers=headers)
    assert r.status_code == 400
    assert "Authorization" in r.json()["detail"]
    assert c.get("/api/runs", headers=headers).status_code == 400
    assert api.client.get("/api/jobs").json()["total"] == before
    # one header still works
    assert c.post("/api/jobs", json=TRAIN, headers={"Authorization": f"Bearer {good}"}).status_code == 201
