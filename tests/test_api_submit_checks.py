"""Everything checkable at submit is checked at submit: layers and eval lengths
against the run's model are a 422 at the field, and nothing is queued."""

from __future__ import annotations

from sqlalchemy import update

from store.models import Run
from tests.conftest import seed_runs


def _learned_table_config(positions: int) -> dict:
    """A transformer's stored config (ModelConfig.to_dict()) with a learned position table."""
    from models_store import ModelConfig

    cfg = ModelConfig(
        family="transformer", vocab_size=4, n_classes=2, d_model=32, n_layers=4, learned_positions=positions
    )
    return cfg.to_dict()


def _with_weights(api) -> int:
    run_id = seed_runs(api.factory, families=("transformer",), tasks=("parity",), seeds=(0,), n_layers=4)[0]
    with api.factory() as s:
        s.execute(
            update(Run).where(Run.id == run_id).values(checkpoint_id="c" * 64, model_config=_learned_table_config(512))
        )
        s.commit()
    return run_id


def _total(api) -> int:
    return api.client.get("/api/jobs").json()["total"]


def test_layers_out_of_range_are_422_at_the_field(api) -> None:
    run_id = _with_weights(api)
    r = api.client.post("/api/jobs", json={"kind": "intervene", "params": {"run_id": run_id, "layers": [99, 1]}})
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "params", "layers"] and "[99]" in err["msg"] and "4-layer" in err["msg"]
    assert _total(api) == 0
    ok = api.client.post("/api/jobs", json={"kind": "intervene", "params": {"run_id": run_id, "layers": [-1, 3]}})
    assert ok.status_code == 201, ok.text


def test_eval_lengths_past_the_position_table_are_422(api) -> None:
    run_id = _with_weights(api)
    for kind, params, field in (
        ("probe", {"eval_lengths": [40, 1000]}, "eval_lengths"),
        ("intervene", {"eval_lengths": [2000]}, "eval_lengths"),
        ("patch", {"eval_length": 600}, "eval_length"),
    ):
        r = api.client.post("/api/jobs", json={"kind": kind, "params": {"run_id": run_id, **params}})
        assert r.status_code == 422, (kind, r.text)
        assert r.json()["detail"][0]["loc"] == ["body", "params", field]
        assert "511" in r.json()["detail"][0]["msg"]
    assert _total(api) == 0
