"""A suite whose cells are stored with other settings (another config hash: e.g. a bundle made
with --max-seconds 75) is refused, in one line per group, by the CLI, the API and the suite runner:
a suite holds one run per seed (docs/SCIENCE.md#suites)."""

from __future__ import annotations

import pytest

from backend.cli import main
from worker import persist
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite
from worker.presets import expand_suite
from worker.suite_settings import SuiteSettingsConflict, stored_with_other_settings

CELL = dict(preset="smoke", families=["lstm"], tasks=["parity"])


def _store(env, jobs, n_layers: int | None = None) -> None:
    """Store ``jobs`` as runs (``n_layers``: the depth stored, where a model's own config sets it)."""
    with env.session_factory() as s:
        for job in jobs:
            persist.save_run(
                s,
                name=job.name or "r",
                suite=job.suite,
                family=job.family,
                task=job.task,
                seed=job.seed,
                n_layers=n_layers or job.n_layers,
                d_model=8,
                n_params=100,
                config_hash=job.run_hash(),
                train_config=job.run_config(),
                loss_curve=[],
                behaviour={},
            )


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "store", device="cpu")


def test_runs_stored_with_other_overrides_are_named(env):
    made = expand_suite(SuiteParams(**CELL, max_seconds=75))
    _store(env, made)
    now = expand_suite(SuiteParams(**CELL))
    preset_seconds = now[0].max_seconds
    assert preset_seconds != 75
    (group,) = stored_with_other_settings(now, env.session_factory)
    assert group["suite"] == "smoke" and group["count"] == len(now)
    assert group["diffs"] == [("max_seconds", 75.0, preset_seconds)]
    assert stored_with_other_settings(made, env.session_factory) == []  # the same overrides: resumed as usual


def test_a_revised_cells_runs_moved_out_make_room_for_the_revision(env):
    """A preset cell revised before new runs (docs/SCIENCE.md#budgets): its stored runs conflict
    with the revision until ``suite move`` takes them to a suite of their own; the suite's other
    cells stay, and the moved runs stay stored under the new name."""
    from backend.housekeeping import move_runs

    old = expand_suite(SuiteParams(**CELL, max_steps=6))
    other_cell = expand_suite(SuiteParams(preset="smoke", families=["gru"], tasks=["parity"]))
    _store(env, old + other_cell)
    revised = expand_suite(SuiteParams(**CELL, max_steps=20))
    assert stored_with_other_settings(revised, env.session_factory)  # refused while they are there
    with env.session_factory() as s:
        moved = move_runs(s, "smoke", "smoke-rev1", families=["lstm"], tasks=["parity"])
    assert {r.config_hash for r in moved} == {j.run_hash() for j in old}
    assert stored_with_other_settings(revised, env.session_factory) == []
    assert stored_with_other_settings(other_cell, env.session_factory) == []  # still in its suite, as made


def test_a_depth_sweep_or_another_pretrained_model_is_not_a_second_run_of_a_seed(env):
    made = expand_suite(SuiteParams(**CELL))
    _store(env, made)
    deeper = [j.model_copy(update={"n_layers": j.n_layers + 2, "max_seconds": 75}) for j in made]
    assert stored_with_other_settings(deeper, env.session_factory) == []


def _config_folder(path, width: int, layers: int):
    from transformers import GPTNeoXConfig

    GPTNeoXConfig(
        vocab_size=64, hidden_size=width, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=4 * width
    ).save_pretrained(path)
    return str(path)


