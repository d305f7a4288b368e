"""A new intervention method in one place (docs/DESIGN.md "Add an intervention method"): a class
that declares its parameter ``k``, registered here and removed afterwards, gets the submitted
``k`` through the submit checks, the stored job params and the worker's measurement, into its
fit and into the stored rows' ``k``; a ``k`` out of its bounds or wider than the run is a 422 at
its field; and nothing else moves — the presets, ``GET /api/meta`` beyond the new name, and the
other methods' rows."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
from pydantic import ValidationError
from sqlalchemy import select

from layerscope_core import registry
from layerscope_core.method_params import MethodParam
from science.edit_methods import EditMethod
from science.edits import projection_edit
from store.models import InterventionResult, Job
from tests.test_api_input_kinds import assert_422_at
from worker.job_params import InterveneParams, SuiteParams, TrainParams
from worker.pipeline import intervene, local_env, train
from worker.presets import PRESETS, expand_suite

NAME = "random_k"
D_MODEL = 16
# the columns of a row that say what was measured (config_hash and settings_id name the request)
SAME = [c.name for c in InterventionResult.__table__.columns if c.name not in ("id", "config_hash", "settings_id")]


class RandomK(EditMethod):
    """Project out ``k`` random orthonormal directions around the mean (the recipe's example)."""

    name = NAME
    params = (MethodParam("k", int, 2, "random directions removed", ge=1, le=64, width_bound=True),)

    def __init__(self) -> None:
        self.seen: list[int] = []  # the k of every fit

    def fit(self, X, y, n_classes, *, k: int = 2, seed: int = 0, **_):
        self.seen.append(k)
        g = torch.Generator().manual_seed(seed)
        Q, _ = torch.linalg.qr(torch.randn(X.shape[1], k, generator=g, dtype=torch.float64))
        return projection_edit(self.name, X.double().mean(0), Q.to(X.device))


@contextmanager
def registered():
    method = registry.register_method(NAME, RandomK())
    try:
        yield method
    finally:
        registry.unregister_method(NAME)
    assert NAME not in registry.method_names()


def _rows(factory, run_id: int) -> dict[tuple, dict]:
    with factory() as s:
        rows = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run_id)).all()
        return {(r.method, r.layer, r.eval_length): {c: getattr(r, c) for c in SAME} for r in rows}


def _post(api, params: dict):
    return api.client.post("/api/jobs", json={"kind": "intervene", "params": params})


def test_k_reaches_the_fit_and_the_rows_and_a_bad_k_is_a_422_at_its_field(api) -> None:
    env = local_env(api.settings.resolved_db_url, api.settings.resolved_store_dir, device="cpu")
    run_id = train(
        TrainParams(
            family="gru",
            task="parity",
            n_layers=2,
            d_model=D_MODEL,
            train_length=12,
            max_steps=4,
            batch_size=16,
            eval_every=4,
            n_eval_sequences=32,
            warmup_steps=0,
            curriculum_start=None,
            measure=None,
        ),
        env,
    )
    common = {"run_id": run_id, "eval_lengths": [12], "n_probe_sequences": 40, "n_permutations": 100, "conv1d": False}
    intervene(InterveneParams(**common, methods=["pca_top_k", "mean"], pca_k=3), env)
    before = _rows(api.factory, run_id)
    assert {key[0] for key in before} == {"pca_top_k", "mean"}

    with registered() as method:
        body = {**common, "methods": ["pca_top_k", "mean", NAME], "pca_k": 3}
        for value, words in [
            (0, "at least 1"),
            (65, "at most 64"),
            (D_MODEL + 1, f"d_model {D_MODEL}"),
            (2.5, "integer"),
        ]:
            r = _post(api, {**body, "method_params": {NAME: {"k": value}}})
            assert_422_at(api, r, ["body", "params", "method_params", NAME, "k"])
            assert words in r.json()["detail"][0]["msg"], r.json()
        r = _post(api, {**body, "method_params": {NAME: {"q": 1}}})
        assert_422_at(api, r, ["body", "params", "method_params", NAME, "q"])
        with api.factory() as s:
            assert s.scalars(select(Job)).all() == []  # nothing refused was queued

        r = _post(api, {**body, "method_params": {NAME: {"k": 5}}})
        assert r.status_code == 201, r.text
        with api.factory() as s:
            stored = s.get(Job, r.json()["id"]).params
        assert stored["method_params"] == {NAME: {"k": 5}}
        intervene(InterveneParams.model_validate(stored), env)  # the job as the worker reads it

        assert method.seen and set(method.seen) == {5}  # every layer's fit got the submitted k
        after = _rows(api.factory, run_id)
        mine = [row for key, row in after.items() if key[0] == NAME]
        assert len(mine) == 2 and all(row["k"] == 5 and row["rank_removed"] == 5 for row in mine)
        assert {key: row for key, row in after.items() if key[0] != NAME} == before  # the others: unchanged


def test_a_new_method_changes_no_preset_default_or_other_vocabulary() -> None:
    def snapshot():
        suites = {
            p: [t.config_hash() for t in expand_suite(SuiteParams(preset=p))] for p in PRESETS if p != "pretrained"
        }
        meta = {k: v for k, v in registry.meta().items() if k != "methods"}
        return suites, meta, InterveneParams(run_id=1).config_hash(), registry.meta()["methods"]

    suites, meta, intervene_hash, methods = snapshot()
    with registered():
        now = snapshot()
        assert now[:3] == (suites, meta, intervene_hash)  # defaults stay the built-ins
        assert now[3] == [*methods, NAME]


def test_the_cli_and_the_params_carry_k_and_name_the_field() -> None:
    from backend.cli.common import CliError
    from backend.cli.remeasure import method_params
    from backend.cli.validation import validation_message

    assert method_params([f"{NAME}.k=4", "inlp.x=null"]) == {NAME: {"k": 4}, "inlp": {"x": None}}
    for bad in ("k=4", f"{NAME}.k", f"{NAME}.k=four"):
        with pytest.raises(CliError, match="--param"):
            method_params([bad])
    with registered():
        p = InterveneParams(run_id=1, methods=[NAME], method_params={NAME: {"k": 4}})
        assert p.method_settings() == {NAME: {"k": 4}}
        assert InterveneParams(run_id=1, methods=[NAME]).method_settings() == {NAME: {"k": 2}}  # its default
        with pytest.raises(ValidationError) as e:
            InterveneParams(run_id=1, methods=[NAME], method_params={NAME: {"k": 0}})
        assert validation_message(e.value).startswith(f"--param {NAME}.k: k must be at least 1")
    with pytest.raises(ValidationError) as e:  # a method not registered: the key named, no "[key]"
        InterveneParams(run_id=1, method_params={"no_such": {"k": 4}})
    line = validation_message(e.value)
    assert line.startswith("--param no_such: ") and "[key]" not in line


def test_the_jobs_form_sends_method_params_and_shows_their_422_at_the_field() -> None:
    from dashboard.jobs_form import build_params, field_errors

    sent = build_params("intervene", {"run_id": "3", "method_params": f"{NAME}.k=5, inlp.max_rounds=2"})
    assert sent["method_params"] == {NAME: {"k": 5}, "inlp": {"max_rounds": 2}}
    assert build_params("intervene", {"run_id": "3", "method_params": "k=5"})["method_params"] == "k=5"  # as typed
    by_field, other = field_errors([{"loc": ["body", "params", "method_params", NAME, "k"], "msg": "too wide"}])
    assert by_field == {"method_params": "too wide"} and other == []
