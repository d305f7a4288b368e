"""The pretrained path end to end , no hub: tiny GPT-NeoX and Mamba checkpoints
written with ``save_pretrained`` go through the REAL pipeline (``train`` → probes →
interventions → patching → SQLite + checkpoint store), then follow-up jobs run on the stored
runs. An unreachable hub name fails with one clear error, in the pipeline and in the CLI.
"""

from __future__ import annotations

import shutil
import socket

import pytest
import torch
from sqlalchemy import func, select
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, MambaConfig, MambaForCausalLM

from models_store.pretrained import PretrainedLoadError
from science.training import behaviour
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import METHODS, InterveneParams, MeasureParams, SuiteParams, TrainParams
from worker.pipeline import intervene, load_run, local_env, train
from worker.presets import expand_suite

EVAL_LENGTHS = [40, 60]
# (family, transformers config, layers): small enough for a shared 2-core CPU
CONFIGS = {
    "transformer": lambda: GPTNeoXForCausalLM(
        GPTNeoXConfig(vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
    ),
    "mamba": lambda: MambaForCausalLM(
        MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, state_size=4, expand=2)
    ),
}
N_LAYERS = {"transformer": 3, "mamba": 2}
MEASURE = dict(eval_lengths=EVAL_LENGTHS, n_probe_sequences=24, n_permutations=100, n_patch_pairs=8, pca_k=2)
TRAIN = dict(task="parity", max_steps=3, batch_size=8, eval_every=3, n_eval_sequences=16)


