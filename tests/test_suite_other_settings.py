"""A suite whose cells are stored with other settings (another config hash: e.g. a bundle made
with --max-seconds 75) says so in one line per group instead of silently training again."""

from __future__ import annotations

import pytest

from backend.cli import main
from worker import persist
from worker.params import SuiteParams
from worker.pipeline import local_env, stored_with_other_settings
from worker.presets import expand_suite

CELL = dict(preset="smoke", families=["lstm"], tasks=["parity"])


def _store(env, jobs) -> None:
    with env.session_factory() as s:
        for job in jobs:
            persist.save_run(s, name=job.name or "r", suite=job.suite, family=job.family, task=job.task, seed=job.seed,
                             n_layers=2, d_model=8, n_params=100, config_hash=job.run_hash(),
                             train_config=job.run_config(), loss_curve=[], behaviour={})


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "store", device="cpu")


def test_runs_stored_with_other_overrides_are_named(env):
    made = expand_suite(SuiteParams(**CELL, max_seconds=75))
    _store(env, made)
    now = expand_suite(SuiteParams(**CELL))
    preset_seconds = now[0].max_seconds
    assert preset_seconds != 75
    (group,) = stored_with_other_settings(now, env)
    assert group["suite"] == "smoke" and group["count"] == len(now)
    assert group["diffs"] == [("max_seconds", 75.0, preset_seconds)]
    assert stored_with_other_settings(made, env) == []  # the same overrides: resumed as usual


def test_cli_suite_says_stored_runs_have_other_settings(tmp_path, monkeypatch, capsys, env):
    from store.config import get_settings

    monkeypatch.setenv("LAYERSCOPE_DB_URL", str(env.session_factory.kw["bind"].url))
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    _store(env, expand_suite(SuiteParams(**CELL, max_seconds=75)))
    get_settings.cache_clear()
    try:
        args = ["suite", "--preset", "smoke", "--family", "lstm", "--task", "parity", "--submit"]
        assert main(args) == 0
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "other settings" in line]
        n = len(expand_suite(SuiteParams(**CELL)))
        assert len(lines) == 1, err
        assert f"{n} run(s) of suite 'smoke' are stored with other settings (max_seconds 75.0 vs" in lines[0]
        assert "pass the same overrides to resume them" in lines[0]
        assert main([*args, "--max-seconds", "75"]) == 0  # the same overrides: nothing to say
        assert "other settings" not in capsys.readouterr().err
    finally:
        get_settings.cache_clear()
