"""TransformerLens-style site names: the name ↔ (site, layer) mapping and
``run_with_cache`` on a transformer and a Mamba."""

from __future__ import annotations

import pytest
import torch

from layerscope_core.sites import all_site_names, parse_site, residual_layer, site_name
from models_store import ModelConfig, build_model
from models_store.cache import run_with_cache
from models_store.capture import run_with_states
from models_store.states import StatefulModel


@pytest.mark.parametrize(
    "site,layer,name",
    [
        ("resid_post", -1, "embed"),
        ("resid_pre", 0, "blocks.0.resid_pre"),
        ("resid_post", 3, "blocks.3.resid_post"),
        ("state", 2, "blocks.2.state"),
        ("state:ssm", 1, "blocks.1.state.ssm"),
    ],
)
def test_names_round_trip(site, layer, name):
    assert site_name(site, layer) == name
    assert parse_site(name) == (site, layer)


@pytest.mark.parametrize("bad", ["blocks.x.resid_pre", "blocks.1.hook_resid_post", "emb", "blocks.1.resid_pre.ssm", ""])
def test_bad_names_are_refused(bad):
    with pytest.raises(ValueError, match="site name"):
        parse_site(bad)


def test_block_past_the_last_and_layer_rules():
    with pytest.raises(ValueError, match="past the last block"):
        parse_site("blocks.4.resid_post", n_layers=4)
    with pytest.raises(ValueError, match="only resid_post has -1"):
        site_name("resid_pre", -1)
    assert residual_layer("blocks.0.resid_pre") == -1 and residual_layer("blocks.2.resid_pre") == 1
    assert all_site_names(2) == [
        "embed",
        "blocks.0.resid_pre",
        "blocks.0.resid_post",
        "blocks.1.resid_pre",
        "blocks.1.resid_post",
    ]


@torch.no_grad()
def test_run_with_cache_residual_names_match_capture():
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(family="transformer", vocab_size=3, n_classes=2, n_layers=2, d_model=32, start_token=True)
    ).eval()
    x = torch.randint(0, 3, (2, 7))
    logits, cache = run_with_cache(model, x, ["blocks.1.resid_post", "embed", "blocks.1.resid_pre"])
    ref_logits, ref = run_with_states(model, x)
    assert list(cache) == ["blocks.1.resid_post", "embed", "blocks.1.resid_pre"]
    assert torch.equal(logits, ref_logits)
    assert torch.equal(cache["embed"], ref[-1]) and torch.equal(cache["blocks.1.resid_post"], ref[1])
    assert torch.equal(cache["blocks.1.resid_pre"], ref[0])
    with pytest.raises(ValueError, match="no recurrent state"):
        run_with_cache(model, x, ["blocks.0.state"])


@torch.no_grad()
def test_run_with_cache_reads_the_mamba_state_at_each_position():
    torch.manual_seed(0)
    model = build_model(ModelConfig(family="mamba", vocab_size=3, n_classes=2, n_layers=2, d_model=16)).eval()
    x = torch.randint(0, 3, (2, 6))
    _, cache = run_with_cache(model, x, ["blocks.1.state"])
    assert set(cache) == {"blocks.1.state.ssm", "blocks.1.state.conv"}
    ssm = cache["blocks.1.state.ssm"]
    assert ssm.shape[:2] == (2, 6) and ssm.dim() == 4
    twin = StatefulModel.from_model(model)
    trace = twin.trace(x)
    assert torch.equal(ssm[:, 4], twin.state_at(trace, 1, 4)["ssm"])
    _, every = run_with_cache(model, x)
    assert "blocks.0.state.conv" in every and "blocks.1.resid_post" in every


def test_rest_returns_and_accepts_site_names(api):
    """GET /runs/{id}/patching returns ``site_name`` and filters by names (``at``); probes name their site."""
    from tests.conftest import seed_runs
    from tests.test_api_patching import _rows
    from worker import persist

    rid = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,))[0]
    with api.factory() as s:
        persist.replace_patching_results(
            s, rid, [r for site in ("resid_pre", "resid_post", "state") for r in _rows(site)]
        )
    c = api.client
    rows = c.get(f"/api/runs/{rid}/patching").json()
    assert all(r["site_name"] == site_name(r["site"], r["layer"]) for r in rows)
    assert {r["site_name"] for r in rows if r["layer"] == -1} == {"embed"}
    picked = c.get(f"/api/runs/{rid}/patching", params={"at": ["blocks.1.state", "embed"]}).json()
    assert {(r["site"], r["layer"]) for r in picked} == {("state", 1), ("resid_post", -1)}
    assert len(picked) == sum((r["site"], r["layer"]) in {("state", 1), ("resid_post", -1)} for r in rows)
    bad = c.get(f"/api/runs/{rid}/patching", params={"at": "blocks.1.hook_resid_post"})
    assert bad.status_code == 422 and "site name" in bad.text
    probes = c.get(f"/api/runs/{rid}/probes").json()
    assert probes and all(
        p["site_name"] == ("embed" if p["layer"] == -1 else f"blocks.{p['layer']}.resid_post") for p in probes
    )


def test_patching_url_state_reads_and_writes_site_names():
    from dashboard.pages.patching import SPEC

    s = SPEC.decode("?runs=3&at=blocks.2.state")
    assert (s["site"], s["layer"], s["runs"]) == ("state", 2, [3])
    q = SPEC.encode(s)
    assert "at=blocks.2.state" in q and SPEC.decode(q) == s
    assert SPEC.decode("?at=embed")["layer"] == -1 and SPEC.decode("?at=embed")["site"] == "resid_post"
    assert SPEC.decode("?at=blocks.x.nope") == SPEC.defaults()
