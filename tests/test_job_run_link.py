"""A job names its run as soon as the run row exists (the job list showed run "-" for a job
already measuring a listed run): a fresh training, and a stored run measured only."""

from __future__ import annotations

import pytest

from science.context import SilentContext
from worker.job_params import MeasureParams, TrainParams

TINY = dict(
    family="gru",
    task="parity",
    d_model=8,
    n_layers=2,
    max_steps=3,
    batch_size=8,
    eval_every=3,
    n_eval_sequences=16,
    train_length=12,
    curriculum_start=None,
)
PROBES = MeasureParams(eval_lengths=[12], n_probe_sequences=24)


class Attached(SilentContext):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []

    def attach_run(self, run_id: int) -> None:
        self.runs.append(run_id)


@pytest.fixture
def env(tmp_path):
    from worker.pipeline import local_env

    return local_env(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "store", device="cpu")


def test_a_new_run_and_a_stored_run_measured_only_are_both_attached(env) -> None:
    from worker.pipeline import train

    fresh = Attached()
    run_id = train(TrainParams(**TINY, measure=None), env, fresh)
    assert fresh.runs == [run_id]

    measuring = Attached()
    again = TrainParams(**TINY, measure=PROBES, parts=["probes"])
    assert train(again, env, measuring) == run_id  # trained before: measured only
    assert measuring.runs == [run_id]
