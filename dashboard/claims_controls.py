"""/claims' issue-20 section: the verdict decided against the random-init controls beside the
majority-floor verdict (claims 1–3), claim 4's verdict beside its readings without the random
removal and the removal rule, fragile verdicts with their threshold-agreement counts, and the parts
a claim could not test (docs/SCIENCE.md#controls, #class-stability, #plateau). Reads only the
claim's ``numbers``; a claim without these keys gets no section."""

from __future__ import annotations

from typing import Any

from dash import html

from dashboard.data_attrs import data_attrs
from dashboard.theme import VERDICT_CLASS, task_label

# the ``numbers`` keys this section shows (the generic numbers list leaves them out)
SECTION_KEYS = (
    "floor",
    "majority_floor",
    "without_controls",
    "fragile",
    "fragile_cells",
    "class_condition_agreement",
    "untestable",
)


def _badge(verdict: str, prefix: str = "") -> html.Span:
    return html.Span(
        f"{prefix}{verdict}",
        className=f"badge {VERDICT_CLASS.get(verdict, 'badge-nodata')}",
        **data_attrs(verdict=verdict),
    )


def header_badges(claim: dict[str, Any]) -> list[Any]:
    """Badges beside the verdict: ``fragile`` when a class the verdict reads flips within the
    threshold margins; ``vs majority: <verdict>`` when the majority-floor verdict differs."""
    n = claim.get("numbers") or {}
    out: list[Any] = []
    if n.get("fragile"):
        out.append(
            html.Span(
                "fragile",
                className="badge badge-flip",
                id=f"claim-{claim.get('id')}-fragile",
                title="a class this verdict reads flips when the rule's thresholds move by their "
                "documented margins (docs/SCIENCE.md#class-stability)",
            )
        )
    mf = n.get("majority_floor")
    if isinstance(mf, dict) and mf.get("verdict") and mf["verdict"] != claim.get("verdict"):
        out.append(html.Span(f"vs majority: {mf['verdict']}", className="badge badge-nodata badge-alt"))
    return out


def agreement_lines(agreement: Any) -> list[str]:
    """``Dyck: the class condition comes out the same under 79 of 81 threshold settings``."""
    if not isinstance(agreement, dict):
        return []
    out = []
    for task, a in agreement.items():
        if isinstance(a, dict) and a.get("of"):
            out.append(
                f"{task_label(task)}: the class condition comes out the same under {a.get('agree')} of "
                f"{a['of']} threshold settings"
            )
    return out


def controls_section(claim: dict[str, Any]) -> html.Div | None:
    """The verdicts side by side (against the control, against the majority rate), fragility and
    untestable parts; None when the claim carries none of them."""
    n = claim.get("numbers") or {}
    if not any(k in n for k in SECTION_KEYS):
        return None
    verdict = claim.get("verdict", "not enough data")
    floor = n.get("floor")
    mf = n.get("majority_floor") if isinstance(n.get("majority_floor"), dict) else None
    rows: list[Any] = []
    if floor:
        decided = [html.Span(f"Decided against the {floor}: ", className="muted"), _badge(verdict)]
        if mf and mf.get("verdict"):
            decided += [html.Span(" · against the majority rate: ", className="muted"), _badge(mf["verdict"])]
            if mf["verdict"] != verdict:
                decided.append(html.Span(" — the controls change this verdict", className="controls-change"))
        elif floor != "majority rate":
            decided.append(html.Span(" · no majority-floor verdict stored", className="muted"))
        rows.append(html.Div(decided, className="verdict-pair", **data_attrs(floor=str(floor))))
    readings = n.get("without_controls") if isinstance(n.get("without_controls"), dict) else None
    if readings:
        pair: list[Any] = [
            html.Span("Decided beyond random removal of the same rank, on edits that removed: ", className="muted"),
            _badge(verdict),
        ]
        for name, r in readings.items():
            if isinstance(r, dict) and r.get("verdict"):
                pair += [html.Span(f" · {r.get('label', name)}: ", className="muted"), _badge(r["verdict"])]
        if any(isinstance(r, dict) and r.get("verdict") != verdict for r in readings.values()):
            pair.append(html.Span(" — the controls change this verdict", className="controls-change"))
        rows.append(html.Div(pair, className="verdict-pair", **data_attrs(floor="random removal")))
    if "fragile" in n:
        cells = [c for c in (n.get("fragile_cells") or []) if isinstance(c, str)]
        agree = agreement_lines(n.get("class_condition_agreement"))
        if n.get("fragile"):
            head = html.Strong("Fragile: ", className="fragile-mark")
            text = "a class this verdict reads flips when the thresholds move by their documented margins."
        else:
            head = html.Strong("Stable: ", className="stable-mark")
            text = "no class this verdict reads flips within the documented threshold margins."
        items = [html.Li(c) for c in cells] + [html.Li(a, className="muted") for a in agree]
        rows.append(html.Div([head, text, html.Ul(items) if items else None], className="fragility"))
    untestable = [u for u in (n.get("untestable") or []) if isinstance(u, str)]
    if untestable:
        rows.append(
            html.Div(
                [html.Strong("Untestable here: "), html.Ul([html.Li(u) for u in untestable])], className="untestable"
            )
        )
    return html.Div(rows, className="claim-controls", id=f"claim-{claim.get('id')}-controls") if rows else None


def majority_cells(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells of the majority-floor verdict (a table beside the claim's own cells)."""
    mf = (claim.get("numbers") or {}).get("majority_floor")
    cells = mf.get("cells") if isinstance(mf, dict) else None
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []
