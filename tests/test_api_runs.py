"""Runs, results and aggregates over HTTP (TestClient on a temp SQLite DB)."""

from __future__ import annotations

import pytest

from science.stats import t_interval
from tests.conftest import seed_runs


@pytest.fixture
def seeded(api):
    api.run_ids = seed_runs(api.factory)
    return api


def test_health(api) -> None:
    r = api.client.get("/api/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["db"] == "sqlite" and body["queue"] == "sqlite" and body["version"]


def test_runs_page_filters_and_pagination(seeded) -> None:
    c = seeded.client
    page = c.get("/api/runs").json()
    assert page["total"] == 12 and len(page["items"]) == 12 and page["limit"] == 100 and page["offset"] == 0
    assert "loss_curve" not in page["items"][0] and "model_config" in page["items"][0]
    page = c.get("/api/runs", params={"task": "parity", "family": "lstm"}).json()
    assert page["total"] == 3 and {(r["task"], r["family"]) for r in page["items"]} == {("parity", "lstm")}
    page = c.get("/api/runs", params={"seed": 1}).json()
    assert page["total"] == 4 and {r["seed"] for r in page["items"]} == {1}
    page = c.get("/api/runs", params=[("task", "parity"), ("task", "dyck"), ("seed", 0)]).json()
    assert page["total"] == 4
    assert c.get("/api/runs", params={"suite": "nope"}).json()["total"] == 0
    p1 = c.get("/api/runs", params={"limit": 5, "offset": 0}).json()
    p3 = c.get("/api/runs", params={"limit": 5, "offset": 10}).json()
    assert len(p1["items"]) == 5 and len(p3["items"]) == 2 and p3["total"] == 12
    ids = [r["id"] for r in p1["items"]]
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 100000}, "limit"),
        ({"offset": -1}, "offset"),
        ({"seed": "x"}, "seed"),
        ({"seed": 2**40}, "seed"),
    ],
)
def test_runs_bad_query_is_422_naming_the_field(seeded, params, field) -> None:
    r = seeded.client.get("/api/runs", params=params)
    assert r.status_code == 422
    assert any(field in d["loc"] for d in r.json()["detail"]), r.json()


@pytest.mark.parametrize("sort", ["seed", "-seed", "name", "-name", "family", "-task", "-id", "created_at"])
def test_runs_sorted_by_a_whitelisted_column(seeded, sort) -> None:
    c = seeded.client
    key, desc = sort.lstrip("-"), sort.startswith("-")
    items = c.get("/api/runs", params={"sort": sort}).json()["items"]
    assert len(items) == 12
    # the column, then id (descending with the column) breaks ties
    expected = sorted(items, key=lambda r: (r[key], r["id"]), reverse=desc)
    assert [r["id"] for r in items] == [r["id"] for r in expected]
    assert [r["id"] for r in items] != sorted(r["id"] for r in items) or sort in ("created_at", "seed", "family")
    pages = [c.get("/api/runs", params={"sort": sort, "limit": 5, "offset": o}).json()["items"] for o in (0, 5, 10)]
    assert [r["id"] for page in pages for r in page] == [r["id"] for r in items]  # stable paging
    filtered = c.get("/api/runs", params={"sort": sort, "task": "dyck"}).json()
    assert filtered["total"] == 6 and [r["id"] for r in filtered["items"]] == [
        r["id"] for r in items if r["task"] == "dyck"
    ]


def test_runs_sort_whitelist_matches_the_query() -> None:
    from typing import get_args

    from backend.api.queries import RUN_SORT_COLUMNS
    from backend.api.query_params import RunSort

    assert set(get_args(RunSort)) == {p + c for c in RUN_SORT_COLUMNS for p in ("", "-")}


@pytest.mark.parametrize("sort", ["loss_curve", "-model_config", "--seed", "seed desc", ""])
def test_runs_unknown_sort_is_422_naming_sort(seeded, sort) -> None:
    r = seeded.client.get("/api/runs", params={"sort": sort})
    assert r.status_code == 422, r.text
    assert ["query", "sort"] in [d["loc"] for d in r.json()["detail"]]