def _no_network(*args, **kwargs):
    raise AssertionError("tried to reach the network")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both tiny checkpoints fine-tuned and measured; the source folders are then DELETED, so
    every later test shows the stored run needs neither them nor the hub."""
    root = tmp_path_factory.mktemp("pretrained_pipeline")
    env = local_env(f"sqlite:///{root / 'results.db'}", root / "store", device="cpu")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket, "getaddrinfo", _no_network)
        for family, make in CONFIGS.items():
            torch.manual_seed(0)
            folder = root / f"tiny-{family}"
            make().save_pretrained(folder)
            params = TrainParams(family=family, pretrained=str(folder), measure=MeasureParams(**MEASURE), **TRAIN)
            out[family] = (train(params, env), params)
            shutil.rmtree(folder)
    return env, out


@pytest.mark.parametrize("family", list(CONFIGS))
def test_run_is_stored_with_the_configs_layers(runs, family):
    env, out = runs
    run_id, params = out[family]
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.family == family and run.task == "parity"
        assert run.pretrained == params.pretrained
        assert run.n_layers == N_LAYERS[family]
        assert run.model_config["pretrained"] == params.pretrained
        assert run.model_config["hf_config"]["num_hidden_layers"] == N_LAYERS[family]
        assert run.status == "complete" and run.checkpoint_id
        assert set(run.behaviour) == {str(L) for L in EVAL_LENGTHS}
        assert 1 <= run.steps <= 3 and run.loss_curve


@pytest.mark.parametrize("family", list(CONFIGS))
def test_probes_for_every_layer_and_eval_length(runs, family):
    env, out = runs
    run_id, _ = out[family]
    with env.session_factory() as s:
        rows = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run_id)).all()
    assert {(r.layer, r.eval_length) for r in rows} == {
        (layer, L) for layer in range(-1, N_LAYERS[family]) for L in EVAL_LENGTHS
    }
    assert all(0.0 <= r.accuracy <= 1.0 and len(r.per_position) == r.eval_length for r in rows)


@pytest.mark.parametrize("family", list(CONFIGS))
def test_interventions_with_refit_accuracy(runs, family):
    env, out = runs
    run_id, _ = out[family]
    n = N_LAYERS[family]
    with env.session_factory() as s:
        rows = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run_id)).all()
    keys = {(r.method, r.layer, r.eval_length) for r in rows}
    expected = {(m, layer, L) for m in METHODS for layer in range(n) for L in EVAL_LENGTHS}
    if family == "mamba":  # every layer at once (stored as layer -2) and each layer alone
        expected |= {("conv1d_removal", layer, L) for layer in (-2, *range(n)) for L in EVAL_LENGTHS}
    assert keys == expected
    for r in rows:
        assert r.refit_acc is not None and 0.0 <= r.refit_acc <= 1.0
        assert r.refit_majority is not None and r.p_holm is not None
        assert r.n_sequences == MEASURE["n_probe_sequences"]
    d_model = {"transformer": 32, "mamba": 16}[family]
    assert all(r.rank_removed == d_model for r in rows if r.method == "mean")
    assert all(r.rank_removed == 1 for r in rows if r.method == "project_out")  # binary probe: one direction


@pytest.mark.parametrize("family", list(CONFIGS))
def test_patching_grid(runs, family):
    env, out = runs
    run_id, _ = out[family]
    with env.session_factory() as s:
        rows = s.scalars(select(PatchingResult).where(PatchingResult.run_id == run_id)).all()
    # Changed with the patching sites: every position, three sites (no state in the transformer), and
    # n_pairs counts the usable pairs (the rest are n_dropped).
    n = N_LAYERS[family]
    want = {("resid_post", ly, p, 40) for ly in range(-1, n) for p in range(40)}
    want |= {("resid_pre", ly, p, 40) for ly in range(n) for p in range(40)}
    if family == "mamba":  # the pretrained Mamba goes through the same state path
        want |= {("state", ly, p, 40) for ly in range(n) for p in range(40)}
    assert {(r.site, r.layer, r.position, r.eval_length) for r in rows} == want
    assert all(r.n_pairs + r.n_dropped == MEASURE["n_patch_pairs"] for r in rows)
    assert len({r.corrupt_position for r in rows}) == 1


@pytest.mark.parametrize("family", list(CONFIGS))
@torch.no_grad()
def test_checkpoint_loads_back_with_identical_outputs(runs, family, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env, out = runs
    run_id, params = out[family]
    p1, task, m1 = load_run(run_id, env)
    _, _, m2 = load_run(run_id, env)
    assert p1.pretrained == params.pretrained and m1.n_layers == N_LAYERS[family]
    assert m1.config.pretrained == params.pretrained and m1.config.token_map
    x = task.generate(40, 8, seed=123).tokens
    assert torch.equal(m1(x), m2(x))
    # the loaded model is the trained one: it reproduces the stored behavioural accuracy exactly
    again = behaviour(m1, task, seed=params.seed, eval_lengths=EVAL_LENGTHS, n_sequences=params.n_eval_sequences)
    with env.session_factory() as s:
        assert again == s.get(Run, run_id).behaviour


@pytest.mark.parametrize("family", list(CONFIGS))
def test_follow_up_intervene_job(runs, family, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env, out = runs
    run_id, _ = out[family]
    n = N_LAYERS[family]
    job = InterveneParams(
        run_id=run_id, methods=["project_out", "leace"], layers=[n - 1], n_probe_sequences=24, n_permutations=100
    )
    with env.session_factory() as s:
        before = s.scalar(
            select(func.count()).select_from(InterventionResult).where(InterventionResult.run_id == run_id)
        )
    assert intervene(job, env) == run_id
    with env.session_factory() as s:
        rows = s.scalars(
            select(InterventionResult).where(
                InterventionResult.run_id == run_id, InterventionResult.config_hash == job.config_hash()
            )
        ).all()
        after = s.scalar(
            select(func.count()).select_from(InterventionResult).where(InterventionResult.run_id == run_id)
        )
    # eval lengths default to the ones the run was measured at, not the five of docs/SCIENCE.md#eval-lengths
    expected = {(m, n - 1, L) for m in ("project_out", "leace") for L in EVAL_LENGTHS}
    if family == "mamba":
        expected |= {("conv1d_removal", layer, L) for layer in (-2, *range(n)) for L in EVAL_LENGTHS}
    assert {(r.method, r.layer, r.eval_length) for r in rows} == expected
    assert after == before  # replaced, not doubled
    assert all(r.refit_acc is not None for r in rows)


def test_family_must_match_the_checkpoint(tmp_path):
    CONFIGS["transformer"]().save_pretrained(tmp_path / "neox")
    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    params = TrainParams(family="mamba", pretrained=str(tmp_path / "neox"), measure=None, **TRAIN)
    with pytest.raises(PretrainedLoadError, match="'transformer' model.*family 'mamba'"):
        train(params, env)
    with env.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0


HUB_NAME = "no-such-org/no-such-model-xyz"


def test_unreachable_hub_name_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    with pytest.raises(PretrainedLoadError) as err:
        train(TrainParams(family="transformer", pretrained=HUB_NAME, **TRAIN), env)
    msg = str(err.value)
    assert HUB_NAME in msg and "could not load" in msg
    assert "AssertionError" not in msg
    with env.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_cli_suite_with_an_unreachable_hub_prints_one_line(cli_env, capsys):
    from backend.cli import main

    rc = main(["suite", "--preset", "pretrained", "--family", "mamba", "--task", "parity", "--device", "cpu"])
    out = capsys.readouterr()
    assert rc == 1, out
    text = out.err + out.out
    assert "Traceback" not in text
    errors = [line for line in out.err.replace("\r", "\n").splitlines() if "error" in line.lower()]
    assert len(errors) == 1, out.err
    line = errors[0][errors[0].index("layerscope: error: ") :]
    assert "state-spaces/mamba-130m-hf" in line and "could not load" in line
    assert out.err.rstrip().endswith(line.rstrip())


# ----------------------------------------------------------------------------- the pretrained preset


def test_pretrained_preset_expansion():
    jobs = expand_suite(SuiteParams(preset="pretrained"))
    models = {
        "EleutherAI/pythia-160m": "transformer",
        "EleutherAI/pythia-410m": "transformer",
        "state-spaces/mamba-130m-hf": "mamba",
    }
    assert {(j.pretrained, j.task) for j in jobs} == {(p, t) for p in models for t in ("parity", "s3", "dyck")}
    assert len(jobs) == 9
    for j in jobs:
        assert j.family == models[j.pretrained]
        assert j.suite == "pretrained" and j.name == f"{j.pretrained.rsplit('/', 1)[1]}-{j.task}-s{j.seed}"
        # fine-tuning, not training from scratch: a small lr, a step budget, the standard eval lengths
        assert j.lr <= 1e-4 and 100 <= j.max_steps <= 5000 and j.batch_size >= 16
        assert j.train_length == 40 and j.measure.eval_lengths == [40, 60, 80, 100, 120]
        assert set(j.measure.methods) == set(METHODS) and j.measure.conv1d
    assert len({j.run_hash() for j in jobs}) == 9  # pythia-160m and -410m runs are distinct


def test_pretrained_preset_filters():
    only_tf = expand_suite(SuiteParams(preset="pretrained", families=["transformer"]))
    assert {j.pretrained for j in only_tf} == {"EleutherAI/pythia-160m", "EleutherAI/pythia-410m"}
    assert len(only_tf) == 6
    mamba_dyck = expand_suite(SuiteParams(preset="pretrained", families=["mamba"], tasks=["dyck"]))
    assert [(j.pretrained, j.task) for j in mamba_dyck] == [("state-spaces/mamba-130m-hf", "dyck")]
    with pytest.raises(ValueError, match="no run"):
        expand_suite(SuiteParams(preset="pretrained", families=["lstm"]))
