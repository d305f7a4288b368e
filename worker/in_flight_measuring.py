"""Measurements in flight: the finished pieces of a run's measurement not stored yet
(:class:`science.resume_folder.ResumeFolder`, ``<store>/measuring/<part>-<hash>/``), found so that
``layerscope export --in-flight`` carries them, with the run's weights, to another machine where
the same suite resumes the measurement at its next piece (docs/SCIENCE.md#staged-measurement).

A folder's ``note.json`` (:func:`note_of`) names the run (suite, name, family, task, seed, the
run's ``config_hash``), the part and the measure settings' hash. A bundle lists the folders in its
manifest's ``measuring`` (:func:`manifest_entry`), each file with its size and sha256, checked where
it is imported (``backend.bundle_checks.check_measuring``); :func:`restore` puts them in place.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from layerscope_core.atomic_file import write_atomic
from science.resume_folder import NOTE_NAME, PIECE_NAME
from worker.in_flight import file_record

__all__ = ["FOLDER", "MEASURING_NAME", "NOTE_NAME", "note_of", "suite_folders", "manifest_entry", "restore"]

FOLDER = "measuring"  # under the model store, and inside a bundle
# a measuring file's name inside a bundle: measuring/<part>-<32 hex>/<piece>.pt or note.json (no path escapes)
MEASURING_NAME = re.compile(
    rf"{FOLDER}/((?:probes|interventions|patching)-[0-9a-f]{{32}})/({re.escape(NOTE_NAME)}|{PIECE_NAME.pattern})"
)


def note_of(run: Any, part: str, measure_hash: str) -> dict[str, Any]:
    """The note of a folder of ``part``'s pieces of ``run`` (a ``store.models.Run`` row, or None
    for a measurement of no stored run) measured with the settings of hash ``measure_hash``."""
    names = ("suite", "name", "family", "task", "seed", "config_hash")
    return {
        **{k: getattr(run, k, None) for k in names},
        "part": part,
        "measure_hash": measure_hash,
    }


def _note(folder: Path) -> dict[str, Any] | None:
    try:
        note = json.loads((folder / NOTE_NAME).read_text())
    except (OSError, ValueError):  # no note (a folder of an older layerscope), or one cut short
        return None
    return note if isinstance(note, dict) else None


def suite_folders(store_dir: Path, suite: str) -> dict[str, dict[str, Any]]:
    """folder name → ``{"path", "note", "pieces": [file names]}`` of the measurements in
    ``<store_dir>/measuring`` whose note names ``suite`` and that hold at least one piece (a
    stored measurement's folder is removed when it is stored)."""
    root = Path(store_dir) / FOLDER
    out: dict[str, dict[str, Any]] = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        pieces = sorted(f.name for f in folder.glob("*.pt") if PIECE_NAME.fullmatch(f.name))
        note = _note(folder) if folder.is_dir() else None
        if note is None or note.get("suite") != suite or not pieces:
            continue
        if MEASURING_NAME.fullmatch(f"{FOLDER}/{folder.name}/{NOTE_NAME}"):
            out[folder.name] = {"path": folder, "note": note, "pieces": pieces}
    return out


def manifest_entry(name: str, folder: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
    """The manifest's entry of folder ``name`` (:func:`suite_folders`' value ``folder``) whose
    bundle entries are ``files`` (entry name → bytes as written)."""
    note = folder["note"]
    return {
        "folder": name,
        **{k: note.get(k) for k in ("config_hash", "name", "family", "task", "seed", "part")},
        "pieces": len(folder["pieces"]),
        "files": {entry: file_record(blob) for entry, blob in sorted(files.items())},
    }


def restore(
    blobs: Mapping[str, bytes | Callable[[BinaryIO], object]],
    store_dir: Path | None,
    stored: Callable[[dict[str, Any]], bool] = lambda note: False,
) -> list[dict[str, Any]]:
    """Put a bundle's measuring folders (``blobs``: entry name → bytes, or a function writing
    them into a file; checked by the bundle reader) into ``<store_dir>/measuring/``, each folder whole or not at all (written beside,
    then renamed); a folder already there is kept (it may hold more pieces), one whose
    measurement is stored here (``stored(note)``) is left out, and nothing is written without
    ``store_dir``. Returns one entry per folder: ``folder``, ``name`` (the run's), ``part``,
    ``pieces``, ``restored`` (bool) and ``why_not`` (None when restored)."""
    by_folder: dict[str, dict[str, bytes | Callable[[BinaryIO], object]]] = {}
    for entry, blob in blobs.items():
        m = MEASURING_NAME.fullmatch(entry)
        if m:
            by_folder.setdefault(m.group(1), {})[m.group(2)] = blob
    out = []
    for name, files in sorted(by_folder.items()):
        raw_note = files.get(NOTE_NAME, b"{}")
        if not isinstance(raw_note, bytes):  # the bundle reader gives the small members (a note) as bytes
            raise TypeError(f"{FOLDER}/{name}/{NOTE_NAME}: expected the note's bytes, got {type(raw_note).__name__}")
        note = json.loads(raw_note)
        target = Path(store_dir or ".") / FOLDER / name
        why_not = (
            "no model store to put it in"
            if store_dir is None
            else f"its run's {note.get('part')} are stored here"
            if stored(note)
            else "a measurement of these weights and settings is here already (kept)"
            if target.exists()
            else None
        )
        if why_not is None:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}.", suffix=".tmp"))
            try:
                for file, blob in files.items():
                    write_atomic(tmp / file, blob)  # a piece's writer copies it from the bundle as it reads
                tmp.rename(target)  # whole or not at all: a resumed measurement never sees half a folder
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        out.append(
            {
                "folder": name,
                "name": note.get("name"),
                "part": note.get("part"),
                "pieces": sum(f != NOTE_NAME for f in files),
                "restored": why_not is None,
                "why_not": why_not,
            }
        )
    return out
