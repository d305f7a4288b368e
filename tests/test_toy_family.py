"""A sixth family is one registry entry plus its model file (tests/toy_family.py): once
registered it is in ``GET /api/meta``, in the dashboard's job form, and a smoke suite trains,
probes, edits and patches it end to end."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from layerscope_core.registry import family_names, get_family, register_family, unregister_family
from tests import toy_family
from tests.toy_family import NAME


@pytest.fixture
def toy():
    register_family(toy_family.FAMILY)
    try:
        yield toy_family.FAMILY
    finally:
        unregister_family(NAME)
    assert NAME not in family_names()


def test_registry_rejects_unknown_and_duplicate_families(toy):
    assert family_names()[-1] == NAME and get_family(NAME) is toy
    with pytest.raises(ValueError, match="unknown family 'nope'; known families: transformer, mamba"):
        get_family("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_family(toy)
    with pytest.raises(ValueError, match="built in"):
        unregister_family("gru")


def test_model_config_and_build_use_the_spec(toy):
    from models_store import ModelConfig, build_model

    cfg = ModelConfig(family=NAME, vocab_size=4, n_classes=2, param_target=20_000)
    assert cfg.d_model % 2 == 0
    model = build_model(cfg, seed=0)
    assert isinstance(model, toy_family.LinearRecurrentModel)
    assert model.n_params == toy_family.count_params(cfg, cfg.d_model) == cfg.n_params
    with pytest.raises(ValueError, match="must be even"):
        ModelConfig(family=NAME, vocab_size=4, n_classes=2, d_model=33)


def test_params_accept_a_registered_family_only_while_registered(toy):
    from pydantic import ValidationError

    from worker.job_params import TrainParams

    assert TrainParams(family=NAME, task="parity").lr == toy.default_lr
    unregister_family(NAME)
    with pytest.raises(
        ValidationError,
        match="Input should be 'transformer', 'mamba', 'mamba2', 'lstm', 'gru', 'lstm_stack' or 'gru_stack'",
    ):
        TrainParams(family=NAME, task="parity")
    register_family(toy)


def test_meta_lists_the_toy_family_with_its_capabilities(api, toy):
    body = api.client.get("/api/meta").json()
    fams = {f["name"]: f for f in body["families"]}
    assert list(fams)[:5] == ["transformer", "mamba", "mamba2", "lstm", "gru"]
    assert fams[NAME] == {
        "name": NAME,
        "label": toy.label,
        "kind": "rnn",
        "has_conv1d": False,
        "state_parts": [],
        "recurrent_state": False,
        "hf": False,
        "pretrained": False,
        "default_lr": 1e-3,
    }
    assert fams["mamba"]["has_conv1d"] and fams["lstm"]["state_parts"] == ["h", "c"]
    assert body["tasks"] == ["parity", "s3", "dyck", "code_depth"]
    assert body["presets"] == ["smoke", "quick", "paper", "pretrained", "paper-75s"]
    assert body["eval_lengths"] == [40, 60, 80, 100, 120]
    assert "pca_top_k" in body["methods"] and body["patch_sites"] == ["resid_pre", "resid_post", "state"]


def _options(component, name: str) -> list:
    """The options of the job-form widget ``name`` in a Dash layout tree."""
    stack = [component]
    while stack:
        c = stack.pop()
        if getattr(c, "id", None) == {"type": "jf", "name": name}:
            return [o["value"] for o in c.options]
        children = getattr(c, "children", None)
        stack.extend(children if isinstance(children, list) else [children] if children is not None else [])
    raise AssertionError(f"no widget {name}")


def test_job_form_offers_the_toy_family(toy):
    from dash import html

    from dashboard.pages.jobs import form_fields

    form = html.Div(form_fields("train"))
    assert _options(form, "family")[-1] == NAME
    assert NAME in _options(html.Div(form_fields("suite")), "families")
    assert _options(form, "preset") == ["smoke", "quick", "paper", "pretrained", "paper-75s"]


@pytest.mark.slow
def test_smoke_suite_trains_probes_and_patches_the_toy_family(toy, tmp_path):
    from store.models import InterventionResult, PatchingResult, ProbeResult, Run
    from worker.job_params import SuiteParams
    from worker.pipeline import load_run, local_env, run_suite

    env = local_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path / "store", device="cpu")
    ids = run_suite(SuiteParams(preset="smoke", families=[NAME], tasks=["parity"], max_steps=4), env)
    assert len(ids) == 1
    with env.session_factory() as s:
        run = s.get(Run, ids[0])
        assert run.family == NAME and run.status == "complete" and run.checkpoint_id
        probes = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run.id)).all()
        assert {(p.layer, p.eval_length) for p in probes} == {
            (layer, L) for layer in range(-1, run.n_layers) for L in (40, 60)
        }
        methods = {r.method for r in s.scalars(select(InterventionResult).where(InterventionResult.run_id == run.id))}
        assert {"project_out", "leace", "mean"} <= methods and "conv1d_removal" not in methods
        sites = {r.site for r in s.scalars(select(PatchingResult).where(PatchingResult.run_id == run.id))}
        assert sites == {"resid_pre", "resid_post"}  # no recurrent-state hook: the state site is skipped
    params, _, model = load_run(ids[0], env)
    assert params.family == NAME
    assert isinstance(model, toy_family.LinearRecurrentModel)


# -- nothing else moves: the recipe changes no preset, no claim, no other field of /api/meta ----


def test_the_presets_expand_as_before_with_the_family_registered():
    from tests.test_new_task import _expansions

    before = _expansions()
    register_family(toy_family.FAMILY)
    try:
        after = _expansions()
    finally:
        unregister_family(NAME)
    assert after == before
    assert NAME not in {p["family"] for runs in after.values() for p in runs}


@pytest.mark.parametrize("bundle", ["paper.layerscope.zip", "paper-steps.layerscope.zip"])
def test_the_shipped_bundles_claims_read_as_before_with_the_family_registered(bundle):
    import layerscope.results as lr
    from tests.test_new_task import ROOT, _claims

    with lr.open(ROOT / "examples" / bundle) as res:
        before = _claims(res)
        register_family(toy_family.FAMILY)
        try:
            after = _claims(res)
        finally:
            unregister_family(NAME)
    assert after == before


def test_api_meta_adds_the_family_and_nothing_else(api):
    before = api.client.get("/api/meta").json()
    register_family(toy_family.FAMILY)
    try:
        after = api.client.get("/api/meta").json()
    finally:
        unregister_family(NAME)
    assert [f["name"] for f in after["families"]] == [f["name"] for f in before["families"]] + [NAME]
    assert [f for f in after["families"] if f["name"] != NAME] == before["families"]
    assert {k: v for k, v in after.items() if k != "families"} == {k: v for k, v in before.items() if k != "families"}
