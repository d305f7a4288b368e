"""Runs in flight: the mid-run training checkpoints of a suite's unfinished runs
(docs/SCIENCE.md#resuming-training), found so that a bundle can carry them to another machine
(``layerscope export --in-flight``) where the same suite resumes them.

A checkpoint is ``<store>/training/<run hash>.pt``; beside it the worker writes
``<run hash>.json`` (the run's suite, name, family, task and seed) when the run starts, so an
export finds the checkpoints of its suite. A suite made from a preset also finds them by the
hashes its preset expands to (checkpoints written before the note existed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["TRAINING_NAME", "note_of", "note_path", "write_note", "remove_note", "suite_checkpoints", "checkpoint_step"]

# a training state's name inside a bundle (and inside the store's training folder): no path escapes
TRAINING_NAME = re.compile(r"training/([0-9a-f]{64})\.(pt|json)")


def note_path(checkpoint: Path) -> Path:
    """The note beside ``checkpoint`` (``<run hash>.json``)."""
    return checkpoint.with_suffix(".json")


def note_of(params: Any, config_hash: str) -> dict[str, Any]:
    """The note of run ``params`` (a :class:`worker.params.TrainParams`): its suite, name,
    family, task, seed and config hash."""
    return {**{k: getattr(params, k) for k in ("suite", "name", "family", "task", "seed")}, "config_hash": config_hash}


def write_note(checkpoint: Path, params: Any) -> None:
    """Write the note naming the run whose state ``checkpoint`` will hold (``params``: its
    :class:`worker.params.TrainParams`)."""
    note = note_of(params, checkpoint.stem)
    path = note_path(checkpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(note, sort_keys=True))
    tmp.replace(path)


def remove_note(checkpoint: Path) -> None:
    note_path(checkpoint).unlink(missing_ok=True)


def _read_note(path: Path) -> dict[str, Any] | None:
    try:
        note = json.loads(path.read_text())
    except (OSError, ValueError):  # a note cut short: its checkpoint is still found by the preset's hashes
        return None
    return note if isinstance(note, dict) else None


def checkpoint_step(path: Path) -> int | None:
    """The step a training checkpoint was written at; None when it cannot be read (resuming it
    names the file and why)."""
    from science import train_checkpoint  # here: the bundle reader imports this module for its name pattern alone

    try:
        return train_checkpoint.saved_step(path)
    except train_checkpoint.CheckpointUnreadable:
        return None


def suite_checkpoints(
    store_dir: Path, suite: str, preset_hashes: Iterable[str] = (), stored_hashes: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """run hash → ``{"checkpoint": path, "note": dict or None}`` for the checkpoints in
    ``<store_dir>/training`` that belong to ``suite``: a note naming the suite, or a hash of
    ``preset_hashes`` (the suite's preset expansion); the runs of ``stored_hashes`` (already
    stored: their state is stale) are left out."""
    folder = Path(store_dir) / "training"
    if not folder.is_dir():
        return {}
    wanted, stored = set(preset_hashes), set(stored_hashes)
    out: dict[str, dict[str, Any]] = {}
    for ckpt in sorted(folder.glob("*.pt")):
        h = ckpt.stem
        if not TRAINING_NAME.fullmatch(f"training/{ckpt.name}") or h in stored:
            continue
        note = _read_note(note_path(ckpt)) if note_path(ckpt).is_file() else None
        if (note is not None and note.get("suite") == suite) or h in wanted:
            out[h] = {"checkpoint": ckpt, "note": note}
    return out
