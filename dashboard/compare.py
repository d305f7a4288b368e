"""Two suites side by side (the explicit comparison: the only place two suites share a page).

Plain functions: rows in, rows / a table / a figure out. ``/claims`` shows each verdict in both
suites, ``/reversal`` each cell's profile class in both, ``/curves`` overlays the second suite's
lines dashed; a row whose value differs between the suites is marked (``changed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import html

from dashboard.data_attrs import data_attrs
from dashboard.theme import family_label, task_label


def claims_side_by_side(a: Sequence[dict], b: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per claim id: ``id``, ``title``, ``verdict_a``, ``verdict_b``, ``changed``."""
    by_b = {c.get("id"): c for c in b}
    ids = [c.get("id") for c in a] + [i for i in by_b if i not in {c.get("id") for c in a}]
    by_a = {c.get("id"): c for c in a}
    out = []
    for i in ids:
        ca, cb = by_a.get(i) or {}, by_b.get(i) or {}
        va, vb = ca.get("verdict"), cb.get("verdict")
        out.append(
            {
                "id": i,
                "title": ca.get("title") or cb.get("title"),
                "verdict_a": va,
                "verdict_b": vb,
                "changed": va != vb,
            }
        )
    return out


def classes_side_by_side(a: Sequence[dict], b: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per (task, family, pretrained, eval length) present in either suite's profiles:
    ``class_a`` / ``class_b`` (None where a suite has no profile), ``n_a`` / ``n_b`` (seeds),
    ``changed``. Ordered by task, family."""

    def key(p: dict) -> tuple:
        return (p["task"], p["family"], p.get("pretrained") or "", p.get("eval_length"))

    by_a, by_b = {key(p): p for p in a}, {key(p): p for p in b}
    out = []
    for k in sorted(set(by_a) | set(by_b), key=lambda k: (k[0], k[1], k[2], k[3] or 0)):
        pa, pb = by_a.get(k) or {}, by_b.get(k) or {}
        ca, cb = pa.get("profile_class"), pb.get("profile_class")
        out.append(
            {
                "task": k[0],
                "family": k[1],
                "pretrained": k[2] or None,
                "eval_length": k[3],
                "class_a": ca,
                "class_b": cb,
                "n_a": pa.get("n"),
                "n_b": pb.get("n"),
                "changed": ca != cb,
            }
        )
    return out


def side_by_side_table(
    rows: Sequence[dict], columns: Sequence[tuple[str, str]], *, suite_a: str, suite_b: str, table_id: str
) -> html.Div:
    """A table of ``rows`` (``columns``: (key, header); ``_a`` / ``_b`` headers name the suites);
    a changed row carries class ``changed`` and a ≠ mark. A summary line counts the changes."""

    def header(key: str, title: str) -> str:
        if key.endswith("_a"):
            return f"{title} · {suite_a}"
        if key.endswith("_b"):
            return f"{title} · {suite_b}"
        return title

    def cell(key: str, v: Any) -> str:
        if v is None:
            return "–"
        if key == "task":
            return task_label(v)
        if key == "family":
            return family_label(v)
        return str(v)

    head = html.Thead(html.Tr([html.Th("")] + [html.Th(header(k, t)) for k, t in columns]))
    body = [
        html.Tr(
            [html.Td("≠" if r.get("changed") else "", className="change-mark")]
            + [html.Td(cell(k, r.get(k))) for k, _ in columns],
            className="changed" if r.get("changed") else None,
            **data_attrs(changed="1" if r.get("changed") else "0"),
        )
        for r in rows
    ]
    n = sum(bool(r.get("changed")) for r in rows)
    summary = html.P(f"{n} of {len(rows)} differ between {suite_a} and {suite_b} (marked ≠).", className="muted")
    return html.Div(
        [
            summary,
            html.Div(
                html.Table([head, html.Tbody(body)], className="table table-compact compare-table", id=table_id),
                className="table-wrap",
            ),
        ]
    )
