"""Runs in flight: the mid-run training checkpoints of a suite's unfinished runs
(docs/SCIENCE.md#resuming-training), found so that a bundle can carry them to another machine
(``layerscope export --in-flight``) where the same suite resumes them.

A checkpoint is ``<store>/training/<run hash>.pt``; beside it the worker writes
``<run hash>.json`` (:func:`note_of`: the run's suite, name, family, task, seed, settings and the
suite command that resumes it) when the run starts, so an export finds the checkpoints of its
suite and an import says how to resume each. A suite made from a preset also finds them by the
hashes its preset expands to (checkpoints written before the note existed). A bundle records each
state file's size and sha256 (:func:`file_record`), checked where it is imported.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, BinaryIO

from layerscope_core.atomic_file import write_atomic

__all__ = [
    "TRAINING_NAME",
    "note_of",
    "note_path",
    "write_note",
    "remove_note",
    "suite_checkpoints",
    "checkpoint_step",
    "other_states",
    "other_state_warning",
    "file_record",
    "copy_recorded",
]

# a training state's name inside a bundle (and inside the store's training folder): no path escapes
TRAINING_NAME = re.compile(r"training/([0-9a-f]{64})\.(pt|json)")


def note_path(checkpoint: Path) -> Path:
    """The note beside ``checkpoint`` (``<run hash>.json``)."""
    return checkpoint.with_suffix(".json")


def note_of(params: Any, config_hash: str) -> dict[str, Any]:
    """The note of run ``params`` (a :class:`worker.job_params.TrainParams`): its ``suite``, ``name``,
    ``family``, ``task``, ``seed``, ``config_hash``; ``run_config``: every setting the hash is made
    of; ``preset``, ``overrides`` (e.g. ``{"max_steps": 150}``) and ``resume``: the
    ``layerscope suite`` command that makes this run again and so resumes its state
    (:func:`worker.resume_command.suite_command`; all three None when no preset makes the run)."""
    from worker.resume_command import suite_command  # here: the bundle reader imports this module for its pattern

    found = suite_command(params) or {}
    return {
        **{k: getattr(params, k) for k in ("suite", "name", "family", "task", "seed")},
        "config_hash": config_hash,
        "run_config": params.run_config(),
        "preset": found.get("preset"),
        "overrides": found.get("overrides"),
        "resume": found.get("command"),
    }


def write_note(checkpoint: Path, params: Any) -> None:
    """Write the note naming the run whose state ``checkpoint`` will hold (``params``: its
    :class:`worker.job_params.TrainParams`)."""
    note = note_of(params, checkpoint.stem)
    path = note_path(checkpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(note, sort_keys=True).encode())


def remove_note(checkpoint: Path) -> None:
    note_path(checkpoint).unlink(missing_ok=True)


def _read_note(path: Path) -> dict[str, Any] | None:
    try:
        note = json.loads(path.read_text())
    except (OSError, ValueError):  # a note cut short: its checkpoint is still found by the preset's hashes
        return None
    return note if isinstance(note, dict) else None


def checkpoint_step(path: Path, file: BinaryIO | None = None) -> int | None:
    """The step a training checkpoint was written at; None when it cannot be read (resuming it
    names the file and why). ``file``: ``path`` already open (the step of the very bytes read
    from it, should the worker replace the file meanwhile)."""
    from science import train_checkpoint  # here: the bundle reader imports this module for its name pattern alone

    try:
        return train_checkpoint.saved_step(path, file)
    except train_checkpoint.CheckpointUnreadable:
        return None


def file_record(data: bytes) -> dict[str, Any]:
    """``{"size": bytes, "sha256": hex digest}`` of a state file as a bundle records it."""
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def copy_recorded(src: IO[bytes], dst: IO[bytes]) -> dict[str, Any]:
    """Copy ``src`` to ``dst`` in chunks (a state may be gigabytes); the :func:`file_record` of
    the bytes copied."""
    digest, size = hashlib.sha256(), 0
    while chunk := src.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
        dst.write(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


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


def other_states(store_dir: Path, params: Any) -> list[dict[str, Any]]:
    """The notes of the training states in ``<store_dir>/training`` of the same run as ``params``
    by suite, name and seed but made with other settings (another config hash): a run started so
    trains afresh and leaves them unused. Only states whose checkpoint is there count."""
    folder = Path(store_dir) / "training"
    if not params.suite or not folder.is_dir():
        return []
    mine, out = params.run_hash(), []
    for path in sorted(folder.glob("*.json")):
        if not TRAINING_NAME.fullmatch(f"training/{path.name}"):
            continue
        note = _read_note(path)
        same = note is not None and all(note.get(k) == getattr(params, k) for k in ("suite", "name", "seed"))
        if note is not None and same and path.stem != mine and path.with_suffix(".pt").is_file():
            out.append({**note, "config_hash": path.stem})
    return out


def other_state_warning(params: Any, note: dict[str, Any]) -> str:
    """The warning for run ``params`` starting beside ``note``'s state (:func:`other_states`): the
    state's file, the settings that differ, and the command that would resume it."""
    then, now = note.get("run_config"), params.run_config()
    differs = (
        ", ".join(
            f"{k} {then.get(k)} there, {now.get(k)} now"
            for k in sorted(set(then) | set(now))
            if then.get(k) != now.get(k)
        )
        if isinstance(then, dict)
        else "its settings are not in its note"
    )
    resume = note.get("resume")
    return (
        f"warning: {params.name} (suite {params.suite!r}, seed {params.seed}) has a training state in flight here "
        f"made with other settings (training/{note['config_hash']}.pt: {differs}); this run trains afresh and "
        "leaves that state unused; "
        + (f"`{resume}` resumes it" if resume else "its note records no suite command that resumes it")
    )
