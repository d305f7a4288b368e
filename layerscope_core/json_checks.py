"""Checks on a JSON document that a JSON schema cannot express, done without recursion.

Every request body the API stores must read back: Python's ``json`` module accepts ``NaN``,
``Infinity`` and ``1e400`` (→ inf), which are not JSON and which PostgreSQL refuses (SQLite
stores them as invalid JSON); ``"\\ud800"`` escapes decode to lone surrogates that cannot be
encoded as UTF-8; and deeply nested documents overflow the recursive encoders and validators
downstream (``RecursionError``). So a body is refused (422, the field named) when

* it nests deeper than :data:`MAX_JSON_DEPTH` arrays/objects (counted on the raw bytes,
  before parsing, by a flat scan);
* any number in it is not finite;
* any string in it (object keys too) breaks the text rule of :mod:`layerscope_core.text`.

Errors are dicts shaped like FastAPI's validation errors: ``{"type", "loc", "msg"}``, with
``loc`` starting at ``"body"``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from layerscope_core.text import printable, text_problem

MAX_JSON_DEPTH = 32
"""Most nested arrays/objects a request body may have (the top-level object counts as 1)."""

MAX_ERRORS = 20

_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_LBRACKET, _COLON, _COMMA, _QUOTE = ord("["), ord(":"), ord(","), ord('"')

Loc = tuple[str | int, ...]


def _key(token: bytes) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        key = token[1:-1].decode("utf-8", "replace")
    return printable(key)


def depth_error(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any] | None:
    """The error for a document nested deeper than ``max_depth``, else None.

    A flat scan over string literals and structural characters of the raw bytes (no parsing,
    no recursion); the error's ``loc`` is the path to the first container that is too deep.
    """
    if raw.count(b"[") + raw.count(b"{") <= max_depth:  # fast path: cannot be too deep
        return None
    path: list[str | int | None] = []  # per open container: its current key or index
    kinds: list[int] = []
    last_string = b""
    for m in _TOKEN.finditer(raw):
        token = m.group()
        c = token[0]
        if c == _QUOTE:
            last_string = token
        elif c in _OPEN:
            if len(kinds) >= max_depth:
                loc = ("body", *(p for p in path if p is not None))
                return {"type": "json_too_deep", "loc": loc, "msg": f"nested deeper than {max_depth} arrays/objects"}
            kinds.append(c)
            path.append(0 if c == _LBRACKET else None)
        elif c in _CLOSE:
            if kinds:
                kinds.pop()
                path.pop()
        elif c == _COLON and path:
            path[-1] = _key(last_string)
        elif c == _COMMA and kinds and kinds[-1] == _LBRACKET:
            path[-1] = int(path[-1] or 0) + 1
    return None


def value_errors(doc: Any, prefix: Loc = ("body",), max_depth: int = MAX_JSON_DEPTH) -> list[dict[str, Any]]:
    """Errors for containers nested deeper than ``max_depth`` (``doc`` itself, when a dict or
    list, is level 1), non-finite numbers and bad strings anywhere in a parsed document.

    Iterative (an explicit stack), at most :data:`MAX_ERRORS`, in document order.
    """
    errors: list[dict[str, Any]] = []
    stack: list[tuple[Loc, Any, int]] = [(prefix, doc, 1)]
    while stack and len(errors) < MAX_ERRORS:
        loc, v, depth = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                errors.append(
                    {
                        "type": "finite_number",
                        "loc": loc,
                        "msg": "must be a finite number (not NaN, Infinity, or beyond ±1.8e308)",
                    }
                )
        elif isinstance(v, str):
            problem = text_problem(v)
            if problem:
                errors.append({"type": problem[0], "loc": loc, "msg": problem[1]})
        elif isinstance(v, (dict, list, tuple)) and depth > max_depth:
            errors.append(
                {"type": "json_too_deep", "loc": loc, "msg": f"nested deeper than {max_depth} arrays/objects"}
            )
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                key = printable(k) if isinstance(k, str) else k
                problem = text_problem(k) if isinstance(k, str) else None
                if problem:
                    errors.append({"type": problem[0], "loc": (*loc, key), "msg": "key " + problem[1]})
                stack.append(((*loc, key), x, depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend(((*loc, i), x, depth + 1) for i, x in reversed(list(enumerate(v))))
    return errors[:MAX_ERRORS]


def encoding_error(raw: bytes) -> str | None:
    """Why the raw body is not UTF-8 text, or None. JSON exchanged between systems is UTF-8 (RFC
    8259, section 8.1): a body that Python's ``json`` would read as UTF-16 or UTF-32 (told by its
    first bytes) is refused too, naming the encoding it looks like; a UTF-8 byte-order mark is
    ignored, as the RFC allows. Escaped lone surrogates (``"\\ud800"``) are text here: the text
    rule refuses them at their field."""
    encoding = json.detect_encoding(raw)
    if encoding not in ("utf-8", "utf-8-sig"):
        return f"request body: {encoding.upper()}, not UTF-8 (RFC 8259 section 8.1); send the JSON encoded as UTF-8"
    try:
        raw.decode(encoding, "surrogatepass")  # as json.loads decodes bytes
    except UnicodeDecodeError as e:
        return (
            f"request body: not valid UTF-8 (bytes {raw[e.start : e.end]!r} at offset {e.start}); "
            "send the JSON encoded as UTF-8"
        )
    return None


def body_errors(raw: bytes) -> list[dict[str, Any]]:
    """All of the above for a raw JSON body; ``[]`` for a fine body or one that is not JSON
    (the framework's parser reports that)."""
    too_deep = depth_error(raw)
    if too_deep:
        return [too_deep]
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return []
    return value_errors(doc)
