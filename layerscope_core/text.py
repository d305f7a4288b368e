"""The one rule for text that users send (names, titles, saved-view state, query values).

A string is accepted when it is valid Unicode (no lone UTF-16 surrogates, which cannot be
encoded as UTF-8 and so cannot be stored or sent back) and has no control characters (Unicode
category Cc: U+0000–U+001F, U+007F–U+009F). NUL is refused by PostgreSQL text columns; the
others have no place in a one-line name and make logs and labels misleading.

Web-free: the API, the job parameters (worker.job_params) and the CLI share it, and
:func:`readable_error`, how they show a validation message to a person.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# For pydantic / OpenAPI ``pattern``: so the schema documents the rule too.
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def text_problem(s: str) -> tuple[str, str] | None:
    """``(error type, message)`` when ``s`` breaks the rule, else None."""
    if _SURROGATE.search(s):
        return "string_unicode", "must be valid Unicode (a lone UTF-16 surrogate such as \\ud800 is not)"
    m = _CONTROL.search(s)
    if m:
        return "string_control_character", (
            f"must not contain control characters (found U+{ord(m.group()):04X}; NUL, tabs, newlines "
            "and other Cc characters are refused)"
        )
    return None


def printable(s: str) -> str:
    """``s`` made safe to echo in an error message (surrogates and control characters escaped)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


VALIDATOR_PREFIX = "Value error, "
"""What pydantic puts before the message of a ``ValueError`` raised in a validator."""


def readable_error(msg: str) -> str:
    """A pydantic error message as a person reads it: without pydantic's ``"Value error, "``
    before a validator's own words (the error's ``type``, ``value_error``, says as much). For
    the CLI's one line, the API's 422 ``msg`` and a bundle's problems."""
    return msg.removeprefix(VALIDATOR_PREFIX)


def validation_line(
    exc: Any,
    where: Callable[[tuple[Any, ...]], str] = lambda loc: ".".join(map(str, loc)),
    bare: Callable[[str], str] = lambda msg: msg,
) -> str:
    """``exc`` (a pydantic ``ValidationError``) as one line: ``where(loc): message`` per error,
    ``; `` between them, each message through :func:`readable_error`; ``bare`` words a model-level
    error (no ``loc``). The CLI names its options with ``where``; a failed job's stored error uses
    the field paths."""
    parts = []
    for e in exc.errors(include_url=False):
        loc = tuple(e.get("loc", ()))
        msg = readable_error(str(e.get("msg")))
        parts.append(f"{where(loc)}: {msg}" if loc else bare(msg))
    return "; ".join(parts)
