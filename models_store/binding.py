"""A checkpoint bound to its run: its config must be the run's model config and its tensors the
shapes that config builds, so weights of another model are never measured under a run's name
(a bundle whose ``checkpoint_id`` values were swapped between runs, say).

Checked at bundle import (``backend.bundle_stage``) and where a run's model is loaded for a
measurement (``worker.pipeline.load_run``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any, BinaryIO

import torch

from models_store.families import build_model
from models_store.model_config import ModelConfig

__all__ = ["config_problem", "shape_problem", "safetensors_shapes"]

_MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is not one layerscope wrote


def _canonical(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return ModelConfig.from_dict(dict(cfg)).to_dict()


def config_problem(checkpoint: Mapping[str, Any], run: Mapping[str, Any]) -> str | None:
    """Why checkpoint config ``checkpoint`` (``ModelConfig.to_dict()``) is not run ``run``'s (a
    row with ``model_config``, ``n_layers``, ``d_model``), or None. A run that records no
    ``model_config`` (rows written before it) is compared on its layer count and width.

    Raises:
        nothing: a config that ``ModelConfig`` cannot read is a problem returned.
    """
    try:
        got = _canonical(checkpoint)
        want = _canonical(run["model_config"]) if run.get("model_config") else None
    except (TypeError, ValueError, KeyError) as exc:
        return f"a model config that cannot be read ({exc})"
    if want is None:
        want = {"n_layers": run.get("n_layers"), "d_model": run.get("d_model")}
    for key in sorted(set(want) | set(got)):
        if want.get(key) != got.get(key):
            return (
                f"its config is not its run's: {key} = {got.get(key)!r} in the checkpoint, "
                f"{want.get(key)!r} in the run ({run.get('name') or 'run ' + str(run.get('id'))})"
            )
    return None


def shape_problem(checkpoint: Mapping[str, Any], shapes: Mapping[str, list[int]]) -> str | None:
    """Why tensors of ``shapes`` (name → shape, from the weights file's header) are not those
    config ``checkpoint`` builds (``build_model`` on the meta device: no memory, no weights), or
    None; a config that builds no model here (a bundle's, from another version or hand-made) is a
    problem returned, not an exception raised mid-import."""
    try:
        cfg = ModelConfig.from_dict(dict(checkpoint))
        with torch.device("meta"):
            model = build_model(cfg)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError, NotImplementedError) as exc:
        return f"its config builds no model here ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    want = {k: list(v.shape) for k, v in model.state_dict().items()}
    for name in sorted(set(want) | set(shapes)):
        if want.get(name) != shapes.get(name):
            return (
                f"tensor {name} has shape {shapes.get(name)} in the weights, "
                f"{want.get(name)} in the model its config builds"
            )
    return None


def safetensors_shapes(f: BinaryIO) -> dict[str, list[int]]:
    """Tensor name → shape from a safetensors file's header (8-byte little-endian length, then
    that many bytes of JSON), read without its tensors.

    Raises:
        ValueError: not a safetensors header.
    """
    head = f.read(8)
    if len(head) < 8:
        raise ValueError("not a safetensors file: shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", head)
    if n > _MAX_HEADER:
        raise ValueError(f"not a safetensors file: a header of {n} bytes")
    try:
        header = json.loads(f.read(n))
        return {k: list(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"not a safetensors file: its header is not one ({exc})") from exc