def test_run_detail_and_404(seeded) -> None:
    c = seeded.client
    run = c.get(f"/api/runs/{seeded.run_ids[0]}").json()
    assert run["loss_curve"] == [{"step": 1, "loss": 1.0}] and run["behaviour"]["40"]["token_acc"] == 0.9
    assert run["created_at"].endswith("Z") or "+00:00" in run["created_at"]
    for path in ("", "/probes", "/interventions", "/patching"):
        r = c.get(f"/api/runs/99999{path}")
        assert r.status_code == 404 and r.json() == {"detail": "run 99999 not found"}
    r = c.get("/api/runs/abc")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "run_id"]


def test_probe_rows(seeded) -> None:
    c = seeded.client
    rows = c.get(f"/api/runs/{seeded.run_ids[0]}/probes").json()
    assert len(rows) == 2 * 3
    first = rows[0]
    assert set(first) == {
        "run_id",
        "layer",
        "layer_name",
        "depth",
        "eval_length",
        "accuracy",
        "majority_baseline",
        "per_position",
        "n_train",
        "n_test",
        "converged",
        "n_iter",
        "config_hash",
        "measurement_version",
        "balanced_accuracy",
        "control_accuracy",
        "selectivity",
        "type_accuracy",
        "site_name",
    }
    assert [(r["layer"], r["layer_name"], r["depth"]) for r in rows[:3]] == [
        (-1, "emb", 0.0),
        (0, "0", 0.5),
        (1, "1", 1.0),
    ]
    rows = c.get(f"/api/runs/{seeded.run_ids[0]}/probes", params={"eval_length": 60}).json()
    assert {r["eval_length"] for r in rows} == {60} and len(rows) == 3


def test_intervention_and_patching_rows(seeded) -> None:
    c = seeded.client
    rid = seeded.run_ids[0]
    rows = c.get(f"/api/runs/{rid}/interventions").json()
    assert len(rows) == 2 * 2 * 2 and {"layer_name", "refit_acc", "p_holm", "significant"} <= set(rows[0])
    rows = c.get(f"/api/runs/{rid}/interventions", params={"method": "mean", "eval_length": 40}).json()
    assert len(rows) == 2 and {r["method"] for r in rows} == {"mean"}
    rows = c.get(f"/api/runs/{rid}/patching").json()
    assert len(rows) == 3 * 2 and rows[0]["layer_name"] == "emb"
    assert c.get(f"/api/runs/{rid}/patching", params={"eval_length": 60}).json() == []


def test_curves_aggregate_over_seeds(seeded) -> None:
    c = seeded.client
    pts = c.get("/api/curves", params={"task": "parity", "family": "lstm", "eval_length": 40}).json()
    assert [p["layer"] for p in pts] == [-1, 0, 1]
    p = pts[2]
    assert p["n"] == 3 and p["seeds"] == [0, 1, 2] and p["n_layers"] == 2 and p["layer_name"] == "1"
    from tests.lab.fake_pipeline import probe_rows

    accs = [probe_rows(2, [40], s, "lstm", "")[2]["accuracy"] for s in (0, 1, 2)]
    mean, lo, hi = t_interval(accs, bounds=(0.0, 1.0))  # an accuracy's interval is clipped to [0, 1]
    assert hi <= 1.0
    assert p["mean"] == pytest.approx(mean) and p["lo"] == pytest.approx(lo) and p["hi"] == pytest.approx(hi)
    assert p["majority_baseline"] == pytest.approx(0.5)
    every = c.get("/api/curves").json()
    assert len(every) == 2 * 2 * 2 * 3  # tasks × families × lengths × layers
    one_seed = seed_runs(seeded.factory, families=("gru",), tasks=("s3",), seeds=(7,), suite="solo")
    assert one_seed
    pts = c.get("/api/curves", params={"task": "s3"}).json()
    assert pts and all(p["n"] == 1 and p["lo"] is None and p["hi"] is None for p in pts)
