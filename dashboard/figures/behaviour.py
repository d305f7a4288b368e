"""Behaviour by eval length (claim 6, docs/SCIENCE.md#study-claims): token accuracy at L = 40 … 120, a line per family
with its 95% CI over seeds, a facet per task, the training length marked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.common import (
    TraceBatch,
    base_layout,
    ci_band,
    empty_figure,
    esc,
    esc_or,
    finite,
    note_missing,
    t_interval,
    untrained_suffix,
)
from dashboard.figures.curve_lines import UNTRAINED_OPACITY
from dashboard.theme import (
    FAMILIES,
    TASK_ORDER,
    TRAIN_LENGTH,
    family_color,
    family_label,
    family_symbol,
    ordered,
    rgba,
    task_label,
)


def behaviour_rows(runs: Sequence[dict[str, Any]], *, metric: str = "token_acc") -> list[dict[str, Any]]:
    """Aggregate runs' ``behaviour`` ({"40": {"token_acc": …}}) over seeds per (task, family, L).

    Random-init controls (``control`` set) are left out: they are no run of the study, and their
    chance-level accuracy averaged into a trained cell's halves it (the paper-steps report drew
    LSTM × parity at 75 % this way). A row counts its runs marked ``trained: false``
    (``untrained``), so the figure can say which lines include them."""
    vals: dict[tuple, list[float]] = defaultdict(list)
    seeds: dict[tuple, list] = defaultdict(list)
    untrained: dict[tuple, int] = defaultdict(int)
    for run in runs:
        if run.get("control"):
            continue
        for L, b in (run.get("behaviour") or {}).items():
            v = (b or {}).get(metric)
            if finite(v):
                key = (run["task"], run["family"], int(L))
                vals[key].append(float(v))
                seeds[key].append(run.get("seed"))
                untrained[key] += run.get("trained") is False
    out = []
    for (task, fam, L), vs in sorted(vals.items()):
        mean, lo, hi = t_interval(vs)
        out.append(
            {
                "task": task,
                "family": fam,
                "eval_length": L,
                "mean": mean,
                "lo": lo,
                "hi": hi,
                "n": len(vs),
                "untrained": untrained[(task, fam, L)],
                "seeds": seeds[(task, fam, L)],
            }
        )
    return out


def length_generalisation(rows: Sequence[dict[str, Any]], *, metric_label: str = "token accuracy") -> go.Figure:
    if not rows:
        return empty_figure("No behavioural results for this selection")
    n_missing = sum(not finite(r.get("mean")) for r in rows)
    if n_missing == len(rows):
        return empty_figure(f"No behavioural accuracy to draw: all {len(rows)} points have no value")
    metric_label = esc(metric_label)
    tasks = ordered([r["task"] for r in rows], TASK_ORDER)
    fig = make_subplots(
        rows=1,
        cols=len(tasks),
        subplot_titles=[esc(task_label(t)) for t in tasks],
        shared_yaxes=True,
        horizontal_spacing=0.035,
    )
    done = set()
    batch = TraceBatch(fig)
    legend_of = _legend_labels(rows)
    for ci, task in enumerate(tasks, start=1):
        facet = [r for r in rows if r["task"] == task]
        for fam in ordered([r["family"] for r in facet], FAMILIES):
            pts = sorted((r for r in facet if r["family"] == fam), key=lambda r: r["eval_length"])
            xs = [r["eval_length"] for r in pts]
            c = family_color(fam)
            label = esc(family_label(fam))
            n_untrained = max(int(r.get("untrained") or 0) for r in pts)
            batch.add(
                ci_band(
                    xs,
                    [r.get("lo") for r in pts],
                    [r.get("hi") for r in pts],
                    color=rgba(c, 0.16),
                    name=f"{label} 95% CI",
                    legendgroup=fam,
                    meta={"kind": "ci", "family": fam, "task": task},
                ),
                row=1,
                col=ci,
            )
            batch.add(
                go.Scatter(
                    x=xs,
                    y=[r.get("mean") if finite(r.get("mean")) else None for r in pts],
                    mode="lines+markers",
                    name=legend_of[fam],
                    legendgroup=fam,
                    showlegend=fam not in done,
                    opacity=UNTRAINED_OPACITY if n_untrained else 1.0,
                    line={"color": c, "width": 2.5, "dash": "dash" if n_untrained else "solid"},
                    marker={"symbol": family_symbol(fam), "size": 8, "color": c},
                    customdata=[[_ci(r), esc_or(r.get("n"), "?")] for r in pts],
                    hovertemplate=f"<b>{label}</b> · L = %{{x}}<br>{metric_label} %{{y:.1%}} "
                    "%{customdata[0]}<br>n = %{customdata[1]} seeds<extra></extra>",
                    meta={"kind": "mean", "family": fam, "task": task},
                ),
                row=1,
                col=ci,
            )
            done.add(fam)
    batch.flush()
    for ci in range(1, len(tasks) + 1):
        fig.add_vline(x=TRAIN_LENGTH, line={"color": "#9aa5b1", "dash": "dot"}, row=1, col=ci)
    base_layout(fig, height=400)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.04])
    fig.update_yaxes(title_text=metric_label, row=1, col=1)
    fig.update_xaxes(title_text="eval length L (train length 40, dotted)")
    fig.update_layout(meta={"figure": "length_generalisation"})
    return note_missing(fig, n_missing, len(rows), "points")


def _legend_labels(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """A family's legend label, with " (untrained: k of n)" over its tasks' runs (each task's
    count read at its shortest eval length) when any is untrained, as the layer curves do."""
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["eval_length"]):
        first.setdefault((r["task"], r["family"]), r)
    out: dict[str, str] = {}
    for fam in {r["family"] for r in rows}:
        cells = [r for (_, f), r in first.items() if f == fam]
        n_untrained = sum(int(r.get("untrained") or 0) for r in cells)
        n_total = sum(int(r.get("n") or 0) for r in cells)
        out[fam] = esc(family_label(fam)) + untrained_suffix(n_untrained, n_total)
    return out


def _ci(r: dict[str, Any]) -> str:
    lo, hi = r.get("lo"), r.get("hi")
    return f"[{100 * lo:.1f}%, {100 * hi:.1f}%]" if finite(lo) and finite(hi) else ""
