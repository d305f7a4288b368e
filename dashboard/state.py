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


@dataclass(frozen=True)
class F:
    name: str
    kind: str  # str | int | bool | list_str | list_int
    default: Any = None
    # allowed values (for str / list_str), or a function returning them when a value is parsed
    # (the registry's ``family_names``: a family registered later is accepted); others are dropped
    choices: tuple | Callable[[], tuple] | None = None
    aliases: tuple[str, ...] = ()  # other query keys accepted on the way in (links from the claims)

    def allowed(self) -> tuple | None:
        """The allowed values now (None = any)."""
        return self.choices() if callable(self.choices) else self.choices

    def parse(self, raw: Any) -> Any:
        """Parse a query value (str) or a saved-view value (any JSON) into this field's type."""
        choices = self.allowed()
        try:
            if self.kind == "str":
                v = None if raw in (None, "") else str(raw)
                return v if v is None or choices is None or v in choices else self.default
            if self.kind == "int":
                return None if raw in (None, "", "none") else int(raw)
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
                items = raw if isinstance(raw, (list, tuple)) else [x for x in str(raw).split(",") if x != ""]
                if self.kind == "list_int":
                    return [int(x) for x in items]
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

    def to_json(self, state: dict[str, Any]) -> dict[str, Any]:
        return {f.name: state.get(f.name) for f in self.fields}


def parse_search(search: str | None) -> dict[str, str]:
    if not search:
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
