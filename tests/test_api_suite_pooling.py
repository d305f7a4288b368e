"""Runs of different suites are never pooled into one cell statistic (docs/SCIENCE.md#suites):
/api/curves and /api/profiles aggregate per suite (each item names its suite); /api/claims,
which reads every cell at once, answers 422 at ``suite`` naming the suites present."""

from __future__ import annotations

import pytest

from tests.conftest import seed_runs


@pytest.fixture
def mixed(api):
    """The reported mix: a 3-seed 'paper' suite and a one-seed 'smoke' run of the same cell."""
    seed_runs(api.factory, families=("transformer",), tasks=("parity",), seeds=(0, 1, 2), suite="paper")
    seed_runs(api.factory, families=("transformer",), tasks=("parity",), seeds=(0,), suite="smoke")
    return api


def test_curves_are_per_suite_never_pooled(mixed) -> None:
    pts = mixed.client.get("/api/curves", params={"task": "parity", "eval_length": 40}).json()
    assert {p["suite"] for p in pts} == {"paper", "smoke"}
    for p in pts:
        assert p["seeds"] == ([0, 1, 2] if p["suite"] == "paper" else [0])
        assert p["n"] == len(p["seeds"])
    one = mixed.client.get("/api/curves", params={"task": "parity", "eval_length": 40, "suite": "paper"}).json()
    assert one and all(p["suite"] == "paper" and p["seeds"] == [0, 1, 2] for p in one)


def test_profiles_are_per_suite_never_pooled(mixed) -> None:
    items = mixed.client.get("/api/profiles", params={"eval_length": 40}).json()
    assert sorted((p["suite"], p["seeds"]) for p in items) == [("paper", [0, 1, 2]), ("smoke", [0])]
    paper = next(p for p in items if p["suite"] == "paper")
    assert paper["metrics"]["late_concentration"]["n"] <= paper["n"] == 3
    tidy = mixed.client.get("/api/export/profiles.json", params={"eval_length": 40}).json()
    assert {r["suite"] for r in tidy} == {"paper", "smoke"}


def test_claims_refuse_mixed_suites(mixed) -> None:
    r = mixed.client.get("/api/claims")
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query", "suite"] and "'paper'" in err["msg"] and "'smoke'" in err["msg"]
    both = mixed.client.get("/api/claims", params=[("suite", "paper"), ("suite", "smoke")])
    assert both.status_code == 422
    assert mixed.client.get("/api/claims", params={"suite": "paper"}).status_code == 200