def test_another_config_of_the_same_depth_is_refused_not_pooled_as_a_seed(env, tmp_path):
    """Two transformers configs of one family and depth (another width) fall in one cell of every
    curve and profile (task × family × depth): a new seed from the other config is refused by the
    settings that differ; a config of another depth is a depth sweep and joins the suite."""
    narrow, wide = _config_folder(tmp_path / "narrow", 32, 2), _config_folder(tmp_path / "wide", 48, 2)
    deeper = _config_folder(tmp_path / "deeper", 32, 3)

    def jobs(folder: str, seed: int):
        return expand_suite(SuiteParams(preset="smoke", tasks=["parity"], from_config=[folder], seeds=[seed]))

    _store(env, jobs(narrow, 0), n_layers=2)  # the depth its config.json makes
    (group,) = stored_with_other_settings(jobs(wide, 1), env.session_factory)
    assert {k for k, _, _ in group["diffs"]} >= {"from_config", "from_config_sha256"}
    assert stored_with_other_settings(jobs(narrow, 1), env.session_factory) == []  # a seed of the same config
    assert stored_with_other_settings(jobs(deeper, 1), env.session_factory) == []  # another depth: a sweep
    with pytest.raises(SuiteSettingsConflict, match="another suite name"):
        run_suite(SuiteParams(preset="smoke", tasks=["parity"], from_config=[wide], seeds=[1]), env)


def test_two_configs_of_one_depth_in_one_suite_are_refused_before_anything_runs(env, tmp_path):
    from worker.suite_settings import check_one_run_per_seed, pooled_models

    narrow, wide = _config_folder(tmp_path / "narrow", 32, 2), _config_folder(tmp_path / "wide", 48, 2)
    deeper = _config_folder(tmp_path / "deeper", 32, 3)

    def params(*folders: str, **kw) -> SuiteParams:
        return SuiteParams(preset="smoke", tasks=["parity"], from_config=list(folders), **kw)

    (line,) = pooled_models(expand_suite(params(narrow, wide)))
    assert f"{narrow!r} and {wide!r} make the same cell of suite 'smoke' (transformer × parity, 2 layers)" in line
    assert pooled_models(expand_suite(params(narrow, deeper))) == []  # a depth sweep
    assert pooled_models(expand_suite(params(narrow, wide, name="a"))[:1]) == []  # one model: nothing pooled
    with pytest.raises(SuiteSettingsConflict, match="pooled as seeds of one cell.*suite of its own"):
        check_one_run_per_seed(expand_suite(params(narrow, wide)), env.session_factory)
    with pytest.raises(SuiteSettingsConflict, match="pooled"):
        run_suite(params(narrow, wide, max_steps=2), env)
    with env.session_factory() as s:
        from store.models import Run

        assert s.query(Run).count() == 0  # refused before anything was trained
    # hub names (no config.json here, depth unknown until the worker reads them) are not compared
    hub = [j.model_copy(update={"from_config": name}) for j, name in zip(expand_suite(params(narrow, wide)), "ab")]
    _store(env, expand_suite(params(narrow)), n_layers=2)
    assert pooled_models(hub) == [] and stored_with_other_settings(hub, env.session_factory) == []
    assert stored_with_other_settings(expand_suite(params(wide, name="smoke")), env.session_factory)  # read here


def test_the_suite_runner_refuses_a_second_run_of_a_seed(env):
    _store(env, expand_suite(SuiteParams(**CELL, max_seconds=75)))
    with pytest.raises(SuiteSettingsConflict, match="another suite name"):
        run_suite(SuiteParams(**CELL), env)
    assert run_suite(SuiteParams(**CELL, name="smoke-preset-budget", max_steps=2), env)  # another name: its own suite


def test_cli_suite_refuses_runs_with_other_settings_in_one_suite(tmp_path, monkeypatch, capsys, env):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_DB_URL", str(env.session_factory.kw["bind"].url))
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    _store(env, expand_suite(SuiteParams(**CELL, max_seconds=75)))
    get_settings.cache_clear()
    try:
        args = ["suite", "--preset", "smoke", "--family", "lstm", "--task", "parity", "--submit"]
        assert main(args) == 1
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "other settings" in line]
        n = len(expand_suite(SuiteParams(**CELL)))
        assert len(lines) == 1 and "Traceback" not in err, err
        assert f"{n} run(s) of suite 'smoke' are stored with other settings (max_seconds 75.0 vs" in lines[0]
        assert "pass the same overrides to resume them, or run these settings under another suite name" in lines[0]
        assert main([*args, "--force"]) == 1  # --force re-runs a suite's runs; it does not add a second recipe
        capsys.readouterr()
        assert main([*args, "--max-seconds", "75"]) == 0  # the same overrides: resumed
        assert "other settings" not in capsys.readouterr().err
        assert main([*args, "--name", "smoke-again"]) == 0  # another name: its own suite
    finally:
        get_settings.cache_clear()


