"""Every job parameter that could only fail in the worker is a 422 at its field at submit, and
nothing is stored: widths off a family's grid, models no worker holds, a missing pretrained
folder, a learned position table shorter than the run's sequences, values checked against the
named run (pca_k, patching sites, methods), and the loose inputs of a fresh user's report
(suite seeds, booleans as numbers, a body that is not UTF-8, the ``import`` job kind)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from sqlalchemy import update

from models_store.model_config import MAX_PARAMS, ModelConfig
from store.models import Job, Run
from tests.conftest import seed_runs
from tests.test_api_input_kinds import assert_422_at, counts, post_raw
from worker.job_params import MeasureParams, TrainParams

TRANSFORMER = {"family": "transformer", "task": "parity", "max_steps": 2}


def _run(api, family: str, d_model: int, model_config: dict | None = None) -> int:
    """A stored run of ``family`` with weights (a checkpoint id) and width ``d_model``."""
    run_id = seed_runs(api.factory, families=(family,), tasks=("parity",), seeds=(0,), n_layers=4)[0]
    with api.factory() as s:
        s.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(checkpoint_id="c" * 64, d_model=d_model, model_config=model_config or {})
        )
        s.commit()
    return run_id


def _refused(api, kind: str, params: dict, loc: list, *words: str) -> dict:
    """POST the job: a 422 whose first error is at ``loc`` and says ``words``; nothing stored."""
    before = counts(api)
    r = api.client.post("/api/jobs", json={"kind": kind, "params": params})
    assert_422_at(api, r, loc)
    err = next(e for e in r.json()["detail"] if e["loc"][: len(loc)] == loc)
    for w in words:
        assert w in err["msg"], (w, err)
    assert "pydantic.dev" not in err["msg"] and "\n" not in err["msg"], err  # one line, not a dump
    assert counts(api) == before  # no job row
    return err


def _accepted(api, kind: str, params: dict) -> dict:
    r = api.client.post("/api/jobs", json={"kind": kind, "params": params})
    assert r.status_code == 201, r.text
    return r.json()


# ----------------------------------------------------------------------------- the model a train job builds


@pytest.mark.parametrize(
    "d_model, words",
    [(7, ("d_model=7", "multiple of n_heads=4")), (16, ("d_model=16", "rotary dims", "must be even and >= 2"))],
)
def test_transformer_width_off_the_grid_is_422_at_d_model(api, d_model, words) -> None:
    _refused(api, "train", {**TRANSFORMER, "d_model": d_model}, ["body", "params", "d_model"], *words)
    _accepted(api, "train", {**TRANSFORMER, "d_model": 32})


def test_models_no_worker_holds_are_422(api) -> None:
    _refused(api, "train", {**TRANSFORMER, "param_target": 10**10}, ["body", "params", "param_target"], f"{MAX_PARAMS}")
    _refused(
        api,
        "train",
        {**TRANSFORMER, "n_layers": 64, "d_model": 8192},
        ["body", "params", "d_model"],
        "over the limit of 1,000,000,000",
    )
    _refused(  # a target no width of the grid meets: the worker's "no width within ±10%", at submit
        api, "train", {**TRANSFORMER, "param_target": 1000}, ["body", "params", "param_target"], "within ±10%"
    )


def test_the_model_bound_leaves_the_presets_far_within() -> None:
    from worker.presets import PRESETS

    with pytest.raises(ValueError, match="at most"):
        ModelConfig(family="lstm", vocab_size=2, n_classes=2, param_target=MAX_PARAMS + 1)
    targets = [830_000]  # TrainParams' default, the study's budget
    for preset in PRESETS.values():
        targets.append(preset.get("train", {}).get("param_target", 830_000))
        for table in (preset.get("task_train", {}), *preset.get("family_train", {}).values()):
            targets += [v["param_target"] for v in table.values() if isinstance(v, dict) and "param_target" in v]
    assert max(targets) * 1000 <= MAX_PARAMS


def test_a_missing_pretrained_folder_in_a_train_job_is_422(api) -> None:
    err = _refused(
        api,
        "train",
        {**TRANSFORMER, "pretrained": "/nonexistent/model"},
        ["body", "params", "pretrained"],
        "no such local folder",
    )
    assert err["input"] == "/nonexistent/model"


@pytest.mark.parametrize(
    "extra, longest",
    [
        ({"learned_positions": 10, "measure": None}, "train_length 40 + the START token: 41"),
        ({"learned_positions": 10}, "measure.eval_lengths 120"),  # the default measurement's longest
        ({"learned_positions": 50, "measure": {"eval_lengths": [40, 120]}}, "121 positions"),
        ({"learned_positions": 60, "measure": {"eval_lengths": [40], "patch_eval_length": 80}}, "patch_eval_length"),
    ],
)
def test_a_learned_position_table_shorter_than_the_sequences_is_422(api, extra, longest) -> None:
    _refused(api, "train", {**TRANSFORMER, **extra}, ["body", "params", "learned_positions"], longest)


def test_a_learned_position_table_that_fits_is_accepted(api) -> None:
    _accepted(api, "train", {**TRANSFORMER, "learned_positions": 121, "measure": {"eval_lengths": [40, 120]}})


def test_a_train_jobs_measurement_is_checked_against_its_model(api) -> None:
    _refused(
        api,
        "train",
        {**TRANSFORMER, "d_model": 32, "measure": {"pca_k": 64}},
        ["body", "params", "measure", "pca_k"],
        "d_model 32",
    )
    _refused(
        api,
        "train",
        {**TRANSFORMER, "measure": {"patch_sites": ["state"]}},
        ["body", "params", "measure", "patch_sites"],
        "transformer has no such state",
    )
    _accepted(api, "train", {**TRANSFORMER, "d_model": 32, "measure": {"pca_k": 64, "methods": ["mean"]}})


def test_field_errors_are_one_line_in_the_cli_too() -> None:
    """The same checks hold wherever the params are built (the CLI prints loc: msg)."""
    with pytest.raises(ValidationError) as e:
        TrainParams(family="transformer", task="parity", d_model=7)
    assert [err["loc"] for err in e.value.errors()] == [("d_model",)]
    assert not e.value.errors()[0]["msg"].startswith("Value error")


# ----------------------------------------------------------------------------- checked against the named run


def test_pca_k_wider_than_the_run_is_422(api) -> None:
    run_id = _run(api, "lstm", 39)
    _refused(api, "intervene", {"run_id": run_id, "pca_k": 4000}, ["body", "params", "pca_k"], "d_model 39")
    _accepted(api, "intervene", {"run_id": run_id, "pca_k": 4000, "methods": ["mean"]})  # pca_top_k not run
    _accepted(api, "intervene", {"run_id": run_id, "pca_k": 39})


def test_state_patching_on_a_transformer_is_422(api) -> None:
    run_id = _run(api, "transformer", 32, {"max_position_embeddings": 512})
    _refused(api, "patch", {"run_id": run_id, "sites": ["state"]}, ["body", "params", "sites"], "no such state")
    _accepted(api, "patch", {"run_id": run_id, "sites": ["state", "resid_post"]})  # the state site skipped
    lstm = _run(api, "lstm", 39)
    _refused(api, "patch", {"run_id": lstm, "sites": ["state:ssm"]}, ["body", "params", "sites"], "lstm")
    _accepted(api, "patch", {"run_id": lstm, "sites": ["state"]})


def test_an_intervene_job_with_nothing_to_measure_is_422(api) -> None:
    run_id = _run(api, "lstm", 39)
    _refused(api, "intervene", {"run_id": run_id, "methods": []}, ["body", "params", "methods"], "nothing to measure")


def _stored_config(family: str, d_model: int, **fields) -> dict:
    """The model_config a worker stores for a scratch run (ModelConfig.to_dict())."""
    from models_store import ModelConfig

    return ModelConfig(family=family, vocab_size=4, n_classes=2, d_model=d_model, n_layers=2, **fields).to_dict()


def test_position_tables_are_the_runs_own(api) -> None:
    """A recurrent or rotary model has no position table (rotary angles exist at any position);
    a learned one bounds a transformer's lengths."""
    gru = _run(api, "gru", 32, _stored_config("gru", 32))
    _accepted(api, "probe", {"run_id": gru, "eval_lengths": [3000]})
    rotary = _run(api, "transformer", 32, _stored_config("transformer", 32, max_position_embeddings=512))
    _accepted(api, "probe", {"run_id": rotary, "eval_lengths": [40, 1000]})
    learned = _run(api, "transformer", 32, _stored_config("transformer", 32, learned_positions=61))
    _refused(api, "probe", {"run_id": learned, "eval_lengths": [40, 80]}, ["body", "params", "eval_lengths"], "learned")
    _accepted(api, "probe", {"run_id": learned, "eval_lengths": [40, 60]})


