"""Jobs over HTTP: submit (validated), list, detail, cancel, retry; views; 413."""

from __future__ import annotations

import pytest

from tests.conftest import seed_runs

TRAIN = {"kind": "train", "params": {"family": "lstm", "task": "parity", "max_steps": 3}}


def test_submit_stores_queues_and_returns_the_job(api) -> None:
    r = api.client.post("/api/jobs", json=TRAIN)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["state"] == "queued" and job["kind"] == "train" and job["attempt"] == 0
    assert job["params"]["family"] == "lstm" and job["params"]["seed"] == 0  # defaults filled in
    assert len(job["config_hash"]) == 64 and job["max_attempts"] == api.settings.max_attempts
    assert api.queue.pending_ids() == {job["id"]}


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"kind": "train", "params": {"family": "rnn", "task": "parity"}}, ["body", "params", "family"]),
        ({"kind": "train", "params": {"task": "parity"}}, ["body", "params", "family"]),
        ({"kind": "train", "params": {"family": "lstm", "task": "parity", "lr": -1}}, ["body", "params", "lr"]),
        ({"kind": "train", "params": {"family": "lstm", "task": "parity", "bogus": 1}}, ["body", "params", "bogus"]),
        (
            {"kind": "train", "params": {"family": "lstm", "task": "parity", "measure": {"eval_lengths": []}}},
            ["body", "params", "measure", "eval_lengths"],
        ),
        ({"kind": "suite", "params": {"preset": "huge"}}, ["body", "params", "preset"]),
        ({"kind": "suite", "params": {"preset": "smoke", "parts": ["probez"]}}, ["body", "params", "parts", 0]),
        ({"kind": "suite", "params": {"preset": "smoke", "parts": []}}, ["body", "params", "parts"]),
        ({"kind": "suite", "params": {"preset": "pretrained", "families": ["lstm"]}}, ["body", "params"]),
        ({"kind": "probe", "params": {"run_id": 0}}, ["body", "params", "run_id"]),
        ({"kind": "probe", "params": {"run_id": 424242}}, ["body", "params", "run_id"]),
        ({"kind": "fly", "params": {}}, ["body", "kind"]),
        ({"params": {}}, ["body", "kind"]),
        ({"kind": "train"}, ["body", "params"]),
    ],
)
def test_bad_job_is_422_naming_the_field(api, body, loc) -> None:
    r = api.client.post("/api/jobs", json=body)
    assert r.status_code == 422, r.text
    locs = [d["loc"] for d in r.json()["detail"]]
    assert loc in locs, locs
    assert all(d["msg"] for d in r.json()["detail"])
    assert len(api.queue) == 0


def test_a_staged_suite_is_queued_with_its_parts(api) -> None:
    r = api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "parts": ["probes"]}})
    assert r.status_code == 201, r.text
    assert r.json()["params"]["parts"] == ["probes"]


def test_not_json_is_422(api) -> None:
    r = api.client.post("/api/jobs", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_oversized_body_is_413(api) -> None:
    big = dict(TRAIN, params=dict(TRAIN["params"], name="x" * (api.settings.max_body_bytes + 10)))
    r = api.client.post("/api/jobs", json=big)
    assert r.status_code == 413 and "larger than" in r.json()["detail"]

    def chunks():  # no Content-Length: the streamed size is counted
        for _ in range(api.settings.max_body_bytes // 1000 + 2):
            yield b"x" * 1000

    r = api.client.post("/api/jobs", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_probe_job_for_a_stored_run(api) -> None:
    from store.models import Run

    run_id = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,))[0]
    (api.settings.resolved_store_dir / "ckpt-1").mkdir(parents=True)  # its weights are here
    with api.factory() as s:
        s.get(Run, run_id).checkpoint_id = "ckpt-1"
        s.commit()
    for kind in ("probe", "intervene", "patch"):
        r = api.client.post("/api/jobs", json={"kind": kind, "params": {"run_id": run_id}})
        assert r.status_code == 201, r.text


def test_a_job_on_a_run_without_weights_is_422_with_the_command_that_makes_them(api) -> None:
    from store.models import Run

    run_id = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(1,), suite="paper")[0]
    with api.factory() as s:  # imported from a bundle without weights, made with --max-seconds 75
        run = s.get(Run, run_id)
        run.train_config = {**(run.train_config or {}), "max_seconds": 75.0}
        s.commit()
    for kind in ("probe", "intervene", "patch"):
        r = api.client.post("/api/jobs", json={"kind": kind, "params": {"run_id": run_id}})
        assert r.status_code == 422, r.text
        (d,) = r.json()["detail"]
        assert d["loc"] == ["body", "params", "run_id"] and "has no model weights here" in d["msg"]
        assert (
            "layerscope suite --preset paper --family lstm --task parity --seed 1 --max-seconds 75 --rebuild-weights"
            in d["msg"]
        )
    assert len(api.queue) == 0