def test_a_run_stored_in_another_suite_is_not_moved_out_of_it(env):
    made = expand_suite(SuiteParams(**CELL, max_steps=2))
    _store(env, made)  # suite 'smoke'
    with pytest.raises(SuiteSettingsConflict, match="stored already with the same settings .* in suite 'smoke'"):
        run_suite(SuiteParams(**CELL, max_steps=2, name="B", force=True), env)
    with env.session_factory() as s:  # nothing moved
        from store.models import Run

        assert {r.suite for r in s.query(Run)} == {"smoke"}


def test_a_new_seed_with_other_settings_is_refused_and_with_the_same_accepted(env):
    """The fresh user's case: a suite holding seed 0 at the preset's budget took seed 6 at
    --max-steps 2, and /api/curves pooled the two recipes. A new seed joins a cell only trained as
    the cell's other seeds were (docs/SCIENCE.md#suites)."""
    _store(env, expand_suite(SuiteParams(**CELL, seeds=[0])))
    other = expand_suite(SuiteParams(**CELL, seeds=[6], max_steps=2))
    (group,) = stored_with_other_settings(other, env.session_factory)
    assert group["count"] == len(other) and ("max_steps", expand_suite(SuiteParams(**CELL))[0].max_steps, 2) in [
        tuple(d) for d in group["diffs"]
    ]
    assert all(k != "seed" for k, _, _ in group["diffs"])  # the seed is not a setting
    assert stored_with_other_settings(expand_suite(SuiteParams(**CELL, seeds=[6, 7])), env.session_factory) == []
    with pytest.raises(SuiteSettingsConflict, match="other settings"):
        run_suite(SuiteParams(**CELL, seeds=[6], max_steps=2), env)


def test_the_api_refuses_a_new_seed_with_other_settings(api):
    """POST /api/jobs: the same rule, a 422 naming the differing setting, no job stored."""
    from sqlalchemy import func, select

    from store.models import Job

    with api.factory() as s:
        for job in expand_suite(SuiteParams(**CELL, seeds=[0])):
            persist.save_run(
                s, name="r", suite=job.suite, family=job.family, task=job.task, seed=job.seed,
                n_layers=job.n_layers, d_model=8, n_params=100, config_hash=job.run_hash(),
                train_config=job.run_config(), loss_curve=[], behaviour={},
            )  # fmt: skip
    body = {"kind": "suite", "params": {**CELL, "seeds": [7], "max_steps": 3, "name": "smoke"}}
    r = api.client.post("/api/jobs", json=body)
    assert r.status_code == 422, r.text
    assert "max_steps" in r.text and "other settings" in r.text
    with api.factory() as s:
        assert s.execute(select(func.count()).select_from(Job)).scalar_one() == 0
    body["params"]["max_steps"] = expand_suite(SuiteParams(**CELL))[0].max_steps
    assert api.client.post("/api/jobs", json=body).status_code == 201  # trained as seed 0 was: accepted


@pytest.mark.parametrize(
    ("text", "depth"),
    [('{"num_hidden_layers": 12}', 12), ('{"n_layer": 6}', 6), ('{"hidden_size": 8}', None), ("{not json", None)],
)
def test_a_config_folders_depth_is_read_as_json(tmp_path, text, depth):
    from worker.job_params import config_folder_depth

    (tmp_path / "config.json").write_text(text)
    assert config_folder_depth(str(tmp_path)) == depth
    assert config_folder_depth(str(tmp_path / "absent")) is None  # a hub name: not a folder here