def test_a_pretrained_gpt2s_table_is_read_at_submit_as_the_worker_reads_it(api, tmp_path, monkeypatch) -> None:
    """GPT-2 keeps its table size as ``n_positions``: the 422 and the worker's check read the same
    model (the bug: the API looked for ``max_position_embeddings`` only and let the job through)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from models_store.positions import learned_position_limit
    from models_store.pretrained import load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2)).save_pretrained(
        tmp_path / "gpt2-p32"
    )
    model = load_pretrained(tmp_path / "gpt2-p32", n_classes=2, task_vocab_size=4)
    assert learned_position_limit(model) == 32
    run_id = _run(api, "transformer", 16, model.config.to_dict())
    _refused(api, "probe", {"run_id": run_id, "eval_lengths": [31, 32]}, ["body", "params", "eval_lengths"], "[32]")
    _accepted(api, "probe", {"run_id": run_id, "eval_lengths": [31]})  # 31 + the START token = 32


# ----------------------------------------------------------------------------- loose inputs


def test_negative_suite_seeds_are_422_at_the_seed(api) -> None:
    _refused(api, "suite", {"preset": "smoke", "seeds": [-5]}, ["body", "params", "seeds", 0], "greater than")
    _refused(api, "suite", {"preset": "smoke", "seeds": [0, 2**31]}, ["body", "params", "seeds", 1], "less than")


@pytest.mark.parametrize(
    "field, value",
    [("seed", True), ("seed", "1"), ("max_steps", False), ("lr", True), ("max_seconds", "60")],
)
def test_booleans_and_strings_are_not_numbers(api, field, value) -> None:
    _refused(api, "train", {**TRANSFORMER, field: value}, ["body", "params", field], "valid")


def test_booleans_are_not_numbers_in_lists_or_other_kinds(api) -> None:
    _refused(api, "suite", {"preset": "smoke", "seeds": [0, True]}, ["body", "params", "seeds", 1], "integer")
    _refused(api, "probe", {"run_id": True}, ["body", "params", "run_id"], "integer")
    _refused(api, "train", {**TRANSFORMER, "eval_every": 10**12}, ["body", "params", "eval_every"], "less than")


def test_a_body_that_is_not_utf8_is_400_naming_the_body(api) -> None:
    before = counts(api)
    raw = b'{"kind":"train","params":{"family":"gru","task":"parity","name":"\xff"}}'
    r = post_raw(api, "/api/jobs", raw)
    assert r.status_code == 400, r.text
    assert "request body" in r.json()["detail"] and "UTF-8" in r.json()["detail"]
    assert counts(api) == before
    escaped = post_raw(api, "/api/jobs", '{"kind":"train","params":{"family":"gru","task":"parity","name":"\\ud800"}}')
    assert_422_at(api, escaped, ["body", "params", "name"])  # an escaped lone surrogate: still at its field


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_a_utf16_or_utf32_body_is_400_naming_its_encoding(api, encoding) -> None:
    # RFC 8259 section 8.1: JSON between systems is UTF-8; Python's json would read these
    before = counts(api)
    body = json.dumps({"kind": "train", "params": {"family": "gru", "task": "parity"}}).encode(encoding)
    r = post_raw(api, "/api/jobs", body)
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert detail.startswith("request body: UTF-") and "not UTF-8" in detail
    assert counts(api) == before


def test_a_utf8_byte_order_mark_is_ignored(api) -> None:
    r = post_raw(api, "/api/views", b"\xef\xbb\xbf" + json.dumps({"title": "bom", "page": "/curves"}).encode())
    assert r.status_code == 201, r.text


def test_import_jobs_are_listed_and_filtered(api) -> None:
    from typing import get_args

    from backend.api.schemas import JobKind
    from backend.bundle import IMPORT_JOB_KIND

    assert IMPORT_JOB_KIND in get_args(JobKind)
    with api.factory() as s:
        s.add(Job(kind=IMPORT_JOB_KIND, state="succeeded", params={"suite": "x"}, config_hash="0" * 64))
        s.commit()
    r = api.client.get("/api/jobs", params={"kind": "import"})
    assert r.status_code == 200, r.text
    assert [j["kind"] for j in r.json()["items"]] == ["import"]


def test_a_left_out_measure_measures_everything_and_null_trains_only(api) -> None:
    """What the schema says is what a train job does."""
    full = _accepted(api, "train", TRANSFORMER)["params"]["measure"]
    assert full == MeasureParams().model_dump(mode="json")
    assert _accepted(api, "train", {**TRANSFORMER, "seed": 1, "measure": None})["params"]["measure"] is None
    schema = api.client.get("/api/openapi.json").json()["components"]["schemas"]["TrainParams"]
    description = schema["properties"]["measure"]["description"]
    assert "left out: every measurement" in description and "null = train only" in description
