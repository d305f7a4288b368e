"""Your own model and your own data end to end: a tiny Llama-style and a tiny Mamba-2 checkpoint saved to folders and
a 200-row JSONL of labelled tokens go through ``layerscope task add``, a suite, the API and the
dashboard pages, and a bundle round trip into another store; probe directions are downloadable
there."""

from __future__ import annotations

import json

import httpx
import pytest
import torch
from safetensors.torch import load as st_load
from transformers import LlamaConfig, LlamaForCausalLM, Mamba2Config, Mamba2ForCausalLM

from tests.test_file_task import parity_rows, write_jsonl

L = 24


def _use(monkeypatch, root):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(root / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{root / 'results.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{root / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(root / "store"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def fresh_settings():
    """Settings are cached per process: read them afresh after this test's env changes."""
    from store.settings import get_settings

    yield
    get_settings.cache_clear()


def _client():
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from dashboard.api_client import ApiClient

    client = TestClient(create_app())

    def handler(request: httpx.Request) -> httpx.Response:  # the dashboard's client, answered by the app
        r = client.request(request.method, str(request.url), content=request.content, headers=request.headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return client, ApiClient("http://testserver", transport=httpx.MockTransport(handler))


def test_own_model_and_own_data_end_to_end(tmp_path, monkeypatch, capsys):
    from backend.cli import main

    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
        )
    ).save_pretrained(tmp_path / "tiny-llama")
    Mamba2ForCausalLM(
        Mamba2Config(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=2,
            state_size=4,
            expand=2,
            head_dim=8,
            num_heads=4,
            n_groups=1,
            chunk_size=8,
        )
    ).save_pretrained(tmp_path / "tiny-mamba2")
    data = write_jsonl(tmp_path / "labelled.jsonl", parity_rows())
    assert len(data.read_text().splitlines()) == 200

    _use(monkeypatch, tmp_path / "lab")
    assert main(["task", "add", str(data), "--name", "byo"]) == 0
    rc = main(
        [
            "suite",
            "--preset",
            "smoke",
            "--task",
            "byo",
            "--pretrained",
            str(tmp_path / "tiny-llama"),
            "--pretrained",
            str(tmp_path / "tiny-mamba2"),
            "--name",
            "byo_suite",
            "--device",
            "cpu",
            "--max-steps",
            "4",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()

    client, api = _client()
    assert "byo" in client.get("/api/meta").json()["tasks"]
    # the CLI's and the notebook API's task filters take the file task as the REST API does
    assert main(["runs", "list", "--task", "byo", "--json"]) == 0
    assert {r["task"] for r in json.loads(capsys.readouterr().out)} == {"byo"}
    import layerscope.results as lr

    assert set(lr.open(f"sqlite:///{tmp_path / 'lab' / 'results.db'}").probes(task="byo")["task"]) == {"byo"}
    runs = {r["family"]: r for r in api.runs(task=["byo"], suite=["byo_suite"])["items"]}
    assert set(runs) == {"transformer", "mamba2"}
    assert {r["pretrained"] for r in runs.values()} == {str(tmp_path / "tiny-llama"), str(tmp_path / "tiny-mamba2")}
    for fam, run in runs.items():
        assert run["n_layers"] == 2 and {p["eval_length"] for p in api.run_probes(run["id"])} == {L}
        sites = {p["site"] for p in api.run_patching(run["id"])}
        assert sites == ({"resid_pre", "resid_post"} if fam == "transformer" else {"resid_pre", "resid_post", "state"})
        weights = api.run_weights(run["id"])
        probe = next(w for w in weights if w["kind"] == "probe" and w["layer"] == 1)
        got = client.get(f"/api/artifacts/{probe['artifact_id']}")
        assert got.status_code == 200 and st_load(got.content)["directions"].shape[0] == 2

    # the dashboard pages, through the real API

    from dashboard.all_pages import PAGES
    from dashboard.app import render_page
    from dashboard.pages import runs as runs_page

    for page in PAGES:
        body, _ = render_page(page.path, "?suite=byo_suite", api=api, path_for=lambda p: p)
        assert body is not None
    jobs_body, _ = render_page("/jobs", "", api=api, path_for=lambda p: p)
    assert "'byo'" in str(jobs_body)  # the file task is a choice of the jobs form
    detail = str(runs_page.run_detail(api, runs["mamba2"]["id"], path_for=lambda p: p))
    assert "/api/artifacts/" in detail and "byo" in detail
    assert any(r["task"] == "byo" for r in api.curves(task=["byo"]))

    # a bundle round trip into another lab: results, probe weights and the task's data travel
    bundle = tmp_path / "byo.zip"
    assert main(["export", "--suite", "byo_suite", "-o", str(bundle), "--artifacts"]) == 0
    _use(monkeypatch, tmp_path / "elsewhere")
    assert main(["import", str(bundle)]) == 0
    client2, api2 = _client()
    assert "byo" in client2.get("/api/meta").json()["tasks"]
    again = {r["family"]: r for r in api2.runs(task=["byo"])["items"]}
    assert set(again) == {"transformer", "mamba2"}
    # read straight from the bundle on a machine whose store has no such task: known from its runs
    _use(monkeypatch, tmp_path / "reader")
    assert set(lr.open(bundle).probes(task="byo")["task"]) == {"byo"}
    with pytest.raises(ValueError, match="task 'byoo' unknown; one of parity"):
        lr.open(bundle).probes(task="byoo")
    _use(monkeypatch, tmp_path / "elsewhere")
    w2 = api2.run_weights(again["transformer"]["id"])
    assert {w["artifact_id"] for w in w2} == {w["artifact_id"] for w in api.run_weights(runs["transformer"]["id"])}
    assert client2.get(f"/api/artifacts/{w2[0]['artifact_id']}").status_code == 200
    from science.tasks import get_task

    assert (
        get_task("byo").params["sha256"]
        == json.loads((tmp_path / "lab" / "store" / "tasks" / "names" / "byo.json").read_text())["sha256"]
    )
