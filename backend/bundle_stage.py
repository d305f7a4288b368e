"""The model-store half of a bundle import as one transaction with the database's
(docs/DESIGN.md#bundles-read-as-hostile-input).

:meth:`StoreTransaction.stage` streams the bundle's checkpoints and artifacts into a hidden
folder inside the store (``.import-<random>``, same file system: a rename places them), each
checked while it is read against the sha256 its name carries, and each checkpoint against its
run (``models_store.binding``: its config is the run's model config, its tensors the shapes that
config builds). Nothing in the store proper is touched until every file is verified.
:meth:`StoreTransaction.place` then renames them into place (a stored file whose bytes no longer
hash to its name is replaced by the good copy), and every path placed — or created by the import's
other writers, :meth:`StoreTransaction.created` — is removed again by :meth:`StoreTransaction.undo`
when the database refuses the rows, so a failure at any member leaves no new file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from backend.bundle_guard import CHUNK, ZipRefused, copy_member, read_small
from models_store.binding import config_problem, safetensors_shapes, shape_problem
from models_store.checkpoints import CONFIG, PROVENANCE, WEIGHTS

__all__ = ["StoreTransaction"]

_ARTIFACT = "artifacts"
_STAGING = ".import-"
_STALE_SECONDS = 24 * 3600  # an import's staging folder untouched this long was left by a killed import


def _remove_stale_staging(store: Path) -> None:
    """Remove the staging folders of imports killed part-way (kill -9 skips the clean-up); a
    running import's folder is younger than a day."""
    now = time.time()
    for folder in store.glob(f"{_STAGING}*"):
        with contextlib.suppress(OSError):  # another import removed it meanwhile
            if now - folder.stat().st_mtime > _STALE_SECONDS:
                shutil.rmtree(folder)


def _fsynced(path: Path, write: Any) -> Any:
    with open(path, "wb") as f:
        out = write(f)
        f.flush()
        os.fsync(f.fileno())
    return out


