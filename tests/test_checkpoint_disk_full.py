"""A full disk during a training checkpoint: the write is an OSError ENOSPC
naming the checkpoint's path (torch's zip writer said "unexpected pos 397056 vs 396988"), the
temporary file is removed and the previous checkpoint stays whole; the job is re-queued with
back-off while attempts remain, then fails naming the path. The disk is filled by a file whose
writes fail past a capacity, under the real ``atomic_file``."""

from __future__ import annotations

import errno
import os
import types
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import torch

from layerscope_core import atomic_file as atomic_module
from science import train_checkpoint as tc
from store import jobs as J
from store.models import Job, utcnow
from tests.test_jobs_runner import env, runner  # noqa: F401 - fixtures
from worker.job_params import TrainParams
from worker.queue import requeue_orphans, submit


class _Capped:
    """A file whose writes past ``room`` bytes fail as a full disk's do."""

    def __init__(self, f, room: int) -> None:
        self.f, self.room, self.written = f, room, 0

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if self.written + n > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.written += n
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


def fill_disk(monkeypatch, room: int) -> None:
    """From now on, files ``atomic_file`` writes hold at most ``room`` bytes."""

    def fdopen(fd, *a, **kw):
        return _Capped(os.fdopen(fd, *a, **kw), room)

    monkeypatch.setattr(
        atomic_module, "os", types.SimpleNamespace(fdopen=fdopen, fchmod=os.fchmod, fsync=os.fsync, replace=os.replace)
    )


def _state():
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 256)
    return model, torch.optim.AdamW(model.parameters())


def test_a_checkpoint_on_a_full_disk_names_its_path_and_leaves_the_previous_one(tmp_path, monkeypatch) -> None:
    path = tmp_path / "training" / "run.pt"
    model, opt = _state()
    tc.save(path, "id", model, opt, None, tc.LoopState(step=100))
    before = path.read_bytes()
    fill_disk(monkeypatch, room=20_000)  # less than a checkpoint (about 200 KB)
    with pytest.raises(OSError) as err:
        tc.save(path, "id", model, opt, None, tc.LoopState(step=200))
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert "writing training checkpoint" in str(err.value) and "unexpected pos" not in str(err.value)
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.pt"]  # no temporary file left
    assert path.read_bytes() == before and tc.saved_step(path) == 100


def _saving_executor(folder: Path, monkeypatch, fail_attempts: set[int]):
    """A job that writes one training checkpoint, on a full disk at the attempts named."""

    def execute(kind, params, ctx, worker_env):
        if ctx.attempt in fail_attempts:
            fill_disk(monkeypatch, room=20_000)
        else:
            monkeypatch.setattr(atomic_module, "os", os)
        model, opt = _state()
        tc.save(folder / "training" / "run.pt", "id", model, opt, None, tc.LoopState(step=100 * ctx.attempt))
        return {}

    return execute


def _job(factory, job_id) -> Job:
    with factory() as s:
        return s.get(Job, job_id)


def _naive(t: datetime) -> datetime:
    return t.replace(tzinfo=None)  # SQLite hands stored times back without their zone


def _queued_after(r, job_id: int, factory) -> tuple[Job, datetime, datetime]:
    """Run ``job_id`` (its attempt fails on the full disk); the job and the clock's reading just
    before and just after: the back-off is counted from a time between the two."""
    before = _naive(utcnow())
    assert r.run_one(job_id) == "queued"
    after = _naive(utcnow())
    return _job(factory, job_id), before, after


def test_a_full_disk_is_retried_with_back_off_then_succeeds(env, tmp_path, monkeypatch) -> None:  # noqa: F811
    settings, factory, queue = env
    settings = settings.model_copy(update=dict(retry_backoff_seconds=30.0))
    job_id = submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2))
    r = runner((settings, factory, queue), executor=_saving_executor(tmp_path, monkeypatch, {1, 2}))
    queue.flush()
    j, before, after = _queued_after(r, job_id, factory)
    path = str(tmp_path / "training" / "run.pt")
    assert (j.state, j.attempt, j.worker) == ("queued", 1, None)
    assert j.error == f"disk full: No space left on device: writing training checkpoint ({path})"
    back_off = timedelta(seconds=30)  # the first back-off, from the moment the attempt failed
    assert before + back_off <= _naive(j.enqueued_at) <= after + back_off
    assert "attempt 1 of 3" in j.log and "retrying in 30 s" in j.log
    assert requeue_orphans(factory, queue) == [] and queue.pending_ids() == set()  # not before its time
    assert list((tmp_path / "training").iterdir()) == []  # nothing partial left

    def due() -> None:  # the back-off has passed (the clock moved on)
        with factory() as s:
            s.get(Job, job_id).enqueued_at = utcnow() - timedelta(seconds=1)
            s.commit()
        assert requeue_orphans(factory, queue) == [job_id] and queue.dequeue() == job_id

    due()
    j, before, after = _queued_after(r, job_id, factory)  # attempt 2: the disk still full, waiting twice as long
    back_off = timedelta(seconds=60)
    assert j.attempt == 2 and before + back_off <= _naive(j.enqueued_at) <= after + back_off
    due()
    assert r.run_one(job_id) == "succeeded"  # attempt 3: space again
    assert _job(factory, job_id).attempt == 3 and tc.saved_step(tmp_path / "training" / "run.pt") == 300


def test_a_full_disk_on_the_last_attempt_fails_naming_the_path(env, tmp_path, monkeypatch) -> None:  # noqa: F811
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2), max_attempts=1)
    r = runner(env, executor=_saving_executor(tmp_path, monkeypatch, {1}))
    assert r.run_one(job_id) == "failed"
    j = _job(factory, job_id)
    assert j.state == "failed" and j.error == (
        f"disk full: No space left on device: writing training checkpoint ({tmp_path / 'training' / 'run.pt'}) on attempt 1 of 1"
    )
    assert list((tmp_path / "training").iterdir()) == []


def test_a_cancelled_job_is_not_retried(env, tmp_path, monkeypatch) -> None:  # noqa: F811
    settings, factory, queue = env
    job_id = submit(factory, queue, "train", TrainParams(family="lstm", task="parity", max_steps=2))
    save = _saving_executor(tmp_path, monkeypatch, {1})

    def execute(kind, params, ctx, worker_env):
        with factory() as s:
            J.request_cancel(s, job_id)
        return save(kind, params, ctx, worker_env)

    assert runner(env, executor=execute).run_one(job_id) == "cancelled"
    assert _job(factory, job_id).state == "cancelled"
