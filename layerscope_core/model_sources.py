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

import os
from pathlib import Path

NO_SUCH_FOLDER = "no such local folder"


def names_a_path(source: str) -> bool:
    """Whether ``source`` can only be a path, not a hub name: it starts with ``.``, ``/`` or ``~``,
    holds more than one ``/``, or holds this system's other separator (``\\`` on Windows)."""
    other_seps = {os.sep, os.altsep} - {None, "/"}
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or any(s in source for s in other_seps)


def missing_folder_problem(source: str) -> str | None:
    """:data:`NO_SUCH_FOLDER` when ``source`` names a path (:func:`names_a_path`) with no folder
    there (``~`` expanded), else None (a folder here, or a hub name to look up)."""
    if names_a_path(source) and not Path(source).expanduser().is_dir():
        return NO_SUCH_FOLDER
    return None
