"""Two suites on one figure: ``/curves`` with the compared suite's lines overlaid dash-dotted
(the explicit comparison, the only place two suites share a figure; ``dashboard.compare`` holds
its tables)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import esc

SECOND_DASH = "dashdot"  # the compared suite's lines (the chosen suite's keep theirs; "dash" is the baseline)


def overlay_suites(fig_a: go.Figure, fig_b: go.Figure, suite_a: str, suite_b: str) -> go.Figure:
    """``fig_a`` with ``fig_b``'s mean (and seed, selectivity) lines added dash-dotted, on the same
    facets and in the same colours; each trace's name and legend group suffixed with its suite,
    ``meta.suite`` naming it. ``fig_b``'s CI bands and baselines are left out (they would hide
    ``fig_a``'s; the baseline is the task's, the same in both)."""
    fig = go.Figure(fig_a)
    for t in fig.data:
        _tag(t, suite_a, None)
    for t in fig_b.data:
        kind = t.meta.get("kind") if isinstance(t.meta, dict) else None
        if kind not in ("mean", "seed", "selectivity"):
            continue
        _tag(t, suite_b, SECOND_DASH)
        fig.add_trace(t)
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    fig.update_layout(meta={**meta, "suites": [suite_a, suite_b], "second_dash": SECOND_DASH})  # legend names them
    return fig


def _tag(t: Any, suite: str, dash: str | None) -> None:
    meta = dict(t.meta) if isinstance(t.meta, dict) else {}
    meta["suite"] = suite
    t.meta = meta
    if t.name:
        t.name = f"{t.name} · {esc(suite)}"
    if getattr(t, "legendgroup", None):
        t.legendgroup = f"{t.legendgroup}·{suite}"
    if dash and t.type == "scatter" and t.line is not None:
        t.line.dash = dash
