"""A job whose estimated peak memory (worker.memory) is over the limit
(``LAYERSCOPE_MAX_JOB_MEMORY_GIB``), or whose measurement cannot fit ``LAYERSCOPE_MEASURE_MEMORY_GB``,
is refused at submit: a 422 at the field through the API, one line from the CLI, nothing queued or
written. Every shipped preset fits both defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import GPTNeoXConfig, MambaConfig

from layerscope_core.registry import PRESETS, get_family
from store.models import Run
from store.settings import Settings, get_settings
from tests.cli_one_line import assert_one_line_error
from tests.conftest import seed_runs
from worker.job_params import SuiteParams, TrainParams
from worker.memory import GIB, ModelSize, measure_bytes, suite_problems, train_bytes, train_job_problems
from worker.presets import expand_suite

DEFAULT_LIMIT = int(Settings.model_fields["max_job_memory_gib"].default * GIB)


def test_the_estimate_is_the_documented_formula() -> None:
    size = ModelSize("mamba2", d_model=64, n_layers=4, n_params=1000, field="param_target", label="x")
    floats = get_family("mamba2").activation_floats
    assert floats == 40.0 and get_family("lstm").activation_floats == 24.0
    assert train_bytes(size, 32, 41) == 16 * 1000 + 4 * 40 * 32 * 41 * 64 * 4
    assert measure_bytes(size, 500 * 120) == 4 * (1000 + 500 * 120 * 64 * 5)


@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "pretrained"])
def test_every_scratch_preset_fits_the_default_limit(preset) -> None:
    jobs = expand_suite(SuiteParams(preset=preset))
    assert jobs and suite_problems(jobs, DEFAULT_LIMIT) == []


def test_the_pretrained_preset_fits_the_default_limit(tmp_path, hub_offline) -> None:
    """Its three hub models, as configs of their real sizes (no hub here): within 16 GiB, and
    read by the estimate (at a quarter of the limit Pythia-410M is over)."""
    GPTNeoXConfig(
        vocab_size=50304, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    ).save_pretrained(tmp_path / "pythia-160m")
    GPTNeoXConfig(
        vocab_size=50304, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
    ).save_pretrained(tmp_path / "pythia-410m")
    MambaConfig(vocab_size=50280, hidden_size=768, num_hidden_layers=24, state_size=16, expand=2).save_pretrained(
        tmp_path / "mamba-130m-hf"
    )
    models = [str(tmp_path / m) for m in ("pythia-160m", "pythia-410m", "mamba-130m-hf")]
    for m in models:  # the estimate reads the config alone; a folder to fine-tune must hold weights
        (Path(m) / "model.safetensors").write_bytes(b"")
    jobs = expand_suite(SuiteParams(preset="pretrained", pretrained=models))
    assert len(jobs) == 9 and suite_problems(jobs, DEFAULT_LIMIT) == []
    over = {job.pretrained for job, _ in suite_problems(jobs, DEFAULT_LIMIT // 4)}
    assert models[1] in over and models[0] not in over


def test_over_the_limit_names_the_field_the_estimate_and_the_limit() -> None:
    big = TrainParams(family="transformer", task="parity", batch_size=4096, train_length=4096, measure=None)
    ((loc, msg, value),) = train_job_problems(big, DEFAULT_LIMIT)
    assert loc == ("batch_size",) and value == 4096
    assert msg.startswith("training needs about ") and "over the job memory limit of 16.0 GiB" in msg
    assert "LAYERSCOPE_MAX_JOB_MEMORY_GIB" in msg and "train_length 4096" in msg
    control = big.twin(control="init")  # a random-init control trains nothing
    assert train_job_problems(control, DEFAULT_LIMIT) == []


# ---------------------------------------------------------------------------------- the API


def _total(api) -> int:
    return api.client.get("/api/jobs").json()["total"]


def test_api_refuses_a_train_job_over_the_limit(api) -> None:
    train = {"family": "lstm", "task": "parity", "batch_size": 4096, "train_length": 4096}
    r = api.client.post("/api/jobs", json={"kind": "train", "params": train})
    assert r.status_code == 422, r.text
    # its measurement's edits, fitted at train_length 4096 on up to 2,000 sequences (4.2 GB a layer),
    # stream their rows from disk (science.streamed_fit): within LAYERSCOPE_MEASURE_MEMORY_GB's 6 GiB
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "params", "batch_size"] and err["input"] == 4096
    assert "training needs about" in err["msg"] and "GiB" in err["msg"] and "16.0 GiB" in err["msg"]
    measure = {"family": "lstm", "task": "parity", "measure": {"n_probe_sequences": 100_000, "eval_lengths": [4096]}}
    r = api.client.post("/api/jobs", json={"kind": "train", "params": measure})
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "params", "measure", "n_probe_sequences"]
    assert "measuring needs about" in err["msg"] and "n_probe_sequences 100,000 × max(eval_lengths) 4096" in err["msg"]
    assert _total(api) == 0
    ok = api.client.post("/api/jobs", json={"kind": "train", "params": {"family": "lstm", "task": "parity"}})
    assert ok.status_code == 201, ok.text


def test_api_refuses_a_suite_and_a_probe_job_over_a_lower_limit(api) -> None:
    api.settings.max_job_memory_gib = 0.001  # 1 MiB: the smoke preset's runs are over
    r = api.client.post(
        "/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "tasks": ["parity"], "families": ["gru"]}}
    )
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "params"] and err["msg"].startswith("run gru-parity-s0: ")
    assert "over the job memory limit of 1.0 MiB" in err["msg"]
    (run_id,) = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,))
    with api.factory() as s:
        s.query(Run).update({"checkpoint_id": "c" * 64})
        s.commit()
    r = api.client.post("/api/jobs", json={"kind": "probe", "params": {"run_id": run_id}})
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "params", "n_probe_sequences"] and f"of run {run_id}" in err["msg"]
    assert _total(api) == 0
    api.settings.max_job_memory_gib = 16.0
    assert api.client.post("/api/jobs", json={"kind": "probe", "params": {"run_id": run_id}}).status_code == 201


# ---------------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli_env(cli_home, monkeypatch):
    monkeypatch.setenv("LAYERSCOPE_MAX_JOB_MEMORY_GIB", "0.001")  # 1 MiB: the smoke preset's runs are over
    get_settings.cache_clear()
    return cli_home


def test_cli_refuses_a_suite_over_the_limit_before_anything_is_written(cli_env) -> None:
    args = ["suite", "--preset", "smoke", "--task", "parity", "--family", "lstm", "--family", "gru"]
    for extra in ([], ["--submit"]):
        line = assert_one_line_error([*args, *extra], "run lstm-parity-s0: ")
        # the phase, not a job field the suite command has no option for (batch_size, measure.…)
        assert line.split("run lstm-parity-s0: ", 1)[1].startswith(("training", "measuring")), line
        assert "over the job memory limit of 1.0 MiB (LAYERSCOPE_MAX_JOB_MEMORY_GIB)" in line
        assert "(and 1 more run(s))" in line
        assert line.endswith(
            "they are the preset's (another preset, a smaller model, or a higher LAYERSCOPE_MAX_JOB_MEMORY_GIB)"
        )
    assert not (cli_env / "cli.db").exists() and not (cli_env / "queue.db").exists()


def test_cli_refuses_a_probe_over_the_limit(cli_env) -> None:
    from backend.cli import main
    from store.session import make_engine, make_sessionmaker

    assert main(["db", "upgrade"]) == 0
    factory = make_sessionmaker(make_engine(f"sqlite:///{cli_env / 'cli.db'}"))
    (run_id,) = seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0,))
    with factory() as s:
        s.query(Run).update({"checkpoint_id": "c" * 64})
        s.commit()
    (cli_env / "store" / ("c" * 64)).mkdir(parents=True)  # its weights are "here"
    # the command's options, not the job's field names (a new user's trial)
    line = assert_one_line_error(["probe", str(run_id), "--n-sequences", "5000"], "--n-sequences: measuring")
    assert "--n-sequences 5,000" in line and "LAYERSCOPE_MAX_JOB_MEMORY_GIB" in line
    assert "n_probe_sequences" not in line and "lower --n-sequences or --eval-length" in line
    line = assert_one_line_error(["intervene", str(run_id), "--n-sequences", "5000"], "--n-sequences: measuring")
    assert "--n-sequences 5,000" in line


def test_a_job_without_eval_lengths_is_checked_at_the_lengths_the_run_was_measured_at(sqlite_url) -> None:
    """``probe RUN_ID`` measures the run's own eval lengths again: its memory check reads those (a
    run measured up to L = 600 is checked at 600, not at the default lengths' 120)."""
    from store.measured import eval_lengths_in
    from store.migrate import init_db
    from store.models import MeasureSettings, ProbeResult
    from store.session import make_engine, make_sessionmaker
    from worker.job_params import ProbeParams
    from worker.memory import run_job_problems

    init_db(sqlite_url)
    factory = make_sessionmaker(make_engine(sqlite_url))
    (run_id,) = seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0,))
    with factory() as s:
        row = MeasureSettings(config_hash="m" * 64, eval_lengths=[40, 600], params={})
        s.add(row)
        s.flush()
        s.query(ProbeResult).filter(ProbeResult.run_id == run_id).update({"settings_id": row.id})
        s.commit()
        assert eval_lengths_in(s, run_id) == [40, 600]
        run = s.get(Run, run_id)
        params = ProbeParams(run_id=run_id)
        ((_, msg, _),) = run_job_problems(params, run, 2**16, eval_lengths_in(s, run_id))
        assert "L=600" in msg or "× max(eval_lengths) 600" in msg, msg
        ((_, default_msg, _),) = run_job_problems(params, run, 2**16)  # lengths not known: the defaults'
        assert "600" not in default_msg
