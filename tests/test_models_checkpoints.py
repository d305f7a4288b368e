"""CheckpointStore: content addressing, atomic layout, identical outputs after a round trip."""

import json

import pytest
import torch

from models_store import FAMILIES, ModelConfig, build_model
from models_store.checkpoints import CheckpointStore

V, C = 5, 3


def tiny(family: str, seed: int = 0):
    d = 32 if family == "transformer" else 16
    return build_model(ModelConfig(family=family, vocab_size=V, n_classes=C, n_layers=2, d_model=d), seed=seed)


@torch.no_grad()
@pytest.mark.parametrize("family", FAMILIES)
def test_round_trip_gives_identical_outputs(tmp_path, family):
    store = CheckpointStore(tmp_path / "store")
    model = tiny(family).eval()
    ckpt = store.save(model, provenance={"run": 1, "task": "parity"})
    assert len(ckpt) == 64 and store.exists(ckpt)
    loaded = store.load(ckpt)
    assert type(loaded) is type(model) and not loaded.training
    assert loaded.config == model.config
    x = torch.randint(0, V, (2, 15), generator=torch.Generator().manual_seed(0))
    assert torch.equal(loaded(x), model(x))
    assert store.provenance(ckpt)["provenance"] == {"run": 1, "task": "parity"}


def test_content_addressing(tmp_path):
    store = CheckpointStore(tmp_path)
    a, b = tiny("gru", seed=0), tiny("gru", seed=0)
    ida = store.save(a, provenance={"first": True})
    assert store.checkpoint_id(b) == ida
    assert store.save(b, provenance={"first": False}) == ida  # same content → same id, kept as is
    assert store.provenance(ida)["provenance"] == {"first": True}
    other = store.save(tiny("gru", seed=1))
    assert other != ida
    with torch.no_grad():
        a.head.bias.add_(1e-3)
    assert store.save(a) not in (ida, other)
    assert len(store.ids()) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    files = sorted(p.name for p in (tmp_path / ida).iterdir())
    assert files == ["config.json", "provenance.json", "weights.safetensors"]
    assert json.loads((tmp_path / ida / "config.json").read_text())["family"] == "gru"


def test_bad_ids_and_corruption(tmp_path):
    store = CheckpointStore(tmp_path)
    with pytest.raises(ValueError):
        store.load("../etc")
    with pytest.raises(FileNotFoundError):
        store.load("0" * 64)
    assert not store.exists("nope")
    ckpt = store.save(tiny("lstm"))
    cfg_file = tmp_path / ckpt / "config.json"
    cfg_file.write_text(cfg_file.read_text().replace('"n_layers": 2', '"n_layers":  2'))
    with pytest.raises(ValueError, match="corrupted"):
        store.load(ckpt)
    assert store.load(ckpt, verify=False).n_layers == 2
