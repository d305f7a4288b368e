"""Submitting is idempotent: the same Idempotency-Key makes one job, however often
and however concurrently it is sent; the dashboard's form sends one key per submission and
disables Launch while a submit is in flight."""

from __future__ import annotations

import threading

from dashboard.app import create_dash
from dashboard.pages import jobs

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
