"""A pydantic ``ValidationError`` from the job parameters a command built, as the CLI's one line:
each error named by the option the user typed, not by the params' field path.

    eval_lengths.0: Input should be less than or equal to 4096
    → --eval-length (1st value): Input should be less than or equal to 4096

The entry point (``backend.cli.entry.main``) prints it; this is the one place CLI validation errors
are formatted.
"""

from __future__ import annotations

from typing import Any

from layerscope_core.text import validation_line

# The option each field of a params model is set from, per model that a command builds from its
# options (measure.probe / intervene / patch, training.suite; tests/test_cli_option_names.py
# checks every option is the command's). A field not listed (one no option sets, e.g. a run id,
# which click names itself) keeps its path. ``demo`` builds SuiteParams from choices click has
# checked already, so no error of it reaches here.
OPTION_OF: dict[str, dict[str, str]] = {
    "ProbeParams": {"eval_lengths": "--eval-length", "n_probe_sequences": "--n-sequences", "precision": "--precision"},
    "InterveneParams": {
        "methods": "--method",
        "layers": "--layer",
        "eval_lengths": "--eval-length",
        "pca_k": "--pca-k",
        "method_params": "--param",
        "inlp_max_rounds": "--inlp-max-rounds",
        "conv1d": "--conv1d",
        "n_permutations": "--n-permutations",
        "n_probe_sequences": "--n-sequences",
        "precision": "--precision",
    },
    "PatchParams": {
        "positions": "--position",
        "sites": "--site",
        "stride": "--stride",
        "eval_length": "--eval-length",
        "n_pairs": "--n-pairs",
        "precision": "--precision",
    },
    "SuiteParams": {
        "preset": "--preset",
        "families": "--family",
        "tasks": "--task",
        "seeds": "--seed",
        "pretrained": "--pretrained",
        "from_config": "--from-config",
        "name": "--name",
        "force": "--force",
        "max_steps": "--max-steps",
        "max_seconds": "--max-seconds",
        "rebuild_weights": "--rebuild-weights",
        "parts": "--measure",
        "controls": "--controls",
        "precision": "--precision",
    },
}


def ordinal(n: int) -> str:
    """``1`` → ``"1st"``, ``2`` → ``"2nd"``, ``11`` → ``"11th"``, ``23`` → ``"23rd"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def where(loc: tuple[Any, ...], options: dict[str, str]) -> str:
    """An error's ``loc`` as the user wrote it: the option of its field (``options``), then which
    value of a repeated option (``--eval-length (2nd value)``), then the path within it
    (``--param my_edit.k``); a field with no option: its dotted path (``run_id``, ``measure.pca_k``)."""
    if not loc or loc[0] not in options:
        return ".".join(map(str, loc))
    out, rest = options[loc[0]], list(loc[1:])
    if rest and isinstance(rest[0], int):
        out += f" ({ordinal(rest.pop(0) + 1)} value)"
    if rest and rest[-1] == "[key]":  # pydantic's mark of a dict key that failed: the key is the value named
        rest.pop()
    return " ".join([out, ".".join(map(str, rest))]) if rest else out


def _message(msg: str, options: dict[str, str]) -> str:
    """A model-level message that starts with a field's name (``"rebuild_weights: not with
    force"``) starts with its option instead."""
    field, sep, rest = msg.partition(": ")
    return f"{options[field]}: {rest}" if sep and field in options else msg


def validation_message(exc: Any) -> str:
    """``exc`` (a pydantic ``ValidationError``) as one line: ``where: message`` per error, ``; ``
    between them, without pydantic's "Value error, " (``readable_error``)."""
    options = OPTION_OF.get(getattr(exc, "title", ""), {})
    return validation_line(exc, where=lambda loc: where(loc, options), bare=lambda msg: _message(msg, options))
