"""Resumable, idempotent suites: stored runs are skipped, an interrupted suite finishes the rest,
a trained-but-unmeasured run is measured without training again, --force re-runs."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

import worker.pipeline as pipeline
from backend.cli import main
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite

SMALL = dict(preset="smoke", families=["lstm", "gru"], tasks=["parity"])


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")


@pytest.fixture
def count_training(monkeypatch):
    calls: list[int] = []
    real = pipeline.train_model

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "train_model", counted)
    return calls


def _runs(env) -> list[tuple[int, str, int]]:
    with env.session_factory() as s:
        return [(r.id, r.status, r.steps) for r in s.execute(select(Run).order_by(Run.id)).scalars()]


def test_second_run_of_a_suite_trains_nothing(env, count_training):
    first = run_suite(SuiteParams(**SMALL), env)
    assert len(count_training) == 2
    before = _runs(env)
    second = run_suite(SuiteParams(**SMALL), env)
    assert second == first and len(count_training) == 2
    assert _runs(env) == before


def test_interrupted_suite_resumes_where_it_stopped(env, monkeypatch):
    real = pipeline.train_model
    calls: list[str] = []

    def dies_on_second(*args, **kw):
        calls.append("x")
        if len(calls) == 2:
            raise KeyboardInterrupt  # the worker killed mid-suite
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "train_model", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        run_suite(SuiteParams(**SMALL), env)
    assert len(_runs(env)) == 1
    ids = run_suite(SuiteParams(**SMALL), env)
    assert len(calls) == 3  # only the missing run was trained
    assert len(set(ids)) == 2 and all(status == "complete" for _, status, _ in _runs(env))


def test_trained_but_unmeasured_run_is_measured_not_retrained(env, count_training):
    (run_id,) = run_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"]), env)
    with env.session_factory() as s:  # as if the worker died between training and measuring
        s.query(ProbeResult).delete()
        s.query(Run).update({"status": "trained"})
        s.commit()
    assert run_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"]), env) == [run_id]
    assert len(count_training) == 1
    with env.session_factory() as s:
        assert s.get(Run, run_id).status == "complete"
        assert s.scalar(select(func.count()).select_from(ProbeResult)) > 0


def test_retrained_run_keeps_no_result_of_the_model_it_replaces(env, monkeypatch):
    one = dict(preset="smoke", families=["lstm"], tasks=["parity"])
    (run_id,) = run_suite(SuiteParams(**one), env)
    with env.session_factory() as s:  # imported without weights: the next suite trains it again
        s.query(Run).update({"checkpoint_id": None, "status": "trained"})
        s.commit()
        assert s.scalar(select(func.count()).select_from(ProbeResult)) > 0
        first_stored = s.get(Run, run_id).created_at

    def killed(*args, **kw):
        raise KeyboardInterrupt  # the worker dies after training, before any measurement

    monkeypatch.setattr(pipeline, "run_measurements", killed)
    with pytest.raises(KeyboardInterrupt):
        run_suite(SuiteParams(**one), env)
    with env.session_factory() as s:
        assert s.get(Run, run_id).checkpoint_id is not None  # the new model is stored under the same run
        assert s.get(Run, run_id).created_at > first_stored  # ... and dated when it was made
        for table in (ProbeResult, InterventionResult, PatchingResult):
            assert s.scalar(select(func.count()).select_from(table).where(table.run_id == run_id)) == 0, table


def test_force_trains_again_without_doubling_rows(env, count_training):
    ids = run_suite(SuiteParams(**SMALL), env)
    again = run_suite(SuiteParams(**SMALL, force=True), env)
    assert again == ids and len(count_training) == 4
    assert len(_runs(env)) == 2


def test_cli_suite_resumes_by_default_and_force_reruns(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    from store.settings import get_settings

    get_settings.cache_clear()
    args = ["suite", "--preset", "smoke", "--family", "lstm", "--task", "parity", "--device", "cpu"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    assert "1 already stored, skipped" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert "already stored" not in capsys.readouterr().err
    get_settings.cache_clear()


def test_submitted_suite_skips_runs_already_stored(db_factory, count_training):
    from store.models import Job
    from worker.queue import JobQueue, submit
    from worker.runner import Runner

    settings, factory = db_factory
    queue = JobQueue.from_settings(settings)
    queue.flush()
    worker = Runner(settings, device="cpu", name="w1", session_factory=factory, queue=queue)  # the real pipeline

    def run_all() -> None:
        while (job_id := queue.dequeue()) is not None:
            assert worker.run_one(job_id) == "succeeded"

    params = SuiteParams(**SMALL)
    submit(factory, queue, "suite", params)
    run_all()
    assert len(count_training) == 2
    submit(factory, queue, "suite", params)  # the same suite again: its train jobs find their runs stored
    run_all()
    assert len(count_training) == 2
    with factory() as s:
        train_jobs = list(s.execute(select(Job).where(Job.kind == "train")).scalars())
        assert len(train_jobs) == 4 and {j.state for j in train_jobs} == {"succeeded"}
        assert s.scalar(select(func.count()).select_from(Run)) == 2


def test_cli_suite_on_a_corrupt_training_checkpoint_names_the_file_and_force(tmp_path, monkeypatch):
    """A training checkpoint truncated by a kill -9 (``<store>/training/<hash>.pt``): one line
    naming the file and --force, the same on a retry; --force then trains afresh."""
    from store.settings import get_settings
    from tests.cli_one_line import assert_one_line_error, run_cli
    from worker.presets import expand_suite

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("LAYERSCOPE_DEBUG", raising=False)
    get_settings.cache_clear()
    (job,) = expand_suite(
        SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"], seeds=[0], max_steps=2, controls=False)
    )
    ckpt = tmp_path / "store" / "training" / f"{job.run_hash()}.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"PK\x03\x04 cut short by a kill -9")
    args = ["suite", "--preset", "smoke", "--family", "lstm", "--task", "parity", "--seed", "0"]
    args += ["--max-steps", "2", "--no-controls", "--device", "cpu", "--name", "trunc-test"]
    for _ in range(2):
        err = assert_one_line_error(args, f"training checkpoint {ckpt} cannot be read (")
        assert "delete the file, or train with force (`--force`), to start the run afresh" in err
    rc, _, err = run_cli([*args, "--force"])
    assert rc == 0 and not ckpt.exists(), err
    get_settings.cache_clear()
