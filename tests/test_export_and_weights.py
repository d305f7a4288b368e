"""What a probe and an edit learned, kept: probe weights and removed
directions are stored as content-addressed safetensors beside the checkpoints, returned by the
Python API, listed and downloadable over REST; ``layerscope export-model`` writes a folder that
``AutoModel`` loads, with the token head beside it."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import torch
from safetensors.torch import load as st_load

from worker.job_params import MeasureParams, TrainParams

TINY = dict(
    n_layers=2, max_steps=3, batch_size=8, eval_every=3, n_eval_sequences=16, train_length=16, curriculum_start=None
)
MEASURE = MeasureParams(
    eval_lengths=[16],
    n_probe_sequences=24,
    n_permutations=100,
    n_patch_pairs=4,
    methods=["project_out", "mean"],
    patch_eval_length=16,
)


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    get_settings.cache_clear()
    from worker.pipeline import local_env

    yield local_env(device="cpu")
    get_settings.cache_clear()


def _train(env, family, d_model, measure=None):
    from worker.pipeline import train

    return train(TrainParams(family=family, task="parity", d_model=d_model, measure=measure, **TINY), env)


def test_weights_kept_returned_listed_and_downloadable(cli_env):
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from worker.learned import learned
    from worker.pipeline import load_run

    run_id = _train(cli_env, "gru", 16, MEASURE)
    rows = learned(run_id, cli_env)
    probes = [r for r in rows if r["kind"] == "probe"]
    edits = {(r["method"], r["layer"]): r for r in rows if r["kind"] == "edit"}
    assert {r["layer"] for r in probes} == {-1, 0, 1} and set(edits) == {
        (m, ly) for m in ("project_out", "mean") for ly in (0, 1)
    }
    t = probes[1]["tensors"]
    assert t["W"].shape == (2, 16) and t["directions"].shape == (2, 16) and t["mean"].shape == (16,)
    torch.testing.assert_close(t["directions"], t["W"] / t["std"])
    assert edits[("project_out", 0)]["tensors"]["removed"].shape == (1, 16)
    assert "removed" not in edits[("mean", 0)]["tensors"]  # the mean ablation replaces the whole state
    # the kept probe reproduces its predictions: logits = directions · h + intercept
    _, task, model = load_run(run_id, cli_env)
    from models_store.capture import run_with_states

    _, states = run_with_states(model, task.generate(16, 4, seed=5, split="test").tokens, layers=[0])
    p0 = next(r for r in probes if r["layer"] == 0)["tensors"]
    raw = states[0] @ p0["directions"].T + p0["intercept"]
    std = ((states[0] - p0["mean"]) / p0["std"]) @ p0["W"].T + p0["b"]
    torch.testing.assert_close(raw, std, rtol=1e-4, atol=1e-4)

    client = TestClient(create_app())
    listed = client.get(f"/api/runs/{run_id}/weights").json()
    assert {(w["kind"], w["method"], w["layer"]) for w in listed} == {
        (r["kind"], r["method"], r["layer"]) for r in rows
    }
    got = client.get(f"/api/artifacts/{listed[0]['artifact_id']}")
    assert got.status_code == 200 and got.headers["content-type"] == "application/octet-stream"
    assert set(st_load(got.content)) == set(
        next(r for r in rows if r["artifact_id"] == listed[0]["artifact_id"])["tensors"]
    )
    assert client.get("/api/artifacts/" + "0" * 64).status_code == 404
    assert client.get("/api/artifacts/nothex").status_code == 422
    assert client.get("/api/runs/999/weights").status_code == 404


def test_an_edit_is_kept_once_for_every_eval_length_it_was_applied_at(cli_env):
    """An edit is fitted once (at the fit length) and applied at every eval length: its tensors are
    one artifact, not one per length (a paper run's 100 edit rows kept 4.4 MB as 100 files, five
    copies of each); each length keeps its row. A probe is fitted per length: one artifact each."""
    from worker.learned import learned

    run_id = _train(cli_env, "gru", 16, MEASURE.model_copy(update={"eval_lengths": [16, 20]}))
    rows = learned(run_id, cli_env, tensors=False)
    edits, probes = defaultdict(set), defaultdict(set)
    for r in rows:
        (edits if r["kind"] == "edit" else probes)[(r["method"], r["layer"])].add((r["eval_length"], r["artifact_id"]))
    assert edits and all(len(v) == 2 and len({a for _, a in v}) == 1 for v in edits.values())
    assert probes and all(len(v) == 2 and len({a for _, a in v}) == 2 for v in probes.values())


def test_a_bundle_carries_the_kept_weights_only_with_artifacts(cli_env, tmp_path, capsys, monkeypatch):
    """``layerscope export`` writes the results (the ``result_weights`` rows naming each artifact)
    without the safetensors files, most of a measured suite's bytes; ``--artifacts`` adds every file
    the rows name. A slim bundle imports with those rows; the files are not there until the run is
    measured again on its weights (``learned`` says so)."""
    import zipfile

    from backend.bundle import read_bundle
    from backend.cli import main
    from store.settings import get_settings
    from worker.learned import learned
    from worker.pipeline import local_env, train

    params = TrainParams(family="gru", task="parity", d_model=16, measure=MEASURE, suite="kept", **TINY)
    run_id = train(params, cli_env)
    ids = {r["artifact_id"] for r in learned(run_id, cli_env, tensors=False)}
    slim, full = tmp_path / "slim.zip", tmp_path / "full.zip"
    assert main(["export", "--suite", "kept", "-o", str(slim)]) == 0, capsys.readouterr().err
    assert main(["export", "--suite", "kept", "-o", str(full), "--artifacts"]) == 0
    assert "with the probe weights and removed directions" in capsys.readouterr().err
    listed = {name: zipfile.ZipFile(f).namelist() for name, f in (("slim", slim), ("full", full))}
    assert not [n for n in listed["slim"] if n.startswith("artifacts/")]
    carried = {n[len("artifacts/") : -len(".safetensors")] for n in listed["full"] if n.startswith("artifacts/")}
    assert carried == ids
    manifest, tables = read_bundle(slim)
    assert manifest["artifacts"] is False and read_bundle(full)[0]["artifacts"] is True
    assert {r["artifact_id"] for r in tables["result_weights"]} == ids
    assert slim.stat().st_size < full.stat().st_size

    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'there.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "there"))
    get_settings.cache_clear()
    assert main(["import", str(slim)]) == 0, capsys.readouterr().err
    there = local_env(device="cpu")
    (imported,) = _run_ids(there)
    assert {r["artifact_id"] for r in learned(imported, there, tensors=False)} == ids
    with pytest.raises(FileNotFoundError, match="not found"):
        learned(imported, there)


def _run_ids(env) -> list[int]:
    """The ids of the runs stored in ``env``'s results DB."""
    from sqlalchemy import select

    from store.models import Run

    with env.session_factory() as s:
        return list(s.scalars(select(Run.id)))


