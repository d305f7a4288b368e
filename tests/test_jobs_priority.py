"""Jobs a person launches (POST /api/jobs) are taken before the queued jobs of a background suite
(the demo's), on the SQLite queue and on Redis: a priority read from the job's row, kept by a
suite's children, re-queues and retries. The queue carries wake-ups only: one whose row is no
longer queued is dropped."""

from __future__ import annotations

import pytest

from store import jobs as J
from store.models import Job
from worker.job_params import ProbeParams, SuiteParams, TrainParams
from worker.queue import JobQueue, fan_out_suite, make_huey, requeue_orphans, submit
from worker.runner import Runner


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


@pytest.fixture(params=["sqlite", "redis"])
def backend(request, db_factory):
    """(settings, session factory, an empty queue) on the SQLite queue or a real Redis."""
    settings, factory = db_factory
    if request.param == "redis":
        url, name = request.getfixturevalue("redis_url"), request.getfixturevalue("queue_name")
        settings = settings.model_copy(update=dict(queue_url=url, queue_name=name))
    queue = JobQueue(make_huey(settings.resolved_queue_url, settings.queue_name))
    queue.flush()
    return settings, factory, queue


def _consumer(backend, on_job=None) -> tuple[Runner, list[int]]:
    """A worker whose executor records the ids it runs, in order (``on_job(job_id)`` first)."""
    settings, factory, queue = backend
    ran: list[int] = []

    def execute(kind, params, ctx, env) -> dict:
        ran.append(ctx.job_id)
        if on_job is not None:
            on_job(ctx.job_id)
        return {}

    return Runner(settings, device="cpu", name="w", executor=execute, session_factory=factory, queue=queue), ran


def test_a_stopped_consumer_takes_the_persons_job_first(backend) -> None:
    _settings, factory, queue = backend
    bg = submit(factory, queue, "train", _train(0))
    mine = submit(factory, queue, "train", _train(1), priority=J.PERSON_PRIORITY)
    worker, ran = _consumer(backend)
    assert worker.run_forever(max_jobs=2) == 2
    assert ran == [mine, bg]


def test_a_busy_consumer_takes_the_persons_job_queued_behind_a_background_one_first(backend) -> None:
    """Both are queued while the worker runs a job (from inside it: no thread, no wait)."""
    _settings, factory, queue = backend
    first = submit(factory, queue, "train", _train(0))
    queued: dict[str, int] = {}

    def queue_both(job_id: int) -> None:
        if job_id == first:
            queued["bg"] = submit(factory, queue, "train", _train(1))
            queued["mine"] = submit(factory, queue, "train", _train(2), priority=J.PERSON_PRIORITY)

    worker, ran = _consumer(backend, on_job=queue_both)
    assert worker.run_forever(max_jobs=3) == 3
    assert ran == [first, queued["mine"], queued["bg"]]


def test_a_wake_up_whose_job_is_no_longer_queued_is_dropped(backend) -> None:
    _settings, factory, queue = backend
    cancelled = submit(factory, queue, "train", _train(0), priority=J.PERSON_PRIORITY)
    bg = submit(factory, queue, "train", _train(1))
    with factory() as s:
        J.request_cancel(s, cancelled)
    worker, ran = _consumer(backend)
    assert worker.run_forever(max_jobs=1) == 1
    assert ran == [bg] and len(queue) == 0
    with factory() as s:
        assert (s.get(Job, cancelled).state, s.get(Job, cancelled).attempt) == (J.CANCELLED, 0)


def test_an_older_fifo_list_on_redis_is_replaced_from_the_table(db_factory, redis_url, queue_name) -> None:
    """A Redis queue left by a version without priorities there (a list at the same key): the
    first pass of the reaper drops it and sends every queued job again, by priority."""
    import redis

    _settings, factory = db_factory
    queue = JobQueue(make_huey(redis_url, queue_name))
    bg = submit(factory, queue, "train", _train(0))
    mine = submit(factory, queue, "train", _train(1), priority=J.PERSON_PRIORITY)
    key = queue.huey.storage.queue_key
    conn = redis.Redis.from_url(redis_url)
    conn.delete(key)
    conn.lpush(key, b"an older version's message")
    assert requeue_orphans(factory, queue) == [bg, mine]
    assert conn.type(key) == b"zset"
    assert [queue.dequeue(), queue.dequeue(), queue.dequeue()] == [mine, bg, None]