def _file_sha256(path: Path, then: bytes | None = None) -> hashlib._Hash:
    """The running sha256 of ``path`` read in chunks (and of ``then`` after it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    if then is not None:
        h.update(then)
    return h


def _checkpoint_intact(folder: Path, checkpoint_id: str) -> bool:
    """Whether a stored checkpoint folder hashes to its id (read in chunks)."""
    w, c = folder / WEIGHTS, folder / CONFIG
    if not (w.is_file() and c.is_file()):
        return False
    return _file_sha256(w, b"\0" + c.read_bytes()).hexdigest() == checkpoint_id


class StoreTransaction:
    """The files one import puts into the model store at ``store_dir``: staged, verified,
    placed, and undone as a whole (see the module docstring). Use as a context manager: the
    staging folder goes at the end either way."""

    def __init__(self, store_dir: Path) -> None:
        self.store = Path(store_dir)
        self.store.mkdir(parents=True, exist_ok=True)
        _remove_stale_staging(self.store)
        self.staging = Path(tempfile.mkdtemp(dir=self.store, prefix=_STAGING))
        self.checkpoints: dict[str, Path] = {}  # checkpoint id → its staged folder
        self.artifacts: dict[str, Path] = {}  # artifact id → its staged file
        self._created: list[Path] = []  # new paths in the store, removed by undo
        self._replaced: list[tuple[Path, Path]] = []  # (store path, the damaged copy set aside)
        self._folders: list[Path] = []  # folders made for them, removed by undo when left empty

    def __enter__(self) -> StoreTransaction:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    # ------------------------------------------------------------------ staging (nothing placed)

    def stage(self, z: zipfile.ZipFile, runs: list[dict[str, Any]]) -> None:
        """Stream the checkpoints (``weights/<id>/…``) and artifacts (``artifacts/<id>.safetensors``)
        of ``z`` (its directory already checked, ``backend.bundle_guard``) into the staging folder,
        each verified against its id while read and each checkpoint against the runs (table
        rows) that name it.

        Raises:
            ZipRefused: the member and why (damaged, forged, not its run's model).
        """
        folders: dict[str, set[str]] = {}
        for name in z.namelist():
            parts = name.split("/")
            if parts[0] == "weights":
                folders.setdefault(parts[1], set()).add(parts[2])
            elif parts[0] == _ARTIFACT:
                self._stage_artifact(z, name, parts[1].removesuffix(".safetensors"))
        for ckpt, files in sorted(folders.items()):
            self._stage_checkpoint(z, ckpt, files, [r for r in runs if r.get("checkpoint_id") == ckpt])

    def _stage_artifact(self, z: zipfile.ZipFile, name: str, artifact_id: str) -> None:
        (self.staging / _ARTIFACT).mkdir(exist_ok=True)
        target = self.staging / _ARTIFACT / f"{artifact_id}.safetensors"
        _, digest = _fsynced(target, lambda f: copy_member(z, name, f))
        if digest.hexdigest() != artifact_id:
            raise ZipRefused(name, f"its bytes hash to {digest.hexdigest()[:16]}…, not to its name (forged or damaged)")
        self.artifacts[artifact_id] = target

    def _stage_checkpoint(self, z: zipfile.ZipFile, ckpt: str, files: set[str], runs: list[dict[str, Any]]) -> None:
        where = f"weights/{ckpt}/"
        if not {WEIGHTS, CONFIG} <= files:
            raise ZipRefused(where, f"a checkpoint without its {WEIGHTS} and {CONFIG} (the two its id hashes)")
        folder = self.staging / ckpt
        folder.mkdir()
        _, digest = _fsynced(folder / WEIGHTS, lambda f: copy_member(z, where + WEIGHTS, f))
        config = read_small(z, where + CONFIG)
        _fsynced(folder / CONFIG, lambda f: f.write(config))
        if PROVENANCE in files:  # beside the checkpoint, not part of its id
            provenance = read_small(z, where + PROVENANCE)
            _fsynced(folder / PROVENANCE, lambda f: f.write(provenance))
        digest.update(b"\0" + config)  # checkpoint id = sha256(weights + b"\0" + config)
        if digest.hexdigest() != ckpt:
            raise ZipRefused(
                where + WEIGHTS,
                f"its bytes and {CONFIG} hash to {digest.hexdigest()[:16]}…, not to the checkpoint id its folder "
                "names (forged or damaged)",
            )
        try:
            cfg = json.loads(config)
            with open(folder / WEIGHTS, "rb") as f:
                shapes = safetensors_shapes(f)
        except (ValueError, RecursionError) as exc:
            raise ZipRefused(where, f"not a checkpoint ({exc})") from None
        why = next((p for r in runs if (p := config_problem(cfg, r))), None) or shape_problem(cfg, shapes)
        if why is not None:
            raise ZipRefused(where, why)
        self.checkpoints[ckpt] = folder

    # ------------------------------------------------------------------ placing, undoing

    def place(self) -> None:
        """Rename the staged files into the store: a file already there whose bytes hash to its
        name is kept, one that does not is replaced (set aside until the import ends)."""
        for ckpt, staged in sorted(self.checkpoints.items()):
            target = self.store / ckpt
            if not _checkpoint_intact(target, ckpt):
                self._put(staged, target)
        folder = self.store / _ARTIFACT
        if self.artifacts and not folder.is_dir():
            folder.mkdir()
            self._folders.append(folder)
        for aid, staged in sorted(self.artifacts.items()):
            target = folder / f"{aid}.safetensors"
            if not (target.is_file() and _file_sha256(target).hexdigest() == aid):
                self._put(staged, target)

    def _put(self, staged: Path, target: Path) -> None:
        if target.exists() or target.is_symlink():
            aside = self.staging / f"damaged-{len(self._replaced)}"
            os.rename(target, aside)
            self._replaced.append((target, aside))
        else:
            self._created.append(target)
        os.rename(staged, target)

    def created(self, paths: Iterable[Path]) -> None:
        """Record ``paths`` as new in the store (written by the import's other writers): undone too."""
        self._created.extend(paths)

    @property
    def new_paths(self) -> list[Path]:
        return list(self._created)

    def undo(self) -> list[str]:
        """Remove every path the import created and put every replaced file back; returns the
        paths that could not be (each is tried; the caller adds them to the error it raises)."""
        failed: list[str] = []
        for path in reversed(self._created):
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            except OSError as exc:
                failed.append(f"{path} ({exc.strerror or exc})")
        for target, aside in reversed(self._replaced):
            try:
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
                os.rename(aside, target)
            except OSError as exc:
                failed.append(f"{target} ({exc.strerror or exc})")
        for folder in reversed(self._folders):
            with contextlib.suppress(OSError):  # not empty: another writer's files are in it now
                folder.rmdir()
        self._created, self._replaced, self._folders = [], [], []
        return failed