@pytest.mark.parametrize("family,d_model", [("transformer", 32), ("mamba2", 16)])
def test_export_model_loads_with_automodel(cli_env, tmp_path, capsys, family, d_model):
    from transformers import AutoModel

    from backend.cli import main
    from models_store.export import head_logits
    from worker.pipeline import load_run

    run_id = _train(cli_env, family, d_model)
    out = tmp_path / "exported"
    assert main(["export-model", str(run_id), "-o", str(out)]) == 0, capsys.readouterr()
    _, task, model = load_run(run_id, cli_env)
    auto = AutoModel.from_pretrained(out).eval()
    meta = json.loads((out / "layerscope.json").read_text())
    assert meta["family"] == family and meta["start_token"] and meta["class_names"] == ["0", "1"]
    x = task.generate(16, 3, seed=1, split="test").tokens
    ids = model.with_prefix(x)  # the START id in front, as in training
    with torch.no_grad():
        logits = head_logits(out, auto(input_ids=ids).last_hidden_state)[:, model.n_prefix :]
        torch.testing.assert_close(logits, model(x), rtol=1e-4, atol=1e-5)
    assert main(["export-model", str(run_id), "-o", str(out)]) == 1  # not over a written folder
    assert "is not an empty folder" in capsys.readouterr().err


