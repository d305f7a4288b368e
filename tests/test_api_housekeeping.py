"""API: tags and notes on runs and suites (PATCH), search (GET /api/runs?q=), deleting a run or a
suite (DELETE, rows and checkpoint), saved views listed (with who saved them) and deleted."""

from __future__ import annotations

from sqlalchemy import func, select

from backend.core.security import create_token
from store.models import ProbeResult, Run
from tests.conftest import seed_runs


def test_tags_notes_and_search(api) -> None:
    ids = seed_runs(api.factory, families=("lstm", "gru"), tasks=("dyck",), seeds=(0,), suite="t")
    r = api.client.patch(f"/api/runs/{ids[0]}", json={"tags": ["slow lr", "keep"], "notes": "lr 3e-4 — too slow?"})
    assert r.status_code == 200 and r.json()["tags"] == ["slow lr", "keep"]
    assert api.client.get(f"/api/runs/{ids[0]}").json()["notes"] == "lr 3e-4 — too slow?"
    found = api.client.get("/api/runs", params={"q": "SLOW"}).json()
    assert [x["id"] for x in found["items"]] == [ids[0]]
    assert api.client.get("/api/runs", params={"q": "gru"}).json()["total"] == 1  # family too
    assert api.client.get("/api/runs", params={"q": "50%"}).json()["total"] == 0  # % is literal
    bad = api.client.patch(f"/api/runs/{ids[0]}", json={"tags": ["x" * 51]})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:2] == ["body", "tags"]
    assert api.client.patch("/api/runs/999", json={"notes": "x"}).status_code == 404
    r = api.client.patch("/api/suites/t", json={"tags": ["pilot"], "notes": "first pass"})
    assert r.json() == {"tags": ["pilot"], "notes": "first pass"}
    suite = next(s for s in api.client.get("/api/suites").json() if s["name"] == "t")
    assert suite["tags"] == ["pilot"] and suite["notes"] == "first pass"
    assert api.client.patch("/api/suites/nope", json={"notes": "x"}).status_code == 404


def test_delete_a_run_and_a_suite(api) -> None:
    ids = seed_runs(api.factory, families=("lstm",), tasks=("dyck",), seeds=(0, 1), suite="t")
    other = seed_runs(api.factory, families=("gru",), tasks=("dyck",), seeds=(0,), suite="u")
    ckpt = api.settings.resolved_store_dir / ("b" * 64)
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    with api.factory() as s:
        s.get(Run, ids[0]).checkpoint_id = "b" * 64
        s.commit()
    r = api.client.delete(f"/api/runs/{ids[0]}")
    assert r.status_code == 200 and r.json()["deleted"]["runs"] == 1 and r.json()["checkpoints"] == 1
    assert not ckpt.exists()
    assert api.client.get(f"/api/runs/{ids[0]}").status_code == 404
    assert api.client.delete(f"/api/runs/{ids[0]}").status_code == 404
    r = api.client.delete("/api/suites/t")
    assert r.status_code == 200 and r.json()["deleted"]["runs"] == 1
    with api.factory() as s:
        assert list(s.execute(select(Run.id)).scalars()) == other
        assert s.scalar(select(func.count()).select_from(ProbeResult).where(ProbeResult.run_id.in_(ids))) == 0


def test_views_listed_with_their_maker_and_deleted(api) -> None:
    with api.factory() as s:
        _, token = create_token(s, "alice")
    made = api.client.post(
        "/api/views",
        json={"title": "t", "page": "/curves", "state": {"task": "dyck"}},
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    anon = api.client.post("/api/views", json={"title": "u", "page": "/claims", "state": {}}).json()
    listed = api.client.get("/api/views").json()
    assert [(v["slug"], v["created_by"]) for v in listed] == [(anon["slug"], None), (made["slug"], "alice")]
    assert api.client.delete(f"/api/views/{made['slug']}").json()["created_by"] == "alice"
    assert api.client.get(f"/api/views/{made['slug']}").status_code == 404
    assert api.client.delete(f"/api/views/{made['slug']}").status_code == 404
    assert [v["slug"] for v in api.client.get("/api/views").json()] == [anon["slug"]]


def test_deletes_need_a_token_beyond_loopback(db_factory, make_settings) -> None:
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from worker.queue import JobQueue

    settings, factory = db_factory
    lab = make_settings(host="0.0.0.0")
    ids = seed_runs(factory, families=("lstm",), tasks=("dyck",), seeds=(0,), suite="t")
    with TestClient(create_app(lab, factory, queue=JobQueue.from_settings(lab), background=False)) as client:
        assert client.delete(f"/api/runs/{ids[0]}").status_code == 401
        assert client.patch(f"/api/runs/{ids[0]}", json={"notes": "x"}).status_code == 401
        assert client.delete("/api/suites/t").status_code == 401


def test_rebuild_weights_of_an_imported_run_is_a_persons_rebuild_job(api) -> None:
    """The run panel's button queues the job of `layerscope runs rebuild-weights` (checked against
    the run's record, its results kept), not a suite job that deletes them and measures again."""
    from pathlib import Path

    from backend.bundle_import import import_bundle
    from store import jobs as J
    from store.models import Job
    from worker.rebuild_check import train_params_of

    bundle = Path(__file__).resolve().parents[1] / "examples" / "paper.layerscope.zip"
    with api.factory() as s:
        import_bundle(s, bundle)
        run = s.execute(
            select(Run).where(
                Run.suite == "paper", Run.family == "lstm", Run.task == "dyck", Run.seed == 1, Run.control.is_(None)
            )
        ).scalar_one()
        assert train_params_of(run).run_hash() == run.config_hash  # the job rebuilds that very run
    r = api.client.post(f"/api/runs/{run.id}/rebuild-weights")
    assert r.status_code == 201, r.text
    with api.factory() as s:
        job = s.get(Job, r.json()["id"])
        assert job.kind == "rebuild" and job.priority == J.PERSON_PRIORITY
        assert job.params["run_id"] == run.id and job.params["as_suite"] is None and job.params["then"] is None
    then = {"kind": "intervene", "params": {"run_id": run.id, "methods": ["leace"]}}
    r = api.client.post(f"/api/runs/{run.id}/rebuild-weights", json={"then": then})
    assert r.status_code == 201, r.text
    with api.factory() as s:
        assert s.get(Job, r.json()["id"]).params["then"]["params"]["methods"] == ["leace"]
    other = {"kind": "intervene", "params": {"run_id": run.id + 1}}
    r = api.client.post(f"/api/runs/{run.id}/rebuild-weights", json={"then": other})
    assert r.status_code == 422 and "not the rebuilt run" in r.text
    # POST /api/jobs takes the kind too; an intervene on the weightless run alone is refused
    assert api.client.post("/api/jobs", json={"kind": "rebuild", "params": {"run_id": run.id}}).status_code == 201
    refused = api.client.post("/api/jobs", json={"kind": "intervene", "params": {"run_id": run.id}})
    assert refused.status_code == 422 and "has no model weights here" in refused.text
    assert api.client.post("/api/runs/99999/rebuild-weights").status_code == 404
    with api.factory() as s:
        seeded = seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), suite="t")[0]
        ckpt = api.settings.resolved_store_dir / ("c" * 64)
        ckpt.mkdir(parents=True)
        s.get(Run, seeded).checkpoint_id = "c" * 64
        s.commit()
    r = api.client.post(f"/api/runs/{seeded}/rebuild-weights")
    assert r.status_code == 409 and "has its weights" in r.json()["detail"]
