"""Finished pieces of one long measurement kept on disk, so that a process killed part-way (a
session's end, ``kill -9``) resumes at the next piece instead of from the start.

A run's interventions take most of an hour on a 2-core CPU and are stored in one transaction when
all are done (docs/SCIENCE.md#staged-measurement); without this, a process stopped at 90 % lost
all of it. The pieces (each edit's fit, each eval length's rows) are computed from seeded data and
the same weights, so a resumed measurement gives the rows of an unbroken one (a test compares them).

Pieces are plain data (tensors, numbers, strings, lists, dicts), read back with
``torch.load(weights_only=True)``: a folder may come from another machine inside a bundle
(``layerscope export --in-flight``), and unpickling arbitrary objects from a file would run code.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickle
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from layerscope_core.atomic_file import write_atomic

__all__ = ["PIECE_NAME", "NOTE_NAME", "ResumeFolder", "weights_digest"]

log = logging.getLogger(__name__)

# a piece's file name: no path separator, not hidden (the temporary files of a write are)
PIECE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=-]{0,120}\.pt")
# the folder's note: which run and settings its pieces belong to (read by an export)
NOTE_NAME = "note.json"


def weights_digest(model: nn.Module) -> str:
    """sha256 of ``model``'s parameters and buffers (names, dtypes, shapes, bytes): which weights
    a folder's pieces were measured on (a rebuilt run has other weights, so other pieces)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


@dataclass(frozen=True)
class ResumeFolder:
    """A folder of pieces by name (``<name>.pt``, written atomically: a piece is there whole or
    not at all) and, where given, a ``note`` (JSON object) written beside the first piece."""

    path: Path
    note: dict[str, Any] | None = None

    def load(self, name: str) -> Any | None:
        """The piece ``name``, or None when it was not finished, or when its file holds more than
        plain data (a piece of an older format, or a file that is not this program's): it is
        then logged, removed, and measured again."""
        f = self.path / f"{name}.pt"
        if not f.is_file():
            return None
        try:
            return torch.load(f, weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
            log.warning("measurement piece %s not read back (%s): measuring it again", f, exc)
            f.unlink(missing_ok=True)
            return None

    def save(self, name: str, piece: Any) -> None:
        """Keep ``piece`` (plain data only) as ``<name>.pt``.

        Raises:
            ValueError: ``name`` is not a piece name (:data:`PIECE_NAME`).
        """
        if not PIECE_NAME.fullmatch(f"{name}.pt"):
            raise ValueError(f"not a measurement piece name: {name!r}")
        buf = io.BytesIO()
        torch.save(piece, buf)
        try:  # what load will accept: a piece it would refuse is not kept (measured again after a kill)
            torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
        except (pickle.UnpicklingError, RuntimeError) as exc:
            log.warning("measurement piece %r is not plain data (%s): not kept", name, exc)
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if self.note is not None and not (self.path / NOTE_NAME).is_file():
            write_atomic(self.path / NOTE_NAME, json.dumps(self.note, sort_keys=True).encode())
        write_atomic(self.path / f"{name}.pt", buf.getvalue())

    def clear(self) -> None:
        """Remove the folder (its measurement is stored)."""
        shutil.rmtree(self.path, ignore_errors=True)