def test_list_filters_and_pagination(api) -> None:
    c = api.client
    ids = [c.post("/api/jobs", json=TRAIN).json()["id"] for _ in range(3)]
    sid = c.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke"}}).json()["id"]
    page = c.get("/api/jobs").json()
    assert page["total"] == 4 and [j["id"] for j in page["items"]] == [sid, *reversed(ids)]
    assert c.get("/api/jobs", params={"kind": "suite"}).json()["total"] == 1
    assert c.get("/api/jobs", params={"state": "running"}).json()["total"] == 0
    page = c.get("/api/jobs", params={"limit": 2, "offset": 2}).json()
    assert [j["id"] for j in page["items"]] == [ids[1], ids[0]] and page["total"] == 4
    r = c.get("/api/jobs", params={"state": "exploded"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["query", "state"]


def test_detail_cancel_retry_and_404s(api) -> None:
    c = api.client
    job_id = c.post("/api/jobs", json=TRAIN).json()["id"]
    d = c.get(f"/api/jobs/{job_id}").json()
    assert d["log_tail"] == "" and d["children"] == {} and d["children_progress"] is None
    assert c.post(f"/api/jobs/{job_id}/retry").status_code == 409  # queued: nothing to retry
    r = c.post(f"/api/jobs/{job_id}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    r = c.post(f"/api/jobs/{job_id}/cancel")
    assert r.status_code == 409 and "already cancelled" in r.json()["detail"]
    api.queue.flush()
    r = c.post(f"/api/jobs/{job_id}/retry")
    assert r.status_code == 200 and r.json()["state"] == "queued"
    assert api.queue.pending_ids() == {job_id}
    for method, path in (("get", ""), ("post", "/cancel"), ("post", "/retry")):
        r = getattr(c, method)(f"/api/jobs/987654{path}")
        assert r.status_code == 404 and r.json() == {"detail": "job 987654 not found"}


def test_detail_shows_the_log_tail(api) -> None:
    from store.models import Job

    job_id = api.client.post("/api/jobs", json=TRAIN).json()["id"]
    with api.factory() as s:
        s.get(Job, job_id).log = "\n".join(f"line {i}" for i in range(100))
        s.commit()
    d = api.client.get(f"/api/jobs/{job_id}", params={"tail": 3}).json()
    assert d["log_tail"] == "line 97\nline 98\nline 99"


def test_views_round_trip(api) -> None:
    c = api.client
    title = "<script>alert(1)</script> & ünïcode"
    r = c.post("/api/views", json={"title": title, "page": "/curves", "state": {"task": ["parity"], "eval_length": 60}})
    assert r.status_code == 201
    slug, url = r.json()["slug"], r.json()["url"]
    assert url == f"/v/{slug}" and len(slug) == 8
    v = c.get(f"/api/views/{slug}").json()
    assert v["title"] == title and v["page"] == "/curves" and v["state"] == {"task": ["parity"], "eval_length": 60}
    r = c.get("/api/views/nothere")
    assert r.status_code == 404 and r.json() == {"detail": "view nothere not found"}
    for body, field in (
        ({"title": "", "page": "/c", "state": {}}, "title"),
        ({"title": "t" * 201, "page": "/c", "state": {}}, "title"),
        ({"title": "t", "page": "curves", "state": {}}, "page"),
        ({"title": "t", "page": "/c", "state": {"a": "\x00"}}, "state"),
        ({"page": "/c"}, "title"),
    ):
        r = c.post("/api/views", json=body)
        # the loc names the field, or a path inside it (body checks give the full path)
        assert r.status_code == 422 and ["body", field] in [d["loc"][:2] for d in r.json()["detail"]], r.text


def test_a_suite_with_runs_of_other_settings_is_422_and_queues_nothing(api) -> None:
    from worker import persist
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    made = expand_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"], max_seconds=75))
    with api.factory() as s:
        for job in made:
            persist.save_run(
                s,
                name="r",
                suite=job.suite,
                family=job.family,
                task=job.task,
                seed=job.seed,
                n_layers=job.n_layers,
                d_model=8,
                n_params=100,
                config_hash=job.run_hash(),
                train_config=job.run_config(),
                loss_curve=[],
                behaviour={},
            )
    body = {"kind": "suite", "params": {"preset": "smoke", "families": ["lstm"], "tasks": ["parity"]}}
    r = api.client.post("/api/jobs", json=body)
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    assert d["loc"] == ["body", "params"] and "stored with other settings (max_seconds 75.0 vs" in d["msg"]
    assert len(api.queue) == 0
    body["params"]["max_seconds"] = 75  # the same overrides: resumed
    assert api.client.post("/api/jobs", json=body).status_code == 201


def test_a_train_job_naming_a_suite_keeps_one_run_per_seed(api) -> None:
    from worker import persist
    from worker.job_params import TrainParams

    made = TrainParams(family="lstm", task="parity", seed=0, suite="paper", max_seconds=75)
    with api.factory() as s:
        persist.save_run(
            s,
            name="r",
            suite="paper",
            family="lstm",
            task="parity",
            seed=0,
            n_layers=made.n_layers,
            d_model=8,
            n_params=100,
            config_hash=made.run_hash(),
            train_config=made.run_config(),
            loss_curve=[],
            behaviour={},
        )
    body = {"kind": "train", "params": {"family": "lstm", "task": "parity", "seed": 0, "suite": "paper", "lr": 0.01}}
    r = api.client.post("/api/jobs", json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "params", "suite"], r.text
    assert "stored with other settings" in r.json()["detail"][0]["msg"] and len(api.queue) == 0
    body["params"]["suite"] = "paper-lr"  # its own suite
    assert api.client.post("/api/jobs", json=body).status_code == 201


def test_a_rebuild_follow_up_whose_kind_is_no_name_is_422(api) -> None:
    """Found by schemathesis: a follow-up job's ``kind`` given as an object was looked up in a dict
    of kinds and raised TypeError (a 500); it is the field's refusal now."""
    body = {"kind": "rebuild", "params": {"run_id": 1, "then": {"kind": {}, "params": {"run_id": 1}}}}
    r = api.client.post("/api/jobs", json=body)
    assert r.status_code == 422
    assert any(e["loc"][-1] == "kind" and "then" in e["loc"] for e in r.json()["detail"])
