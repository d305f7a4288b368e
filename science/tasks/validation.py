"""Validation of task parameters and generator arguments.

Every failure raises :class:`ValueError` with a message that names the task and the
offending parameter, so a bad job request is reported clearly by the API and CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPLITS = ("train", "test")

# Upper bounds of the built-in tasks' size parameters. A label set or alphabet past these is no
# state-tracking task a layerwise probe can read, and the unbounded values made the process that
# checks a job (the API's) build a billion class names before the worker ever saw it.
MAX_CLASSES = 1024  # labels per position (Dyck's depth bound m, code_depth's m)
MAX_VOCAB = 65_536  # token ids (Dyck's 2k, code_depth's vocab_size)
MAX_FILES = 1_000_000  # code_depth corpus files


def check_int(task: str, name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) ``>= minimum`` (and ``<= maximum`` if given).

    Raises:
        ValueError: naming ``task`` and ``name`` otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{task}: parameter {name!r} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{task}: parameter {name!r} must be an integer <= {maximum}, got {value!r}")
    return int(value)


def check_choice(task: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        ValueError: naming ``task``, ``name`` and the allowed values otherwise.
    """
    if value not in choices:
        raise ValueError(f"{task}: parameter {name!r} must be one of {choices}, got {value!r}")
    return str(value)


def check_fraction(task: str, name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a number strictly between 0 and 1.

    Raises:
        ValueError: naming ``task`` and ``name`` otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(f"{task}: parameter {name!r} must be a number in (0, 1), got {value!r}")
    return float(value)


def merge_params(task: str, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``given``.

    Raises:
        ValueError: if ``given`` holds a parameter name the task does not know.
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise ValueError(f"{task}: unknown parameter(s) {unknown}; known parameters: {known}")
    return {**defaults, **given}


def check_generate_args(task: str, length: Any, n: Any, seed: Any, split: Any) -> None:
    """Validate the arguments of ``Task.generate`` / ``Task.corruption_pairs``.

    Raises:
        ValueError: ``length`` or ``n`` not an int >= 1, ``seed`` not an int >= 0, or
            ``split`` not in ``("train", "test")``.
    """
    check_int(task, "length", length, 1)
    check_int(task, "n", n, 1)
    check_int(task, "seed", seed, 0)
    check_choice(task, "split", split, SPLITS)
