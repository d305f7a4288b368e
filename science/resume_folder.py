"""Finished pieces of one long measurement kept on disk, so that a process killed part-way (a
session's end, ``kill -9``) resumes at the next piece instead of from the start.

A run's interventions take most of an hour on a 2-core CPU and are stored in one transaction when
all are done (docs/SCIENCE.md#staged-measurement); without this, a process stopped at 90 % lost
all of it. The pieces (each edit's fit, each eval length's rows) are computed from seeded data and
the same weights, so a resumed measurement gives the rows of an unbroken one (a test compares them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["ResumeFolder", "weights_digest"]


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
    not at all). Only this program's own files are read back (``torch.load`` unpickles them)."""

    path: Path

    def load(self, name: str) -> Any | None:
        """The piece ``name``, or None when it was not finished."""
        f = self.path / f"{name}.pt"
        return torch.load(f, weights_only=False) if f.is_file() else None

    def save(self, name: str, piece: Any) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save(piece, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path / f"{name}.pt")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def clear(self) -> None:
        """Remove the folder (its measurement is stored)."""
        shutil.rmtree(self.path, ignore_errors=True)
