"""Content-addressed checkpoint store.

Layout: ``root/<checkpoint_id>/{weights.safetensors, config.json, provenance.json}`` with

    checkpoint_id = sha256(weights.safetensors bytes + b"\\0" + config.json bytes)  (64 hex chars)

``config.json`` is ``ModelConfig.to_dict()`` as canonical JSON (sorted keys), so the same
weights and config always give the same id, and a changed byte gives another. The provenance
(who trained it, on what) is stored beside but is *not* part of the id: saving identical
content twice keeps the first provenance. Writes go to a temporary folder inside ``root`` that
is renamed into place, so a reader never sees a half-written checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from models_store.base import LayerwiseModel
from models_store.families import build_model
from models_store.model_config import ModelConfig

WEIGHTS = "weights.safetensors"
CONFIG = "config.json"
PROVENANCE = "provenance.json"
_ID_RE = re.compile(r"^[0-9a-f]{64}$")


def _weights_bytes(model: LayerwiseModel) -> bytes:
    """``model.state_dict()`` serialised by safetensors (CPU, contiguous, no shared storage)."""
    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu")
        ptr = t.untyped_storage().data_ptr()
        whole = t.is_contiguous() and t.untyped_storage().nbytes() == t.numel() * t.element_size()
        if ptr in seen or not whole:
            t = t.contiguous().clone()
        seen.add(t.untyped_storage().data_ptr())
        tensors[name] = t
    return st_save(tensors)


def _config_bytes(cfg: ModelConfig) -> bytes:
    return json.dumps(cfg.to_dict(), sort_keys=True, indent=1, allow_nan=False).encode()


def _digest(weights: bytes, config: bytes) -> str:
    h = hashlib.sha256()
    h.update(weights)
    h.update(b"\0")
    h.update(config)
    return h.hexdigest()


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class CheckpointStore:
    """Save and load ``LayerwiseModel``s by content hash under ``root`` (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, checkpoint_id: str) -> Path:
        """Folder of ``checkpoint_id`` (it may not exist).

        Raises:
            ValueError: ``checkpoint_id`` is not 64 lowercase hex characters.
        """
        if not isinstance(checkpoint_id, str) or not _ID_RE.match(checkpoint_id):
            raise ValueError(f"checkpoint id must be 64 lowercase hex characters, got {checkpoint_id!r}")
        return self.root / checkpoint_id

    def exists(self, checkpoint_id: str) -> bool:
        """Whether a complete checkpoint with this id is stored (False for malformed ids)."""
        try:
            p = self.path(checkpoint_id)
        except ValueError:
            return False
        return (p / WEIGHTS).is_file() and (p / CONFIG).is_file()

    def intact(self, checkpoint_id: str) -> bool:
        """Whether the stored files of ``checkpoint_id`` hash to it (False when missing or malformed)."""
        if not self.exists(checkpoint_id):
            return False
        p = self.path(checkpoint_id)
        return _digest((p / WEIGHTS).read_bytes(), (p / CONFIG).read_bytes()) == checkpoint_id

    def ids(self) -> list[str]:
        """Every stored checkpoint id, sorted."""
        return sorted(p.name for p in self.root.iterdir() if _ID_RE.match(p.name) and self.exists(p.name))

    def checkpoint_id(self, model: LayerwiseModel) -> str:
        """The id ``save`` would give ``model`` (nothing is written)."""
        return _digest(_weights_bytes(model), _config_bytes(model.config))

    def save(self, model: LayerwiseModel, provenance: dict[str, Any] | None = None) -> str:
        """Store ``model`` (weights + config + provenance); returns its checkpoint id.

        Args:
            model: any ``LayerwiseModel`` (scratch or pretrained-based).
            provenance: JSON-serialisable facts about the model (run config, steps, …);
                values JSON cannot encode are written with ``str``.

        Raises:
            TypeError: ``model`` is not a ``LayerwiseModel``.
        """
        if not isinstance(model, LayerwiseModel):
            raise TypeError(f"expected a LayerwiseModel, got {type(model).__name__}")
        weights, config = _weights_bytes(model), _config_bytes(model.config)
        ckpt_id = _digest(weights, config)
        if self.exists(ckpt_id):
            if self.intact(ckpt_id):
                return ckpt_id
            shutil.rmtree(self.path(ckpt_id))  # a corrupted copy under this id: this save replaces it
        meta = {
            "checkpoint_id": ckpt_id,
            "provenance": provenance or {},
            "saved_at": datetime.now(UTC).isoformat(),
            "n_params": model.n_params,
            "torch_version": torch.__version__,
            "transformers_version": transformers.__version__,
        }
        tmp = self.root / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            _write(tmp / WEIGHTS, weights)
            _write(tmp / CONFIG, config)
            _write(tmp / PROVENANCE, json.dumps(meta, sort_keys=True, indent=1, default=str).encode())
            try:
                os.rename(tmp, self.root / ckpt_id)
            except OSError:
                if not self.exists(ckpt_id):  # not a concurrent save of the same content
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return ckpt_id

    def _require(self, checkpoint_id: str) -> Path:
        p = self.path(checkpoint_id)
        if not self.exists(checkpoint_id):
            raise FileNotFoundError(f"checkpoint {checkpoint_id} not found in {self.root}")
        return p

    def config(self, checkpoint_id: str) -> ModelConfig:
        """The stored ``ModelConfig``.

        Raises:
            ValueError: malformed id; FileNotFoundError: unknown id.
        """
        p = self._require(checkpoint_id)
        return ModelConfig.from_dict(json.loads((p / CONFIG).read_text()))

    def provenance(self, checkpoint_id: str) -> dict[str, Any]:
        """The provenance record: ``{"provenance": <as saved>, "saved_at", "n_params", versions}``.

        Raises:
            ValueError: malformed id; FileNotFoundError: unknown id.
        """
        p = self._require(checkpoint_id)
        f = p / PROVENANCE
        return json.loads(f.read_text()) if f.is_file() else {}

    def load(self, checkpoint_id: str, map_location: str | torch.device = "cpu", verify: bool = True) -> LayerwiseModel:
        """Rebuild the model (``build_model`` from the stored config, then its weights), in eval mode.

        Pretrained-based checkpoints rebuild from the stored transformers config: no hub access.

        Args:
            checkpoint_id: an id returned by ``save``.
            map_location: device to put the model on.
            verify: recompute the content hash and compare it with the id.

        Raises:
            ValueError: malformed id, or (``verify``) stored bytes that do not hash to the id.
            FileNotFoundError: unknown id.
        """
        p = self._require(checkpoint_id)
        weights, config = (p / WEIGHTS).read_bytes(), (p / CONFIG).read_bytes()
        if verify and _digest(weights, config) != checkpoint_id:
            raise ValueError(f"checkpoint {checkpoint_id} is corrupted: its files do not hash to its id")
        cfg = ModelConfig.from_dict(json.loads(config))
        model = build_model(cfg)
        model.load_state_dict(st_load(weights), strict=True)
        return model.to(map_location).eval()
