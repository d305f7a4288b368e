"""Submitting is idempotent: the same Idempotency-Key makes one job, however often
and however concurrently it is sent; the dashboard's form sends one key per submission and
disables Launch while a submit is in flight."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from dashboard.app import create_dash
from dashboard.pages import jobs
from store.models import Job

TRAIN = {"kind": "train", "params": {"family": "lstm", "task": "parity", "max_steps": 3}}


def _total(api) -> int:
    return api.client.get("/api/jobs").json()["total"]


def test_same_key_makes_one_job(api) -> None:
    h = {"Idempotency-Key": "0123456789abcdef0123456789abcdef"}
    first = api.client.post("/api/jobs", json=TRAIN, headers=h)
    again = api.client.post("/api/jobs", json=TRAIN, headers=h)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert _total(api) == 1 and len(api.queue.pending_ids()) == 1
    other = api.client.post("/api/jobs", json=TRAIN, headers={"Idempotency-Key": "another"})
    assert other.status_code == 201 and _total(api) == 2
    assert api.client.post("/api/jobs", json=TRAIN).status_code == 201  # no key: a new job each time
    assert _total(api) == 3


@pytest.mark.parametrize("keys", [("k-1", "k-2"), ("k-1", "k-1"), ("k-1", "k-2", "k-3")])
def test_several_keys_are_400_like_several_authorization_headers(api, keys) -> None:
    """Several Idempotency-Key headers silently used the first: which one a proxy or a framework
    reads differs, so none is trusted (as with Authorization, backend.api.deps.one_header)."""
    r = api.client.post("/api/jobs", json=TRAIN, headers=[("Idempotency-Key", k) for k in keys])
    assert r.status_code == 400 and r.json()["detail"] == f"{len(keys)} Idempotency-Key headers: send exactly one"
    assert _total(api) == 0 and not api.queue.pending_ids()
    lower = [("Idempotency-Key", keys[0]), ("idempotency-key", keys[-1])]  # header names have no case
    assert api.client.post("/api/jobs", json=TRAIN, headers=lower).status_code == 400
    assert api.client.post("/api/jobs", json=TRAIN, headers={"Idempotency-Key": keys[0]}).status_code == 201


def test_concurrent_double_click_makes_one_job(api) -> None:
    h = {"Idempotency-Key": "feedfacefeedfacefeedfacefeedface"}
    answers = []
    go = threading.Barrier(4)

    def click() -> None:
        go.wait()
        answers.append(api.client.post("/api/jobs", json=TRAIN, headers=h))

    threads = [threading.Thread(target=click) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers) in ([200, 200, 200, 201],), [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert _total(api) == 1


def test_key_reused_for_another_kind_is_422(api) -> None:
    h = {"Idempotency-Key": "k1"}
    assert api.client.post("/api/jobs", json=TRAIN, headers=h).status_code == 201
    r = api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke"}}, headers=h)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]


def test_bad_key_is_422(api) -> None:
    r = api.client.post("/api/jobs", json=TRAIN, headers={"Idempotency-Key": "x" * 201})
    assert r.status_code == 422 and _total(api) == 0


def test_launch_sends_one_key_and_is_disabled_in_flight() -> None:
    app = create_dash("http://127.0.0.1:9")
    key = next(k for k in app.callback_map if "jb-result.children" in k)
    cb = app.callback_map[key]
    assert {"id": "jb-key", "property": "data"} in cb["state"]
    running = next(c for c in app._callback_list if c["output"] == key).get("running")
    assert running == {"running": {"jb-submit.disabled": True}, "runningOff": {"jb-submit.disabled": False}}
    assert jobs.is_key("0123456789abcdef0123456789abcdef") and not jobs.is_key(5) and not jobs.is_key("x")


def _jobs_rows(api) -> list[tuple]:
    with api.factory() as s:
        return list(s.execute(select(Job.id, Job.kind, Job.params, Job.idempotency_key)).all())


def test_same_key_same_request_answers_the_job_even_spelled_otherwise(api) -> None:
    """The request is compared as its validated params: a default written out is the same request."""
    h = {"Idempotency-Key": "same-body"}
    first = api.client.post("/api/jobs", json=TRAIN, headers=h)
    spelled = {**TRAIN, "params": {"seed": 0, **TRAIN["params"]}, "max_attempts": api.settings.max_attempts}
    again = api.client.post("/api/jobs", json=spelled, headers=h)
    assert first.status_code == 201 and again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert len(_jobs_rows(api)) == 1 and len(api.queue.pending_ids()) == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"params": {**TRAIN["params"], "max_steps": 4}}, "params.max_steps"),
        ({"params": {**TRAIN["params"], "seed": 1, "suite": "other"}}, "params.seed, params.suite"),
        ({"max_attempts": 7}, "max_attempts"),
        ({"kind": "suite", "params": {"preset": "smoke"}}, "kind (a train job)"),
    ],
)
def test_same_key_other_request_is_422_at_the_header_and_makes_nothing(api, change, named) -> None:
    """draft-ietf-httpapi-idempotency-key-header: a key reused with a different payload is a 422
    (it silently answered the first job, made with other params)."""
    h = {"Idempotency-Key": "0f8fad5b-d9cb-469f-a165-70867728950e"}
    first = api.client.post("/api/jobs", json=TRAIN, headers=h)
    before = _jobs_rows(api)
    r = api.client.post("/api/jobs", json={**TRAIN, **change}, headers=h)
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert error["loc"] == ["header", "Idempotency-Key"], error
    assert f"already used for job {first.json()['id']}" in error["msg"] and named in error["msg"], error["msg"]
    assert _jobs_rows(api) == before and len(api.queue.pending_ids()) == 1  # no new row, nothing queued


def test_a_job_stored_before_a_parameter_existed_still_answers_its_key(api) -> None:
    """Rows carry no separate fingerprint: the stored params are compared, read with today's
    defaults when they lack a field added since (as a row stored by an older version does)."""
    h = {"Idempotency-Key": "older-row"}
    first = api.client.post("/api/jobs", json=TRAIN, headers=h).json()
    with api.factory() as s:
        job = s.get(Job, first["id"])
        job.params = {k: v for k, v in job.params.items() if k != "start_token"}  # as stored before it existed
        s.commit()
    again = api.client.post("/api/jobs", json=TRAIN, headers=h)
    assert again.status_code == 200 and again.json()["id"] == first["id"] and len(_jobs_rows(api)) == 1
    other = api.client.post("/api/jobs", json={**TRAIN, "params": {**TRAIN["params"], "start_token": False}}, headers=h)
    assert other.status_code == 422 and "params.start_token" in other.json()["detail"][0]["msg"]
