"""A cancel lands inside one INLP fit: an intervene job on a paper-sized model (the default
830K-parameter LSTM, d_model 160) stops at the next INLP round, not after the whole fit
(~80 rounds, ~40 s on one loaded CPU core), and stores nothing.

The real pipeline through the job runner, on a temp SQLite DB and store. Deterministic evidence,
no wall-clock limit and no sleep: the probe fits made after the cancel flag was set (none: the
round under way finishes, the check before the next one stops the job). The job's context reads
the flag from the database at every check here (``cancel_poll_s=0``), so the check after the
flagged round sees it whatever the round's length; in production it reads it at most every
``cancel_poll_s`` (0.2 s), well inside one round at this size (~0.5 s). The time from the flag to
the job's end is printed (``-s``); benchmarks/bench_cancel.py measures it.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

import science.inlp as inlp  # INLP's rounds live there; each fits its probe with fit_design
from science.measure import FIT_SHARE
from store import jobs as J
from store.models import InterventionResult, Job, MeasureSettings
from tests.test_jobs_runner import env  # noqa: F401 - fixture
from worker import runner as runner_module
from worker.job_params import InterveneParams, TrainParams
from worker.queue import submit
from worker.runner import DBJobContext, Runner

FLAG_AT_FIT = 3  # the cancel arrives during INLP's third probe fit (its second projection round)


class FlagReadAtEveryCheck(DBJobContext):
    """The runner's job context, reading the cancel flag from the database at every check."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**kwargs, "cancel_poll_s": 0.0})


@pytest.mark.slow
def test_cancel_during_inlp_stops_at_the_next_round_and_stores_nothing(env, monkeypatch) -> None:  # noqa: F811
    settings, factory, queue = env
    monkeypatch.setattr(runner_module, "DBJobContext", FlagReadAtEveryCheck)
    runner = Runner(settings, device="cpu", name="w1", session_factory=factory, queue=queue)  # the real pipeline
    train_id = submit(factory, queue, "train", TrainParams(family="lstm", task="dyck", max_steps=1, measure=None))
    assert runner.run_one(train_id) == "succeeded"
    with factory() as s:
        run_id = s.get(Job, train_id).run_id
        n_settings = s.scalar(select(func.count()).select_from(MeasureSettings))
    job_id = submit(
        factory, queue, "intervene", InterveneParams(run_id=run_id, methods=["inlp"], layers=[0], eval_lengths=[40])
    )

    fits: list[float] = []  # when each probe fit started
    flagged: list[float] = []
    real_fit = inlp.fit_design

    def fit_then_cancel(*args, **kwargs):
        fits.append(time.monotonic())
        probe = real_fit(*args, **kwargs)
        if len(fits) == FLAG_AT_FIT:  # as the API does: the flag on the row, nothing else
            with factory() as s:
                J.request_cancel(s, job_id)
            flagged.append(time.monotonic())
        return probe

    monkeypatch.setattr(inlp, "fit_design", fit_then_cancel)
    assert runner.run_one(job_id) == "cancelled"
    ended = time.monotonic()
    assert len(fits) == FLAG_AT_FIT, f"{len(fits) - FLAG_AT_FIT} INLP round(s) ran after the cancel flag"
    with factory() as s:
        job = s.get(Job, job_id)
        assert (job.state, job.error, job.message) == ("cancelled", None, "cancelled")
        assert job.progress < FIT_SHARE and f"job {job_id} cancelled" in job.log  # stopped while fitting
        assert s.scalar(select(func.count()).select_from(InterventionResult)) == 0  # no half-written rows
        assert s.scalar(select(func.count()).select_from(MeasureSettings)) == n_settings
    print(f"\ncancel flag → job cancelled: {ended - flagged[0]:.2f} s (INLP stopped after {FLAG_AT_FIT} probe fits)")
