"""The one rule for suite names.

A suite's name is a path segment of the API (``/api/suites/{name}``), a value in the dashboard's
query strings (``?suite=``, where ``,`` separates values) and the stem of a bundle's file name
(``NAME.layerscope.zip``). So a name is 1–100 ASCII letters, digits, ``.``, ``_`` and ``-``,
starting with a letter or a digit: URL-safe as it stands (nothing to encode), a file name on
every system, never ``..``, never read as a CLI option, no spaces to lose at either end. The
presets' names (``smoke``, ``paper-75s``, …) and the shipped bundles' (``paper``,
``paper-steps``) follow it.

Checked where a suite gets its name: the CLI's ``suite --name``, the ``suite`` job's ``name``
and the ``train`` job's ``suite`` (``POST /api/jobs``), and a bundle's ``manifest.suite`` and
``runs[].suite`` on import. A name looked up (export, delete, tag, note) is not checked against it
when a suite of that name is stored: one named before the rule stays reachable.

Web-free: the job parameters (worker.job_params), the API, the CLI and the bundle checks share it.
"""

from __future__ import annotations

import re
import unicodedata

MAX_SUITE_NAME = 100  # runs.suite and suite_notes.name are String(100)
# For pydantic / OpenAPI ``pattern``: so the schema documents the rule too.
SUITE_NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_SUITE_NAME - 1}}}$"
SUITE_NAME_RULE = (
    f"a suite name is 1–{MAX_SUITE_NAME} ASCII letters, digits, '.', '_' and '-', starting with a letter or a digit"
)
_NAME = re.compile(SUITE_NAME_PATTERN.removeprefix("^").removesuffix("$"))  # fullmatch: "$" passes a final "\n"
_ALLOWED = re.compile(r"[A-Za-z0-9._-]")


def suite_name_problem(name: str) -> str | None:
    """Why ``name`` breaks the rule (one sentence naming the character or the length), else None."""
    if _NAME.fullmatch(name):
        return None
    if not name:
        why = "is empty"
    elif len(name) > MAX_SUITE_NAME:
        why = f"is {len(name)} characters long"
    elif bad := next((c for c in name if not _ALLOWED.fullmatch(c)), None):
        why = f"holds {_shown(bad)}"
    else:
        why = f"starts with {_shown(name[0])}"
    return f"{why}: {SUITE_NAME_RULE}"


def check_suite_name(name: str) -> str:
    """``name`` when it follows the rule; raises ``ValueError`` (the reason) when not."""
    why = suite_name_problem(name)
    if why:
        raise ValueError(why)
    return name


def _shown(c: str) -> str:
    """A character as a message shows it: ``'/'``, ``' '``, ``U+000A`` (a control character)."""
    if c.isprintable():
        return repr(c)
    kind = " (control characters are refused)" if unicodedata.category(c) == "Cc" else ""
    return f"U+{ord(c):04X}{kind}"
