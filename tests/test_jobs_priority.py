"""Jobs a person launches (POST /api/jobs) are taken before the queued jobs of a background suite
(the demo's): a priority on the SQLite queue, kept by a suite's children, re-queues and retries."""

from __future__ import annotations

from store import jobs as J
from store.models import Job
from worker.params import ProbeParams, SuiteParams, TrainParams
from worker.queue import fan_out_suite, requeue_orphans, submit


def _train(seed: int) -> TrainParams:
    return TrainParams(family="lstm", task="parity", seed=seed, max_steps=2, suite="bg")


def test_a_persons_job_overtakes_a_background_suites_queue(api) -> None:
    background = [submit(api.factory, api.queue, "train", _train(s)) for s in range(3)]  # the demo's suite
    r = api.client.post(
        "/api/jobs", json={"kind": "train", "params": {"family": "gru", "task": "dyck", "max_steps": 2}}
    )
    assert r.status_code == 201
    mine = r.json()["id"]
    with api.factory() as s:
        assert s.get(Job, mine).priority == J.PERSON_PRIORITY and s.get(Job, background[0]).priority == 0
    order = [api.queue.dequeue() for _ in range(4)]
    assert order == [mine, *background]  # then first in, first out among equals


def test_a_persons_suite_passes_its_priority_to_its_runs_and_requeues_keep_it(api) -> None:
    r = api.client.post(
        "/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "families": ["gru"], "tasks": ["parity"]}}
    )
    suite_id = r.json()["id"]
    assert api.queue.dequeue() == suite_id
    with api.factory() as s:
        J.claim(s, suite_id, "w")
    bg = submit(api.factory, api.queue, "probe", ProbeParams(run_id=1))
    children = fan_out_suite(api.factory, api.queue, suite_id, [_train(0)], "w", 1, 3)
    with api.factory() as s:
        assert [s.get(Job, c).priority for c in children] == [J.PERSON_PRIORITY]
    assert [api.queue.dequeue(), api.queue.dequeue()] == [children[0], bg]
    api.queue.flush()  # the messages are lost: the table puts them back, priority included
    requeue_orphans(api.factory, api.queue)
    assert [api.queue.dequeue(), api.queue.dequeue()] == [children[0], bg]


def test_suite_params_of_the_demo_stay_background(api) -> None:
    job_id = submit(api.factory, api.queue, "suite", SuiteParams(preset="smoke"))
    with api.factory() as s:
        assert s.get(Job, job_id).priority == 0
