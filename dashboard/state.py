"""Page state ⇄ URL query string.

Every page declares its state as a list of typed fields. The query string is the source of
truth (reload and back restore the page); saved views store the same dict. Lists are
comma-separated (``tasks=parity,s3``); booleans are ``1``/``0``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

GLOBAL_KEYS = ("embed", "fig")  # ?embed=1 shows the figures alone; &fig=<graph id> picks one
# The range every integer field is clamped into when it sets none: the API's (and SQLite's)
# 32-bit integers, well inside JSON's exact range (a 20-digit page number broke the encoder).
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def parse_int(raw: Any) -> int | None:
    """An integer from a query value (str) or a JSON value; None for anything else (NaN, inf,
    2.5, ``"x"``, booleans, lists). Not clamped."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() else None  # NaN / inf are not integers
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:  # also Python's cap on the digits of an int
            return None
    return None


@dataclass(frozen=True)
class F:
    name: str
    kind: str  # str | int | bool | list_str | list_int
    default: Any = None
    # allowed values (for str / list_str), or a function returning them when a value is parsed
    # (the registry's ``family_names``: a family registered later is accepted); others are dropped
    choices: tuple | Callable[[], tuple] | None = None
    aliases: tuple[str, ...] = ()  # other query keys accepted on the way in (links from the claims)
    lo: int = INT_MIN  # int / list_int: values are clamped into [lo, hi]
    hi: int = INT_MAX

    def allowed(self) -> tuple | None:
        """The allowed values now (None = any)."""
        return self.choices() if callable(self.choices) else self.choices

    def _int(self, raw: Any) -> int | None:
        """``raw`` as an integer clamped into [lo, hi] (None when it is not an integer, or not
        one of ``choices``)."""
        v = parse_int(raw)
        if v is None:
            return None
        v = min(max(v, self.lo), self.hi)
        choices = self.allowed()
        return v if choices is None or v in choices else None

    def parse(self, raw: Any) -> Any:
        """Parse a query value (str) or a saved-view value (any JSON) into this field's type:
        integers clamped into [lo, hi]; a value of the wrong type (a list for a string, NaN
        for an integer) is the field's default; a list keeps its valid items."""
        choices = self.allowed()
        try:
            if self.kind == "str":
                if (raw is not None and not isinstance(raw, (str, int, float))) or isinstance(raw, bool):
                    return self.default
                v = None if raw in (None, "") else str(raw)
                return v if v is None or choices is None or v in choices else self.default
            if self.kind == "int":
                if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none")):
                    return None
                n = self._int(raw)
                return self.default if n is None else n
            if self.kind == "bool":
                if isinstance(raw, bool):
                    return raw
                # as the API's booleans; anything else (``?trained=maybe``) is the field's default,
                # never a silent "off"
                word = str(raw).strip().lower()
                if word in ("1", "true", "yes", "on"):
                    return True
                if word in ("0", "false", "no", "off"):
                    return False
                return self.default
            if self.kind in ("list_str", "list_int"):
                if raw is None:
                    return list(self.default) if isinstance(self.default, (list, tuple)) else self.default
                if isinstance(raw, (list, tuple)):
                    items = [x for x in raw if isinstance(x, (str, int, float)) and not isinstance(x, bool)]
                elif isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
                    items = [x for x in str(raw).split(",") if x != ""]
                else:
                    return list(self.default) if isinstance(self.default, (list, tuple)) else self.default
                if self.kind == "list_int":
                    valid = [v for v in (self._int(x) for x in items) if v is not None]
                    if items and not valid:  # nothing usable (``?lengths=forty``): the default
                        return list(self.default) if isinstance(self.default, (list, tuple)) else self.default
                    return valid
                items = [str(x) for x in items]
                return [x for x in items if choices is None or x in choices]
        except (TypeError, ValueError):
            return self.default
        return raw

    def dump(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.kind == "bool":
            return "1" if value else "0"
        if self.kind in ("list_str", "list_int"):
            return ",".join(str(x) for x in value)
        return str(value)


@dataclass
class PageState:
    fields: list[F] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def defaults(self) -> dict[str, Any]:
        return {f.name: (list(f.default) if isinstance(f.default, (list, tuple)) else f.default) for f in self.fields}

    def from_dict(self, data: dict[str, Any] | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults ⊕ ``base`` ⊕ ``data`` (each parsed; unknown keys dropped)."""
        out = self.defaults()
        for layer in (base or {}), (data or {}):
            if not isinstance(layer, dict):  # a saved view's state or a store's data, tampered with
                continue
            for f in self.fields:
                key = f.name if f.name in layer else next((a for a in f.aliases if a in layer), None)
                if key is not None:
                    out[f.name] = f.parse(layer[key])
        return out

    def decode(self, search: str | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.from_dict(parse_search(search), base)

    def encode(self, state: dict[str, Any], *, keep: dict[str, str] | None = None) -> str:
        """The query string (with ``?``) for ``state``; every field is written so the URL
        says exactly what is shown. ``keep``: global keys (``embed``) carried over."""
        pairs = []
        for f in self.fields:
            s = f.dump(state.get(f.name))
            if s is not None:
                pairs.append((f.name, s))
        for k, v in (keep or {}).items():
            pairs.append((k, v))
        return "?" + urlencode(pairs, safe=",") if pairs else ""

    def value(self, name: str, raw: Any) -> Any:
        """One control's value parsed as field ``name`` (a callback's input, which a tampered
        request may send with any JSON type)."""
        return self.from_dict({name: raw})[name]

    def to_json(self, state: dict[str, Any]) -> dict[str, Any]:
        return {f.name: state.get(f.name) for f in self.fields}


def parse_search(search: str | None) -> dict[str, str]:
    """The query string's keys and their last values ({} for no string, or a value that is not
    a string: the URL's ``search`` is always one in a browser)."""
    if not search or not isinstance(search, str):
        return {}
    q = parse_qs(search.lstrip("?"), keep_blank_values=True)
    return {k: v[-1] for k, v in q.items()}


def global_flags(search: str | None) -> dict[str, str]:
    q = parse_search(search)
    return {k: q[k] for k in GLOBAL_KEYS if k in q and q[k] not in ("", "0")}


def is_embed(search: str | None) -> bool:
    return "embed" in global_flags(search)


def embed_figure(search: str | None) -> str | None:
    return parse_search(search).get("fig") or None
