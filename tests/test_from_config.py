"""From scratch, any transformers architecture, from the CLI and the REST API: a tiny
config saved with ``save_pretrained`` to a temp folder (config.json only, no weights, no hub) is
built with random weights and trained on a task (``TrainParams.from_config``, ``SuiteParams.from_config``,
``layerscope suite --from-config``); the run's config records it, stored runs keep their config
hashes, and a config that cannot be read, or makes another family than the run's, is refused at
submit with one line."""

from __future__ import annotations

import socket

import pytest
import torch
from pydantic import ValidationError
from transformers import LlamaConfig, MambaConfig, T5Config

from worker.job_params import LATER_FIELDS, SuiteParams, TrainParams

TINY_LLAMA = dict(
    vocab_size=64,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=64,
)


def _no_network(*args, **kwargs):
    raise AssertionError("tried to reach the network")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """{"llama": folder, "mamba": folder}, each holding a config.json only."""
    root = tmp_path_factory.mktemp("configs")
    LlamaConfig(**TINY_LLAMA).save_pretrained(root / "tiny-llama")
    MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, state_size=4, expand=2).save_pretrained(
        root / "tiny-mamba"
    )
    assert sorted(p.name for p in (root / "tiny-llama").iterdir()) == ["config.json"]
    return {"llama": str(root / "tiny-llama"), "mamba": str(root / "tiny-mamba")}


# ----------------------------------------------------------------------------------- params


def test_a_relative_local_folder_is_stored_absolute_and_read_from_elsewhere(configs, monkeypatch, tmp_path):
    # a worker, an importer or a rebuild reads the job from another working directory (a new
    # user's trial: `--from-config ./cfg --submit` failed on the worker with "no such local folder")
    import shutil

    folder = tmp_path / "tiny-llama"  # with a weights file: it is fine-tuned as pretrained too
    shutil.copytree(configs["llama"], folder)
    (folder / "model.safetensors").write_bytes(b"")
    monkeypatch.chdir(folder.parent)
    train = TrainParams(task="parity", from_config="./tiny-llama", pretrained=None)
    suite = SuiteParams(preset="smoke", from_config=["tiny-llama", "org/not-here"], pretrained=["./tiny-llama"])
    assert train.from_config == suite.from_config[0] == suite.pretrained[0] == str(folder.resolve())
    assert suite.from_config[1] == "org/not-here"  # a hub name stays as given
    stored = train.model_dump(mode="json")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # elsewhere: the stored job still reads its config
    again = TrainParams.model_validate(stored)
    assert again.family == train.family and again.run_hash() == train.run_hash()


@pytest.mark.parametrize("name", ["0" * 500, "./" + "x" * 300])
def test_a_name_no_file_system_holds_is_no_folder_not_a_server_error(api, name):
    # schemathesis found it: a 500-character model source made is_dir() raise "File name too long"
    suite = api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "from_config": [name]}})
    assert suite.status_code in (201, 422), suite.text
    train = api.client.post("/api/jobs", json=_train_job("transformer", name))
    assert train.status_code in (201, 422), train.text
    if name.startswith("./"):
        assert "no such local folder" in train.text


def test_from_config_is_recorded_and_leaves_stored_hashes_alone(configs):
    plain = TrainParams(family="transformer", task="parity")
    assert "from_config" not in plain.run_config() and LATER_FIELDS["from_config"] is None
    assert TrainParams(family="transformer", task="parity", from_config=None).run_hash() == plain.run_hash()
    scratch = TrainParams(family="transformer", task="parity", from_config=configs["llama"])
    assert scratch.run_config()["from_config"] == configs["llama"] and scratch.run_hash() != plain.run_hash()
    assert scratch.start_token is False and scratch.lr == plain.lr  # no START id; the scratch learning rate
    suite = SuiteParams(preset="smoke")
    assert SuiteParams(preset="smoke", from_config=None).config_hash() == suite.config_hash()
    assert SuiteParams(preset="smoke", from_config=[configs["llama"]]).config_hash() != suite.config_hash()


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"pretrained": "x"}, "not with pretrained"),
        ({"family": "lstm"}, "not 'lstm'"),
        ({"start_token": True}, "start_token"),
        ({"learned_positions": 8}, "learned_positions"),
        ({"from_config": ""}, "at least 1 character"),
    ],
)
def test_bad_from_config_params_are_refused(configs, changes, words):
    with pytest.raises(ValidationError, match=words):
        TrainParams(**{"family": "transformer", "task": "parity", "from_config": configs["llama"], **changes})


