"""Mid-run training checkpoints (docs/SCIENCE.md#resuming-training): a long run keeps going from
where a killed process left it, to the same weights as a run that never stopped.

A checkpoint holds the weights, AdamW's moments, the learning-rate schedule, torch's RNG state and
the loop's own state (step, curriculum stage, evaluations so far, best accuracy, seconds spent).
It is written only at the end of a data block (``step % block == 0``), where the next step draws a
fresh block of sequences from the seed's stream, so the resumed run sees the very sequences the
uninterrupted one would. The file is written beside its final name and renamed over it (atomic):
a kill mid-write leaves the previous checkpoint, never a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import torch
from torch import nn

from layerscope_core.atomic_file import atomic_file

FORMAT = 1


@dataclass
class LoopState:
    """The training loop's state after ``step`` steps (what :func:`science.training.train_model`
    needs besides the weights, optimizer and schedule to continue bit for bit).

    Attributes:
        step: steps done.
        stage: index into the curriculum lengths.
        curve: the loss curve so far (one dict per step).
        at_length: held-out accuracies (0..1) at the current length since the run reached it.
        best: (accuracy, step) of the best evaluation at the full length, or None.
        acc, acc_length: the last evaluation's accuracy and the length it was taken at (-1: none).
        seconds: wall-clock seconds spent training before this point (summed over resumptions).
        resumed_at: the steps this run was resumed at, oldest first.
        devices: ``[step, where]`` for each attempt: the step it started at and where it ran
            (e.g. ``"cuda (NVIDIA H200) on host"``), oldest first; a checkpoint written before this
            field existed has none for its earlier attempts.
    """

    step: int = 0
    stage: int = 0
    curve: list[dict[str, Any]] = field(default_factory=list)
    at_length: list[float] = field(default_factory=list)
    best: tuple[float, int] | None = None
    acc: float | None = None
    acc_length: int = -1
    seconds: float = 0.0
    resumed_at: list[int] = field(default_factory=list)
    devices: list[list[Any]] = field(default_factory=list)


def identity(key: str, seed: int, config: Any, stop_at_step: int | None) -> str:
    """A digest of what makes two trainings the same run: the caller's ``key`` (e.g. the run's
    config hash), the seed, every field of the training config and a rebuild's stop step. A
    checkpoint is resumed only by a run with the same identity."""
    blob = json.dumps(
        {"key": key, "seed": seed, "config": asdict(config), "stop_at_step": stop_at_step}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def save(
    path: Path,
    ident: str,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    sched: Any,
    loop: LoopState,
) -> None:
    """Write a checkpoint to ``path`` atomically (a temporary file renamed over it).

    Raises:
        OSError: the file cannot be written (e.g. the disk is full: errno ``ENOSPC``), naming
            ``path``; the previous checkpoint stays as it was and the temporary file is removed.
            (torch's zip writer reports a failed write as a RuntimeError, "unexpected pos";
            the OSError underneath is raised instead.)
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "identity": ident,
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "sched": None if sched is None else sched.state_dict(),
        "rng": torch.get_rng_state(),
        "loop": asdict(loop),
    }
    try:
        with atomic_file(path) as fh:  # disk full, a kill mid-write: the last checkpoint stays whole
            out = _Writes(fh)
            try:
                # torch's zip writer calls only write/flush: _Writes stands in for the binary file
                torch.save(state, cast(BinaryIO, out))
            except RuntimeError as exc:
                if out.error is None:
                    raise
                raise out.error from exc
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror or exc}: writing training checkpoint", str(path)) from exc


class _Writes:
    """A binary file for torch.save that keeps the OSError of a failed write (a full disk):
    torch's zip writer swallows it into a RuntimeError ("unexpected pos")."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh: BinaryIO = fh
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.fh.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.fh.flush()


# How to get past a checkpoint that cannot be resumed; every such error ends with it.
AFRESH_HINT = "delete the file, or train with force (`--force`), to start the run afresh"


class CheckpointError(ValueError):
    """A checkpoint file exists at the path but cannot be resumed (the message names the file and
    how to start afresh: :data:`AFRESH_HINT`)."""


class CheckpointMismatch(CheckpointError):
    """A checkpoint file exists at the path but belongs to another run (another identity or format)."""


class CheckpointUnreadable(CheckpointError):
    """A checkpoint file exists at the path but cannot be read (truncated by a kill or a full
    disk before the atomic write existed, copied half, not a checkpoint at all)."""


def _read(path: Path, file: BinaryIO | None = None) -> dict[str, Any]:
    """The checkpoint's dict (read from ``file``, ``path`` open, when given), or :class:`CheckpointUnreadable`."""
    if file is not None:
        file.seek(0)
    try:
        state = torch.load(path if file is None else file, map_location="cpu", weights_only=True)
    # IndexError: torch's weights-only unpickler on bytes that are no pickle (it pops an empty stack)
    except (RuntimeError, EOFError, ValueError, IndexError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]  # torch's first sentence
        raise CheckpointUnreadable(
            f"training checkpoint {path} cannot be read ({reason[:160]}); {AFRESH_HINT}"
        ) from exc
    if not isinstance(state, dict):
        raise CheckpointUnreadable(f"training checkpoint {path} is not a checkpoint; {AFRESH_HINT}")
    return state


def saved_step(path: Path, file: BinaryIO | None = None) -> int:
    """The step the checkpoint at ``path`` was written at (``file``: ``path`` already open, read
    from its start: the step of those very bytes, should the file be replaced meanwhile).

    Raises:
        CheckpointUnreadable: the file cannot be read or is not a checkpoint.
    """
    state = _read(path, file)
    try:
        return int(state["loop"]["step"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointUnreadable(f"training checkpoint {path} is not a checkpoint; {AFRESH_HINT}") from exc


def load(
    path: Path,
    ident: str,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    sched: Any,
) -> LoopState | None:
    """Restore ``model``, ``opt``, ``sched`` and torch's RNG from ``path``; the loop state, or
    None when there is no checkpoint.

    Raises:
        CheckpointMismatch: the file is another run's checkpoint or of another format.
        CheckpointUnreadable: the file cannot be read (a truncated or foreign file).
    """
    if not path.exists():
        return None
    state = _read(path)
    if state.get("format") != FORMAT or state.get("identity") != ident:
        raise CheckpointMismatch(
            f"{path}: a checkpoint of another run (identity {str(state.get('identity'))[:12]}); {AFRESH_HINT}"
        )
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    if sched is not None:
        sched.load_state_dict(state["sched"])
    torch.set_rng_state(state["rng"])
    loop = LoopState(**state["loop"])
    if loop.best is not None:
        loop.best = (float(loop.best[0]), int(loop.best[1]))
    return loop
