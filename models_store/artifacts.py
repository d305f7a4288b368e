"""What a probe and an edit learned, kept: safetensors files by content hash beside the checkpoints.

Layout: ``<store>/artifacts/<sha256>.safetensors``, the id the SHA-256 of the file's bytes, so
the same weights always get the same id and a worker on another machine writes the same file.

- a probe (``probe_tensors``): ``W`` [C, D] and ``b`` [C] on standardised features, ``mean`` /
  ``std`` [D] (the standardisation), ``directions`` [C, D] = W / std (raw-space class
  directions) and ``intercept`` [C] (raw space); ``logits = directions · h + intercept``.
- an edit (``edit_tensors``): ``center`` [D] and, for projection edits, ``removed`` [r, D] (the
  directions removed, ``right`` of ``h' = h − ((h − c) Rᵀ) Lᵀ``) and ``left`` [D, r]; the
  ``mean`` ablation has no directions (it replaces the whole state).

Metadata (one sorted JSON string under the key ``layerscope``, so that the bytes are the same
each time) name the kind, method and layer, and a probe's eval length (an edit is one fit
applied at every eval length: one file). Every tensor is float32, CPU, contiguous;
non-finite intercepts (classes absent from training) are kept as they are (safetensors stores
IEEE floats).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from layerscope_core.atomic_file import write_atomic

_ID_RE = re.compile(r"^[0-9a-f]{64}$")


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.float32).contiguous().clone()


def probe_tensors(probe: Any) -> dict[str, torch.Tensor]:
    """The tensors of a fitted ``science.probes.LinearProbe`` (see the module docstring)."""
    return {
        "W": _t(probe.W),
        "b": _t(probe.b),
        "mean": _t(probe.mean),
        "std": _t(probe.std),
        "directions": _t(probe.class_directions()),
        "intercept": _t(probe.raw_intercept()),
    }


def edit_tensors(edit: Any) -> dict[str, torch.Tensor]:
    """The tensors of a fitted ``science.interventions.Edit``: ``center`` [D], and ``removed``
    [r, D] / ``left`` [D, r] when it projects (every method but ``mean``)."""
    out = {"center": _t(edit.center)}
    if getattr(edit, "right", None) is not None and edit.right.shape[0] > 0:
        out["removed"] = _t(edit.right)
        out["left"] = _t(edit.left)
    return out


class ArtifactStore:
    """safetensors files under ``<root>/artifacts`` by the SHA-256 of their bytes."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.dir = Path(root) / "artifacts"

    def path(self, artifact_id: str) -> Path:
        """The file of ``artifact_id`` (it may not exist).

        Raises:
            ValueError: not 64 lowercase hex characters.
        """
        if not isinstance(artifact_id, str) or not _ID_RE.match(artifact_id):
            raise ValueError(f"artifact id must be 64 lowercase hex characters, got {artifact_id!r}")
        return self.dir / f"{artifact_id}.safetensors"

    def save(self, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> str:
        """Write ``tensors`` (and ``metadata``, kept as one sorted JSON string under the key
        ``layerscope``) once; returns the id (SHA-256 of the bytes). The same tensors and metadata
        always give the same bytes, so the same id: safetensors writes a metadata dict in hash-map
        order, which differed from one call to the next."""
        data = encode(tensors, metadata)
        artifact_id = id_of(data)
        path = self.path(artifact_id)
        if not path.is_file():
            self.dir.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        return artifact_id

    def read_bytes(self, artifact_id: str) -> bytes:
        """The stored file's bytes (checked against the id).

        Raises:
            ValueError: a malformed id, or bytes that do not hash to it; FileNotFoundError: unknown id.
        """
        path = self.path(artifact_id)
        if not path.is_file():
            raise FileNotFoundError(f"artifact {artifact_id} not found in {self.dir}")
        data = path.read_bytes()
        if id_of(data) != artifact_id:
            raise ValueError(f"artifact {artifact_id} is damaged: its bytes hash otherwise")
        return data

    def load(self, artifact_id: str) -> dict[str, torch.Tensor]:
        """The stored tensors, by name (see ``read_bytes`` for the errors)."""
        return st_load(self.read_bytes(artifact_id))

    def metadata(self, artifact_id: str) -> dict[str, str]:
        """The stored metadata as one flat dict of strings: the ``layerscope`` JSON string of
        files written since the metadata was made deterministic, or the flat string dict of older
        files (written before, in hash-map order). Errors as ``read_bytes``."""
        return read_metadata(self.read_bytes(artifact_id))

    def delete(self, artifact_id: str) -> bool:
        """Remove the file of ``artifact_id``; False when there was none. The caller checks that
        no result row refers to it (``backend.artifact_rekey``)."""
        try:
            self.path(artifact_id).unlink()
        except FileNotFoundError:
            return False
        return True


def encode(tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> bytes:
    """The safetensors bytes ``ArtifactStore.save`` writes (their SHA-256 is the id)."""
    meta = {"layerscope": json.dumps({k: str(v) for k, v in metadata.items()}, sort_keys=True)} if metadata else None
    return st_save({k: _t(v) for k, v in tensors.items()}, metadata=meta)


def id_of(data: bytes) -> str:
    """An artifact's id: the SHA-256 of its bytes, 64 lowercase hex characters."""
    return hashlib.sha256(data).hexdigest()


def read_metadata(data: bytes) -> dict[str, str]:
    """The metadata of safetensors ``data`` (see ``ArtifactStore.metadata``): the header is an
    8-byte little-endian length and that many bytes of JSON, whose ``__metadata__`` holds it.

    Raises:
        ValueError: bytes that are no safetensors header.
    """
    if len(data) < 8:
        raise ValueError("not a safetensors file: shorter than its 8-byte header length")
    n = int.from_bytes(data[:8], "little")
    try:
        meta = json.loads(data[8 : 8 + n]).get("__metadata__") or {}
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a safetensors file: its header is not JSON ({exc})") from exc
    if "layerscope" in meta:
        return json.loads(meta["layerscope"])
    return dict(meta)