def test_a_missing_folder_is_said_before_the_family_it_would_make(tmp_path):
    # with a family that builds no transformers model and a folder that is not there, the first
    # thing wrong is the folder (the family it would make cannot be read from nothing)
    missing = str(tmp_path / "nonexist")
    with pytest.raises(ValidationError, match=r"from_config: '.*nonexist': no such local folder"):
        TrainParams(family="lstm", task="parity", from_config=missing)


def test_a_suite_expands_each_config_into_its_family_beside_pretrained(configs, tmp_path):
    import shutil

    from worker.presets import expand_suite

    pre = tmp_path / "tiny-llama"  # the same architecture fine-tuned: a folder with weights (only its config is read)
    shutil.copytree(configs["llama"], pre)
    (pre / "model.safetensors").write_bytes(b"")
    jobs = expand_suite(
        SuiteParams(
            preset="paper",
            tasks=["parity"],
            seeds=[0],
            pretrained=[str(pre)],
            from_config=[configs["llama"], configs["mamba"]],
        )
    )
    trained = [j for j in jobs if j.control is None]
    assert [(j.family, j.pretrained, j.from_config, j.name) for j in trained] == [
        ("transformer", str(pre), None, "tiny-llama-parity-s0"),
        ("transformer", None, configs["llama"], "tiny-llama-scratch-parity-s0"),
        ("mamba", None, configs["mamba"], "tiny-mamba-scratch-parity-s0"),
    ]
    assert all(j.learned_positions == 0 for j in trained)  # the paper preset's built-in Transformer setting
    scratch = [j for j in trained if j.from_config]
    assert {j.name for j in jobs if j.control} == {f"{j.name}-init" for j in scratch}  # their random-init controls
    only = expand_suite(SuiteParams(preset="smoke", tasks=["parity"], seeds=[0], from_config=[configs["llama"]]))
    assert [j.family for j in only] == ["transformer"]  # instead of the preset's families
    with pytest.raises(ValueError, match=r"from_config '.*nowhere'"):
        expand_suite(SuiteParams(preset="smoke", from_config=[str(tmp_path / "nowhere")]))
    # a family filter none of the given models builds says what each builds (it said only "no run")
    with pytest.raises(ValueError) as err:
        expand_suite(SuiteParams(preset="smoke", tasks=["parity"], families=["lstm"], from_config=[configs["mamba"]]))
    assert str(err.value) == f"family 'lstm' leaves none of the given models: {configs['mamba']} builds 'mamba'"


# ---------------------------------------------------------------------------- the REST API


def _train_job(family: str, source: str) -> dict:
    return {"kind": "train", "params": {"family": family, "task": "parity", "from_config": source, "max_steps": 2}}


def test_api_checks_the_config_at_submit(api, configs, tmp_path):
    missing = api.client.post("/api/jobs", json=_train_job("transformer", str(tmp_path / "nowhere")))
    assert missing.status_code == 422, missing.text
    err = missing.json()["detail"][0]
    assert err["loc"] == ["body", "params", "from_config"] and "nowhere" in err["msg"]
    wrong = api.client.post("/api/jobs", json=_train_job("transformer", configs["mamba"]))
    assert wrong.status_code == 422
    assert "builds a 'mamba' model, but the run asks for family 'transformer'" in wrong.json()["detail"][0]["msg"]
    assert api.client.get("/api/jobs").json()["total"] == 0
    T5Config(vocab_size=64, d_model=16, num_layers=1, num_heads=2, d_ff=32).save_pretrained(tmp_path / "t5")
    t5 = api.client.post("/api/jobs", json=_train_job("transformer", str(tmp_path / "t5")))
    assert t5.status_code == 422 and "encoder-decoder" in t5.json()["detail"][0]["msg"]
    assert api.client.get("/api/jobs").json()["total"] == 0
    ok = api.client.post("/api/jobs", json=_train_job("transformer", configs["llama"]))
    assert ok.status_code == 201, ok.text
    # family left out: the one its blocks make, as the CLI reads it (found by a fresh user: a 422)
    inferred = {"kind": "train", "params": {"task": "parity", "from_config": configs["mamba"], "max_steps": 2}}
    took = api.client.post("/api/jobs", json=inferred)
    assert took.status_code == 201, took.text
    unread = {"kind": "train", "params": {"task": "parity", "from_config": str(tmp_path / "nowhere")}}
    said = api.client.post("/api/jobs", json=unread)
    assert said.status_code == 422, said.text
    (err,) = said.json()["detail"]  # at the field that holds the model, saying why its family is not known
    assert err["loc"] == ["body", "params", "from_config"], err
    assert err["msg"].startswith("family not given") and "no such local folder" in err["msg"], err
    unread = {"kind": "train", "params": {"task": "parity", "pretrained": str(tmp_path / "nowhere")}}
    (err,) = api.client.post("/api/jobs", json=unread).json()["detail"]
    assert err["loc"] == ["body", "params", "pretrained"] and "no such local folder" in err["msg"], err
    # a hub name this machine has not cached is left to the worker (no hub request at submit)
    hub = api.client.post("/api/jobs", json=_train_job("transformer", "some-lab/not-cached-here"))
    assert hub.status_code == 201, hub.text
    bad = {"preset": "smoke", "from_config": [configs["llama"], str(tmp_path / "t5")]}
    suite = api.client.post("/api/jobs", json={"kind": "suite", "params": bad})
    assert suite.status_code == 422
    err = suite.json()["detail"][0]
    assert err["loc"] == ["body", "params", "from_config", 1] and "encoder-decoder" in err["msg"]
    ok = {"preset": "smoke", "from_config": [configs["llama"]], "pretrained": ["some-lab/not-cached-here"]}
    assert api.client.post("/api/jobs", json={"kind": "suite", "params": ok}).status_code == 201


