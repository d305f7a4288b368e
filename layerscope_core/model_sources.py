"""The one rule for telling a local folder from a Hugging Face hub name in a model source (the CLI's
``--pretrained`` / ``--from-config``, a job's ``pretrained`` / ``from_config``).

A hub name is ``name`` or ``org/name``: never starting with ``.``, ``/`` or ``~``, never holding a
second ``/`` (nor, on Windows, a ``\\``). A source that does (``./missing``, ``/data/m``, ``~/m``,
``runs/a/b``) can only be a path; when no such folder is here it is "no such local folder", said at
once, not looked up on the hub (which fails slowly, in the hub client's words).

Web-free and torch-free: the CLI checks it before importing anything heavy; the API's submit
checks and the model loaders (``models_store``) share it.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

NO_SUCH_FOLDER = "no such local folder"
_TRUE = {"1", "true", "yes", "on"}
HUB_LOOKUP_SECONDS = 2.0  # a name server that answers at all answers in milliseconds
HUB_LOOKUP_KEPT_SECONDS = 60.0  # a long-running server looks again after this long
_hub_lookups: dict[str, tuple[float, str | None]] = {}  # host → (when, why unreachable)


def hub_offline() -> bool:
    """Whether the hub is off (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set true), read now."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_unreachable() -> str | None:
    """Why the hub's host (``HF_ENDPOINT``'s, else huggingface.co) does not resolve from here, or
    None: it resolves, or the name server did not answer within :data:`HUB_LOOKUP_SECONDS` (then the
    hub client is left to try). A machine without a network fails the lookup at once, where the hub
    client retries it five times over ~30 s, printing each retry. Kept :data:`HUB_LOOKUP_KEPT_SECONDS`."""
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    now = time.monotonic()
    if (kept := _hub_lookups.get(host)) is not None and now - kept[0] < HUB_LOOKUP_KEPT_SECONDS:
        return kept[1]
    answer: list[str | None] = []

    def resolve() -> None:
        try:
            socket.getaddrinfo(host, 443)
            answer.append(None)
        except OSError as e:  # socket.gaierror: no name server, or no such name
            answer.append(f"{host} does not resolve from here ({e.strerror or e})")

    lookup = threading.Thread(target=resolve, name="hub-lookup", daemon=True)
    lookup.start()
    lookup.join(HUB_LOOKUP_SECONDS)
    why = answer[0] if answer else None
    _hub_lookups[host] = (now, why)
    return why


def hub_reads_offline(source: str | None = None) -> bool:
    """Whether ``source`` (a hub name; None: any) is read from the local cache only: the hub turned
    off (:func:`hub_offline`), or its host does not resolve from here (:func:`hub_unreachable`). A
    folder here is never looked up on the hub, so its answer needs no name lookup."""
    if hub_offline():
        return True
    return not (source is not None and is_folder(source)) and hub_unreachable() is not None


def is_folder(source: str) -> bool:
    """Whether ``source`` (``~`` expanded) is a folder here; False for a name no file system could
    hold (too long, a NUL byte): that is no folder, not an error."""
    try:
        return Path(source).expanduser().is_dir()
    except (OSError, ValueError):
        return False


def names_a_path(source: str) -> bool:
    """Whether ``source`` can only be a path, not a hub name: it starts with ``.``, ``/`` or ``~``,
    holds more than one ``/``, or holds this system's other separator (``\\`` on Windows)."""
    other_seps = {s for s in (os.sep, os.altsep) if s is not None and s != "/"}
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or any(s in source for s in other_seps)


def missing_folder_problem(source: str) -> str | None:
    """:data:`NO_SUCH_FOLDER` when ``source`` names a path (:func:`names_a_path`) with no folder
    there (``~`` expanded), else None (a folder here, or a hub name to look up)."""
    if names_a_path(source) and not is_folder(source):
        return NO_SUCH_FOLDER
    return None


# The weight files ``from_pretrained`` reads from a folder (one file, or a sharded checkpoint's index).
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def missing_weights_problem(source: str) -> str | None:
    """Why a local folder given as a pretrained model cannot be loaded with its weights (it holds
    none of :data:`WEIGHT_FILES`), else None (weights there, or not a folder: a hub name)."""
    if not is_folder(source):
        return None
    folder = Path(source).expanduser()
    if any((folder / name).is_file() for name in WEIGHT_FILES):
        return None
    return (
        f"the folder holds no weights ({' or '.join(WEIGHT_FILES[::2])}); to train its architecture "
        "from scratch with random weights, give it as from_config"
    )


def absolute_if_local(source: str) -> str:
    """``source`` as an absolute path when it is a folder here (``~`` expanded, ``..`` and links
    resolved), else unchanged (a hub name, or a path that is not here: its check says so). A job
    stores its model source this way: a worker, an importer or a later rebuild reads it from
    another working directory."""
    return str(Path(source).expanduser().resolve()) if is_folder(source) else source


def hub_lookup_notice(source: str, here: Path | None = None) -> str | None:
    """A line to print before ``source`` is looked up on the hub, or None (a folder here, a path,
    or the hub off): a bare name that is no folder here goes to the hub, which can retry for about
    30 s before it fails offline; the line says why the wait, and names the folders here whose names
    are close to it (a mistyped local folder is the usual cause)."""
    if names_a_path(source) or is_folder(source) or hub_reads_offline():
        return None
    here = here or Path.cwd()
    try:
        folders = [p.name for p in here.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        folders = []
    close = difflib.get_close_matches(source, folders, n=3, cutoff=0.75)
    hint = f" (a folder here is named {', '.join(repr('./' + c) for c in close)})" if close else ""
    return (
        f"{source!r} is not a folder here{hint}: looking it up on the Hugging Face hub "
        "(HF_HUB_OFFLINE=1 uses local folders only)"
    )


NO_CUSTOM_CODE = "layerscope never runs a model's own code (transformers' trust_remote_code is always False)"


def custom_code_problem(source: str, config: object | None = None) -> str | None:
    """Why a model must be refused for asking to run its own code, else None: an ``auto_map``
    in its config (the local folder's ``config.json``, read as JSON, or ``config`` once read by
    transformers with ``trust_remote_code=False``), which names Python classes shipped beside
    the weights. Nothing is imported or run to find out."""
    auto_map = getattr(config, "auto_map", None) if config is not None else None
    if auto_map is None:
        path = Path(source).expanduser() / "config.json"
        try:
            auto_map = json.loads(path.read_text(encoding="utf-8")).get("auto_map") if path.is_file() else None
        except (OSError, ValueError, AttributeError):  # unreadable: transformers' own reading says why
            auto_map = None
    if not auto_map:
        return None
    names = ", ".join(sorted(map(str, auto_map)))[:200] if isinstance(auto_map, dict) else str(auto_map)[:200]
    return f"its config asks to run custom code (auto_map: {names}); {NO_CUSTOM_CODE}"
