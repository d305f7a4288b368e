"""A run of a model built from a transformers config (``--from-config``), exported with its
weights, imports into another home with them: the import checks the weights' shapes against the
model its config builds on the meta device, where the wrapper's one-forward check of the
embedding cannot run (it raised a traceback before)."""

from __future__ import annotations

import pytest

from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from store.migrate import init_db
from store.models import Run
from store.session import make_engine, make_sessionmaker
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite


def _config(family: str, path) -> str:
    from transformers import GPTNeoXConfig, MambaConfig

    if family == "mamba":
        cfg = MambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=4)
    else:
        cfg = GPTNeoXConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
        )
    cfg.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("family", ["gpt_neox", "mamba"])
def test_a_from_config_run_exported_with_weights_imports_with_them(tmp_path, family):
    folder = _config(family, tmp_path / "model")
    env = local_env(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "store-a", device="cpu")
    params = SuiteParams(
        preset="smoke", tasks=["parity"], from_config=[folder], max_steps=2, name="byo", parts=["probes"]
    )
    (run_id,) = run_suite(params, env)
    out = tmp_path / "byo.layerscope.zip"
    with env.session_factory() as s:
        manifest = export_bundle(s, "byo", out, weights=True, store_dir=env.store_dir)
        ckpt = s.get(Run, run_id).checkpoint_id
    assert manifest["weights"] is True and ckpt
    url = f"sqlite:///{tmp_path / 'b.db'}"
    init_db(url)
    factory = make_sessionmaker(make_engine(url))
    with factory() as s:
        import_bundle(s, out, store_dir=tmp_path / "store-b")
        (run,) = s.query(Run).all()
    assert run.checkpoint_id == ckpt and run.suite == "byo"
    assert (tmp_path / "store-b" / ckpt / "weights.safetensors").is_file()
    weights = "weights.safetensors"
    assert (tmp_path / "store-b" / ckpt / weights).read_bytes() == (tmp_path / "store-a" / ckpt / weights).read_bytes()


def test_a_checkpoint_config_that_builds_no_model_is_a_problem_not_a_traceback():
    from models_store.binding import shape_problem

    why = shape_problem({"family": "transformer", "n_layers": -3, "d_model": 8}, {})
    assert why is not None and why.startswith("its config builds no model here")