def test_a_position_table_shorter_than_the_run_is_refused_at_submit(api, tmp_path, monkeypatch, capsys):
    # a new user's trial: the API and `suite --submit` took it, and the worker failed with a traceback
    from transformers import GPT2Config

    from backend.cli import main
    from store.settings import get_settings

    short = tmp_path / "gpt2-short"
    GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=16).save_pretrained(short)
    words = "learned position table of 16 positions"
    train = api.client.post("/api/jobs", json=_train_job("transformer", str(short)))
    assert train.status_code == 422, train.text
    (err,) = train.json()["detail"]
    assert err["loc"] == ["body", "params", "from_config"] and words in err["msg"] and "needs" in err["msg"]
    suite = api.client.post(
        "/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "from_config": [str(short)]}}
    )
    assert suite.status_code == 422, suite.text
    err = suite.json()["detail"][0]
    assert err["loc"] == ["body", "params", "from_config", 0] and words in err["msg"] and err["msg"].startswith("run ")
    assert api.client.get("/api/jobs").json()["total"] == 0
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'r.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    get_settings.cache_clear()
    try:
        capsys.readouterr()
        assert main(["suite", "--preset", "smoke", "--task", "parity", "--from-config", str(short), "--submit"]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert words in line and "Traceback" not in line
    finally:
        get_settings.cache_clear()


# ------------------------------------------------------------------------------ end to end


def test_cli_suite_trains_a_config_from_scratch(configs, tmp_path, monkeypatch, capsys):
    from backend.cli import main
    from store.models import Run
    from store.session import make_engine, make_sessionmaker
    from store.settings import get_settings

    db = tmp_path / "r.db"
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{db}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    get_settings.cache_clear()
    try:
        args = ["suite", "--preset", "smoke", "--task", "parity", "--device", "cpu", "--max-steps", "2"]
        rc = main([*args, "--from-config", configs["llama"], "--name", "scratch", "--no-controls"])
        assert rc == 0, capsys.readouterr().err
        with make_sessionmaker(make_engine(f"sqlite:///{db}"))() as s:
            (run,) = s.query(Run).all()
            assert (run.family, run.pretrained, run.status, run.n_layers) == ("transformer", None, "complete", 2)
            assert run.train_config["from_config"] == configs["llama"]
            assert run.model_config["hf_config"]["model_type"] == "llama"
        capsys.readouterr()
        # a missing folder is refused as the option's bad value (exit 2, as click's usage errors),
        # before torch or the hub is asked
        assert main([*args, "--from-config", str(tmp_path / "nowhere")]) == 2
        assert "'--from-config'" in (err := capsys.readouterr().err) and "no such local folder" in err
    finally:
        get_settings.cache_clear()


def test_the_pipeline_builds_a_random_init_of_the_config(configs):
    """Two seeds: two different random inits of the same architecture, neither a checkpoint's."""
    from science.tasks import get_task
    from worker.pipeline import build_model_of

    task = get_task("parity")
    a, b = (
        build_model_of(TrainParams(family="transformer", task="parity", seed=s, from_config=configs["llama"]), task)
        for s in (0, 1)
    )
    assert a.config.hf_config["model_type"] == "llama" and a.n_layers == 2
    wa, wb = (next(m.backbone.parameters()) for m in (a, b))
    assert wa.shape == wb.shape and not torch.equal(wa, wb)
    with pytest.raises(ValueError, match="is a 'mamba' model, but the run asks for family 'transformer'"):
        build_model_of(TrainParams(family="transformer", task="parity", from_config=configs["mamba"]), task)


def test_a_config_folder_that_changed_is_another_run_and_cannot_rebuild_the_old_one(tmp_path):
    """The run's identity holds its config.json's SHA-256, read when the job is made: the same
    folder with another config makes another run (not "already stored"), and building the first
    run from the changed folder is refused, not silently another model."""
    from science.tasks import get_task
    from worker.pipeline import build_model_of

    folder = tmp_path / "llama"
    LlamaConfig(**TINY_LLAMA).save_pretrained(folder)
    first = TrainParams(family="transformer", task="parity", from_config=str(folder))
    assert first.from_config_sha256 is not None and len(first.from_config_sha256) == 64
    LlamaConfig(**{**TINY_LLAMA, "num_hidden_layers": 3}).save_pretrained(folder)
    second = TrainParams(family="transformer", task="parity", from_config=str(folder))
    assert second.run_hash() != first.run_hash()
    stored = TrainParams(**first.run_config())  # the first run as its stored train config reads back
    assert stored.from_config_sha256 == first.from_config_sha256
    with pytest.raises(ValueError, match="its config.json changed since this run was made"):
        build_model_of(stored, get_task("parity"))
    assert build_model_of(second, get_task("parity")).n_layers == 3


def test_a_config_folder_that_cannot_be_read_says_why_in_one_line(tmp_path):
    """Found by a fresh user: an empty folder read "Should have a model_type key", and a bad field's
    reason (on transformers' second line) was cut off."""
    from models_store.any_model import read_config

    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="the folder holds no config.json"):
        read_config(str(tmp_path / "empty"), "from_config")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text('{"model_type": "gpt_neox", "hidden_size": "sixty-four"}')
    with pytest.raises(ValueError) as bad:
        read_config(str(tmp_path / "bad"), "from_config")
    assert "\n" not in str(bad.value) and "hidden_size" in str(bad.value) and "sixty-four" in str(bad.value)


