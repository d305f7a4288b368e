"""Sequence models with named residual-stream hook points (torch + transformers only).

See docs/DESIGN.md "Models": ``ModelConfig`` → ``build_model`` → ``LayerwiseModel``; capture and
edits in ``models_store.capture``, Conv1D removal in ``models_store.conv1d``, the checkpoint
store in ``models_store.checkpoints``, pretrained loading in ``models_store.pretrained``.
"""

from models_store.base import LayerwiseModel, layer_name
from models_store.families import build_model
from models_store.model_config import FAMILIES, ModelConfig

__all__ = ["FAMILIES", "LayerwiseModel", "ModelConfig", "build_model", "layer_name"]
