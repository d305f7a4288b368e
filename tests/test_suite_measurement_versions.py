"""A suite is meant to be measured by one measurement version (docs/SCIENCE.md#measurement-versions):
resuming a suite that holds rows of an older version says so before anything runs, in one line,
and goes on (numbers of two versions agree within tolerances; a warning, not a refusal)."""

from __future__ import annotations

import pytest

from backend.cli import main
from science.measurement_version import MEASUREMENT_VERSION
from worker import persist
from worker.job_params import SuiteParams
from worker.pipeline import local_env
from worker.presets import expand_suite
from worker.suite_settings import mixed_versions_warning, other_measurement_versions

CELL = dict(preset="smoke", families=["lstm"], tasks=["parity"], seeds=[0, 1])
PROBE = {
    "layer": 0,
    "eval_length": 40,
    "accuracy": 0.9,
    "majority_baseline": 0.5,
    "per_position": [],
    "n_train": 1,
    "n_test": 1,
    "converged": True,
    "n_iter": 3,
    "config_hash": "c",
}


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "store", device="cpu")


def _store(env, jobs, version: int) -> None:
    with env.session_factory() as s:
        for job in jobs:
            run_id = persist.save_run(
                s,
                name=job.name or "r",
                suite=job.suite,
                family=job.family,
                task=job.task,
                seed=job.seed,
                n_layers=job.n_layers,
                d_model=8,
                n_params=100,
                config_hash=job.run_hash(),
                train_config=job.run_config(),
            )
            persist.replace_probe_results(s, run_id, [{**PROBE, "measurement_version": version}])


def test_rows_of_another_version_are_counted_per_suite(env):
    jobs = expand_suite(SuiteParams(**CELL))
    _store(env, jobs[:1], MEASUREMENT_VERSION)
    assert other_measurement_versions(jobs, env.session_factory) == {}
    assert mixed_versions_warning(jobs, env.session_factory) is None
    _store(env, jobs[1:2], 1)
    assert other_measurement_versions(jobs, env.session_factory) == {"smoke": {1: 1}}
    warning = mixed_versions_warning(jobs, env.session_factory)
    assert "suite 'smoke' holds 1 result row(s) of measurement version 1" in warning
    assert f"version {MEASUREMENT_VERSION}" in warning and "--force" in warning
    # another suite's old rows are not this suite's business
    assert mixed_versions_warning(expand_suite(SuiteParams(**CELL, name="other")), env.session_factory) is None


def test_the_cli_warns_in_one_line_and_goes_on(tmp_path, monkeypatch, capsys, env):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_DB_URL", str(env.session_factory.kw["bind"].url))
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    _store(env, expand_suite(SuiteParams(**CELL))[:1], 1)
    get_settings.cache_clear()
    try:
        args = ["suite", "--preset", "smoke", "--family", "lstm", "--task", "parity", "--seed", "0", "--seed", "1"]
        assert main([*args, "--submit"]) == 0
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "measurement version" in line]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith("layerscope: warning: suite 'smoke' holds 1 result row(s) of measurement version 1")
    finally:
        get_settings.cache_clear()