def test_export_model_refuses_a_non_transformers_family(cli_env, tmp_path, capsys):
    from backend.cli import main

    run_id = _train(cli_env, "lstm", 16)
    assert main(["export-model", str(run_id), "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "lstm model has no transformers backbone" in err and "Traceback" not in err
    assert main(["export-model", "999", "-o", str(tmp_path / "y")]) == 1
    assert "run 999 not found" in capsys.readouterr().err


def test_cli_capture_writes_named_sites(cli_env, tmp_path, capsys):
    from safetensors.torch import load_file

    from backend.cli import main

    run_id = _train(cli_env, "gru", 16)
    out = tmp_path / "acts.safetensors"
    assert (
        main(
            [
                "capture",
                str(run_id),
                "--site",
                "embed",
                "--site",
                "blocks.1.resid_post",
                "--site",
                "blocks.0.state",
                "-o",
                str(out),
                "--n-sequences",
                "4",
            ]
        )
        == 0
    ), capsys.readouterr().err
    got = load_file(str(out))
    assert got["embed"].shape == (4, 16, 16) and got["blocks.1.resid_post"].shape == (4, 16, 16)
    assert got["blocks.0.state.h"].shape == (4, 16, 16) and got["tokens"].shape == (4, 16)
    assert main(["capture", str(run_id), "--site", "blocks.0.hook_resid", "-o", str(out)]) == 2
    assert "site name" in capsys.readouterr().err


def test_cli_capture_refuses_a_missing_folder_and_a_huge_capture_in_one_line(cli_env, tmp_path, monkeypatch):
    """``-o`` into a folder that does not exist, and sizes within the options' ranges whose capture
    would hold tens of GB (100,000 × 4,096): one line each, before anything large is allocated."""
    import models_store.cache
    from tests.cli_one_line import assert_one_line_error

    monkeypatch.delenv("LAYERSCOPE_DEBUG", raising=False)
    run_id = _train(cli_env, "gru", 16)
    missing = tmp_path / "nonexistent-dir" / "x.st"
    err = assert_one_line_error(["capture", str(run_id), "--site", "embed", "-o", str(missing)], "does not exist", rc=2)
    assert str(missing.parent) in err and not missing.parent.exists()
    calls: list[int] = []
    real_capture = models_store.cache.run_with_cache
    monkeypatch.setattr(models_store.cache, "run_with_cache", lambda m, x, s: calls.append(1) or real_capture(m, x, s))
    folder = tmp_path / "adir"
    folder.mkdir()
    err = assert_one_line_error(["capture", str(run_id), "--site", "embed", "-o", str(folder)], "is a folder", rc=2)
    assert calls == [] and list(folder.iterdir()) == []  # refused before capturing anything
    monkeypatch.setattr(models_store.cache, "run_with_cache", real_capture)

    batches: list[int] = []
    real = models_store.cache.run_with_cache
    monkeypatch.setattr(models_store.cache, "run_with_cache", lambda m, x, s: batches.append(len(x)) or real(m, x, s))
    big = ["capture", str(run_id), "--site", "embed", "--n-sequences", "100000", "--length", "4096"]
    err = assert_one_line_error(
        [*big, "-o", str(tmp_path / "big.st")], "a capture of 100,000 sequences of length 4,096"
    )
    assert "GiB, over the 4 GiB one capture may hold" in err and " GB" not in err and "--n-sequences" in err
    assert batches == [1] and not (tmp_path / "big.st").exists()  # only one sequence was ever run