def test_loading_a_mamba_config_on_cpu_prints_no_slow_path_notice(tmp_path):
    """Found by a fresh user: every Mamba run printed transformers' "install mamba_ssm … much slower"
    — from the causality test's forward, which runs transformers' own path; the run's mixers take
    the compiled CPU path. A fresh process: transformers says a notice once per process."""
    import subprocess
    import sys

    MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, state_size=4, expand=2).save_pretrained(
        tmp_path / "mamba"
    )
    code = (
        "from models_store.pretrained import load_pretrained; "
        f"load_pretrained({str(tmp_path / 'mamba')!r}, n_classes=2, task_vocab_size=4, weights=False)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "much slower" not in out.stderr + out.stdout


def test_a_config_that_builds_no_model_and_a_weightless_pretrained_folder_are_refused_at_submit(api, tmp_path):
    """Found by a fresh user: ``hidden_size: -64`` was a 500 (a traceback in the CLI), a layer count
    of 0 read as "no num_hidden_layers … not supported", and a ``pretrained`` folder holding only
    a config.json was queued and failed on the worker."""
    import json

    def folder(name: str, **cfg) -> str:
        (tmp_path / name).mkdir()
        base = {"model_type": "gpt_neox", "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4}
        (tmp_path / name / "config.json").write_text(json.dumps({**base, "num_hidden_layers": 2, **cfg}))
        return str(tmp_path / name)

    negative, no_layers, config_only = folder("neg", hidden_size=-64), folder("zero", num_hidden_layers=0), folder("w")
    for family in (None, "transformer"):
        params = {"task": "parity", "from_config": negative, **({"family": family} if family else {})}
        r = api.client.post("/api/jobs", json={"kind": "train", "params": params})
        assert r.status_code == 422 and "its config builds no model" in r.text and "negative dimension" in r.text, (
            r.text
        )
    r = api.client.post("/api/jobs", json={"kind": "train", "params": {"task": "parity", "from_config": no_layers}})
    assert r.status_code == 422 and "num_hidden_layers must be a whole number ≥ 1" in r.text, r.text
    r = api.client.post("/api/jobs", json={"kind": "train", "params": {"task": "parity", "pretrained": config_only}})
    assert r.status_code == 422 and "holds no weights" in r.text and "from_config" in r.text, r.text
    assert api.client.get("/api/jobs").json()["total"] == 0
