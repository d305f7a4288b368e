"""Refuse malformed Dash callback requests with a 400 before Dash dispatches them.

Dash's ``POST /_dash-update-component`` trusts its body: an unknown ``output`` is a
``KeyError``, a number where the renderer always sends a string an ``AttributeError`` deep in a
callback — each a 500 and a traceback in the log. The browser never sends such bodies; a
script or a fuzzer does. This guard checks the body's shape against the callback registered for
``output`` (the same ids and properties, in order) and each value against the JSON type its
property can hold, and answers 400 naming the field and the reason. Values of the right JSON
type but the wrong meaning (a string where a list of tasks is expected) are the callbacks' to
parse: the page-state fields (:mod:`dashboard.state`) clamp or drop them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dash import Dash

UPDATE_ROUTE = "_dash-update-component"

_SCALAR = (str, int, float, bool)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, _SCALAR)


def _value(v: Any) -> bool:
    """A control's ``value``: a scalar, or a list of scalars (multi-select, checklist)."""
    return _is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v))


def _count(v: Any) -> bool:
    """A click or interval counter: a non-negative integer (JSON numbers may come as 3.0)."""
    if v is None:
        return True
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return v >= 0 and float(v).is_integer()


def _text(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _mapping(v: Any) -> bool:
    return v is None or isinstance(v, dict)


def _rows(v: Any) -> bool:
    return v is None or (isinstance(v, list) and all(isinstance(x, dict) for x in v))


def _component_id(v: Any) -> bool:
    return isinstance(v, (str, dict))


def _any(v: Any) -> bool:
    return True


# What each property the dashboard's callbacks read can hold (Dash's component prop types).
PROP_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "search": (_text, "a string"),
    "pathname": (_text, "a string"),
    "className": (_text, "a string"),
    "n_clicks": (_count, "a non-negative integer"),
    "n_intervals": (_count, "a non-negative integer"),
    "style": (_mapping, "an object"),
    "selectedRows": (_rows, "a list of objects"),
    "id": (_component_id, "a string or an object"),
    "value": (_value, "a string, number, boolean or a list of them"),
    "data": (_any, "any JSON"),
}


def _same_id(sent: Any, declared: str) -> bool:
    """The id the renderer sends (a string, or a pattern-matching dict) against the declared
    one (a string, or a JSON dict with ``["ALL"]`` wildcards)."""
    if isinstance(sent, str):
        return sent == declared
    if not isinstance(sent, dict):
        return False
    try:
        pattern = json.loads(declared)
    except ValueError:
        return False
    if not isinstance(pattern, dict) or set(pattern) != set(sent):
        return False
    return all(isinstance(p, list) or sent[k] == p for k, p in pattern.items())


def _is_wildcard(declared: str) -> bool:
    return declared.startswith("{") and '["ALL"]' in declared.replace(" ", "")


def _item_error(item: Any, declared: dict[str, str], where: str) -> str | None:
    if not isinstance(item, dict):
        return f"{where}: expected an object with id, property and value"
    prop = declared["property"]
    if item.get("property") != prop or not _same_id(item.get("id"), declared["id"]):
        return f"{where}: expected {declared['id']}.{prop}"
    check, what = PROP_CHECKS.get(prop, (_any, ""))
    if "value" in item and not check(item["value"]):
        return f"{where} ({declared['id']}.{prop}): expected {what}"
    return None


def _group_error(sent: Any, declared: list[dict[str, str]], name: str) -> str | None:
    if not isinstance(sent, list) or len(sent) != len(declared):
        return f"{name}: expected a list of {len(declared)} item(s)"
    for i, (item, dec) in enumerate(zip(sent, declared, strict=True)):
        where = f"{name}[{i}]"
        if _is_wildcard(dec["id"]):
            if not isinstance(item, list):
                return f"{where}: expected a list (pattern-matching id {dec['id']})"
            for j, sub in enumerate(item):
                if (err := _item_error(sub, dec, f"{where}[{j}]")) is not None:
                    return err
        elif (err := _item_error(item, dec, where)) is not None:
            return err
    return None


def request_error(callback_map: dict[str, dict[str, Any]], body: Any) -> str | None:
    """Why ``body`` is not a callback request the app can answer (None: it is).

    ``callback_map``: ``Dash.callback_map``. Checks ``output`` names a server-side callback,
    ``inputs`` and ``state`` list its declared ids/properties in order with values of their
    property's JSON type, and ``changedPropIds`` is a list of strings."""
    if not isinstance(body, dict):
        return "body: expected a JSON object"
    output = body.get("output")
    if not isinstance(output, str):
        return "output: expected a string"
    cb = callback_map.get(output)
    if cb is None or "callback" not in cb:
        return f"output: no server-side callback for {output[:200]!r}"
    for name in ("inputs", "state"):
        if (err := _group_error(body.get(name, []), cb.get(name, []), name)) is not None:
            return err
    changed = body.get("changedPropIds", [])
    if not isinstance(changed, list) or not all(isinstance(x, str) for x in changed):
        return "changedPropIds: expected a list of strings"
    return _outputs_error(body.get("outputs"), cb["output"])


def _spec_matches(spec: Any, declared: dict[str, str]) -> bool:
    return (
        isinstance(spec, dict)
        and isinstance(spec.get("property"), str)
        and spec["property"].split("@")[0] == declared["property"].split("@")[0]
        and _same_id(spec.get("id"), declared["id"])
    )


def _outputs_error(sent: Any, output: Any) -> str | None:
    """The ``outputs`` spec as the renderer sends it: one entry per declared output (a list
    of entries for a pattern-matching one), each naming that output's id and property."""
    multi = isinstance(output, (list, tuple))
    declared = [o.to_dict() for o in (output if multi else [output])]
    entries = sent if multi else [sent]
    if not isinstance(entries, list) or len(entries) != len(declared):
        return f"outputs: expected {len(declared)} output spec(s)"
    for i, (entry, dec) in enumerate(zip(entries, declared, strict=True)):
        specs = entry if _is_wildcard(dec["id"]) and isinstance(entry, list) else [entry]
        if not all(_spec_matches(x, dec) for x in specs):
            return f"outputs[{i}]: expected {dec['id']}.{dec['property'].split('@')[0]}"
    return None


def install(app: Dash) -> None:
    """Check every ``POST …/_dash-update-component`` with :func:`request_error`; 400 on a
    malformed one (JSON ``{"detail": reason}``), before Dash dispatches it."""
    import flask

    route = app.config.routes_pathname_prefix + UPDATE_ROUTE

    @app.server.before_request
    def _guard():
        if flask.request.method != "POST" or flask.request.path != route:
            return None
        body = flask.request.get_json(silent=True)
        reason = request_error(app.callback_map, body)
        if reason is None:
            return None
        return flask.jsonify({"detail": f"bad callback request: {reason}"}), 400
