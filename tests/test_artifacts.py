"""Kept weights are content-addressed (models_store/artifacts.py): the same tensors and metadata
always give the same bytes and id. safetensors writes a metadata dict in hash-map order, which
varied from call to call, so each eval length's copy of one edit got an id of its own."""

from __future__ import annotations

import torch

from models_store.artifacts import ArtifactStore


def test_the_same_tensors_and_metadata_give_one_id(tmp_path):
    store = ArtifactStore(tmp_path)
    tensors = {"center": torch.arange(4.0), "removed": torch.ones(2, 4), "left": torch.zeros(4, 2)}
    meta = {"kind": "edit", "method": "inlp", "layer": 3, "eval_length": 40}
    ids = {store.save(tensors, meta) for _ in range(20)}
    assert len(ids) == 1 and len(list(store.dir.iterdir())) == 1
    assert store.save(tensors, {**meta, "layer": 2}) not in ids  # what differs still differs
    assert store.save(tensors) != store.save(tensors, meta)
