"""/claims' table per claim: the verdict, the numbers with their intervals, the cells it read and
what it left out, one row each — the claim's prose and full tables sit one click away below it
(dashboard/pages/claims.py). Plain functions: a claim (``/api/claims`` item) in, a component out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import html

from dashboard.claims_controls import SECTION_KEYS
from dashboard.theme import VERDICT_CLASS, family_label, task_label

# the rule's settings (thresholds, test, floor): one "rule" row, not mixed with the measured numbers
RULE_KEYS = (
    "floor",
    "test_statistic",
    "alpha",
    "match_fraction_required",
    "min_seeds",
    "refit_tolerance",
    "margin_pp_required",
    "decoupled_share_min",
    "state_patching",
)
# what the claim read: tables of cells / runs (counted here, shown in full under "why / full text")
READ_KEYS = ("cells", "trained_cells", "runs", "groups", "tasks", "families", "lengths_used", "ood_lengths")
# what it left out
LEFT_OUT_KEYS = ("runs_left_out", "runs_excluded_undertrained", "untestable")


def _is_number(v: Any) -> bool:
    """A scalar, a CI (``{mean, lo, hi, n}``) or a test (``{p, ...}``): one value in the table."""
    if isinstance(v, dict):
        return "mean" in v or "p" in v or "p_value" in v
    return isinstance(v, (int, float))  # bool included


def cell_name(row: dict[str, Any]) -> str | None:
    """``LSTM × Parity`` for a row with a task and a family; None otherwise."""
    if isinstance(row, dict) and row.get("task") and row.get("family"):
        return f"{family_label(row['family'])} × {task_label(row['task'])}"
    return None


def cells_read(numbers: dict[str, Any]) -> list[str]:
    """The cells (family × task) the claim read, in order, each once; from its cell / run tables."""
    out: list[str] = []
    for key in READ_KEYS:
        v = numbers.get(key)
        rows = v if isinstance(v, list) else list(v.values()) if isinstance(v, dict) else []
        for r in rows:
            name = cell_name(r) if isinstance(r, dict) else None
            if name and name not in out:
                out.append(name)
    return out


def read_summary(numbers: dict[str, Any]) -> str:
    """``6 cells: LSTM × Parity, GRU × Parity, …`` or what the claim's tables hold when they name
    no cell (``4 tasks``); ``none`` when it read nothing."""
    cells = cells_read(numbers)
    if cells:
        shown = ", ".join(cells[:8]) + (f", and {len(cells) - 8} more" if len(cells) > 8 else "")
        return f"{len(cells)} cell{'s' * (len(cells) != 1)}: {shown}"
    sizes = [
        f"{len(numbers[k])} {k.replace('_', ' ')}"
        for k in READ_KEYS
        if isinstance(numbers.get(k), (list, dict)) and numbers[k]
    ]
    return "; ".join(sizes) or "none"


def left_out_summary(numbers: dict[str, Any]) -> str:
    """``2 untrained runs (LSTM × S3 seed 1: plateaued; …)`` and the untestable parts; ``nothing``."""
    parts: list[str] = []
    runs = [r for r in numbers.get("runs_left_out") or [] if isinstance(r, dict)]
    if runs:
        named = "; ".join(
            f"{cell_name(r) or 'run ' + str(r.get('run_id'))} seed {r.get('seed')}: {r.get('reason', '')}"
            for r in runs[:3]
        )
        more = f"; and {len(runs) - 3} more" if len(runs) > 3 else ""
        parts.append(f"{len(runs)} untrained run{'s' * (len(runs) != 1)} ({named}{more})")
    untestable = [u for u in numbers.get("untestable") or [] if isinstance(u, str)]
    if untestable:
        parts.append(f"untestable: {'; '.join(untestable)}")
    return " · ".join(parts) or "nothing"


def measured_numbers(numbers: dict[str, Any], skip: set[str]) -> list[tuple[str, str, Any]]:
    """(label, key, value) of each measured number: top-level scalars, CIs and tests, and the
    per-task ones one level down (``test_auc {dyck: {diff, p}}`` → ``test auc dyck``)."""
    out = []
    for k, v in numbers.items():
        if k in skip or v is None:
            continue
        if _is_number(v):
            out.append((k.replace("_", " "), k, v))
        elif isinstance(v, dict):
            out.extend(
                (f"{k.replace('_', ' ')} {sub}", k, x) for sub, x in v.items() if isinstance(x, dict) and _is_number(x)
            )
    return out


def _row(label: str, value: Any, cls: str) -> html.Tr:
    return html.Tr([html.Th(label, scope="row"), html.Td(value)], className=cls)


def claim_table(claim: dict[str, Any], fmt: Callable[[Any, str], str]) -> html.Table:
    """One claim as a two-column table: verdict, the measured numbers (CIs as ``mean [lo, hi]
    (n)``, tests as ``p = …``; ``fmt`` formats one value under its key), the rule it applied, the
    cells it read and what it left out. Keys it does not show here stay in the full text."""
    n = claim.get("numbers") or {}
    verdict = claim.get("verdict", "not enough data")
    skip = {*RULE_KEYS, *READ_KEYS, *LEFT_OUT_KEYS, *SECTION_KEYS}  # the section: under the full text
    measured = [
        html.Li([html.Span(label, className="muted"), " ", fmt(v, k)]) for label, k, v in measured_numbers(n, skip)
    ]
    rule = [f"{k.replace('_', ' ')} {fmt(n[k], k)}" for k in RULE_KEYS if n.get(k) is not None]
    rows = [
        _row(
            "verdict",
            html.Span(verdict, className=f"badge {VERDICT_CLASS.get(verdict, 'badge-nodata')}"),
            "ct-verdict",
        ),
        _row("numbers", html.Ul(measured, className="ct-numbers") if measured else "none", "ct-numbers-row"),
        _row("cells read", read_summary(n), "ct-read"),
        _row("left out", left_out_summary(n), "ct-left-out"),
    ]
    if rule:
        rows.append(_row("rule", " · ".join(rule), "ct-rule"))
    return html.Table(
        html.Tbody(rows), className="table table-compact claim-table", id=f"claim-{claim.get('id')}-table"
    )
