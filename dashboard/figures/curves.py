"""Layerwise probe curves: a facet per task (× eval length), a line per family with the mean
and 95% CI band over seeds, the majority baseline dashed, optional seed-level traces; and the
per-position variant (accuracy at each position t of the sequence, for one layer). A layerwise
line's traces are built in :mod:`dashboard.figures.curve_lines`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.captions import add_caption
from dashboard.figures.common import (
    TraceBatch,
    base_layout,
    ci_band,
    empty_figure,
    esc,
    esc_or,
    finite,
    note_missing,
    unique,
)
from dashboard.figures.curve_lines import Facet, add_facet_extras, add_line, group_lines, x_or_none
from dashboard.theme import (
    FAMILIES,
    TASK_ORDER,
    TRAIN_LENGTH,
    family_color,
    family_label,
    layer_name,
    length_label,
    ordered,
    rgba,
    task_label,
)

BASELINE_COLOR = "#52606d"


def _facets(rows: Sequence[dict], tasks: Sequence[str] | None, lengths: Sequence[int] | None):
    tasks = (
        ordered([r["task"] for r in rows], TASK_ORDER)
        if tasks is None
        else [t for t in tasks if any(r["task"] == t for r in rows)]
    )
    lengths = (
        sorted(unique(int(r["eval_length"]) for r in rows))
        if lengths is None
        else [int(length) for length in lengths if any(int(r["eval_length"]) == int(length) for r in rows)]
    )
    grid: list[list[tuple[str, int | None]]]
    if len(lengths) > 1:  # rows = tasks, columns = eval lengths side by side (in- vs OOD)
        grid = [[(t, L) for L in lengths] for t in tasks]
        titles = [f"{esc(task_label(t))} · {length_label(L)}" for t in tasks for L in lengths]
    else:
        grid = [[(t, lengths[0] if lengths else None) for t in tasks]]
        titles = [esc(task_label(t)) + (f" · {length_label(lengths[0])}" if lengths else "") for t in tasks]
    return tasks, lengths, grid, titles


def _make_grid(grid, titles, *, x_title: str, y_title: str, row_height: int = 360) -> go.Figure:
    n_rows, n_cols = len(grid), len(grid[0])
    fig = make_subplots(
        rows=n_rows,
        cols=n_cols,
        subplot_titles=titles,
        shared_yaxes=True,
        horizontal_spacing=0.035 if n_cols > 1 else 0.0,
        vertical_spacing=min(0.12, 0.5 / max(n_rows, 1)) if n_rows > 1 else 0.0,
    )
    height = 120 + row_height * n_rows
    base_layout(fig, height=height)
    fig.update_layout(margin={"t": 90}, legend={"y": 1 + 48 / (height - 150), "yanchor": "bottom"})
    fig.update_yaxes(range=[-0.02, 1.04], tickformat=".0%")
    for c in range(1, n_cols + 1):
        fig.update_xaxes(title_text=x_title, row=n_rows, col=c)
    for r in range(1, n_rows + 1):
        fig.update_yaxes(title_text=y_title, row=r, col=1)
    for ann in fig.layout.annotations:  # subplot titles
        ann.font = {"size": 13, "color": "#1f2933"}
    return fig


def _facet_cells(grid: list[list[tuple[str, int | None]]]) -> list[Facet]:
    """The facets of the grid, row by row (1-based places)."""
    return [
        Facet(ri, ci, task, length)
        for ri, grid_row in enumerate(grid, start=1)
        for ci, (task, length) in enumerate(grid_row, start=1)
    ]


def _add_baseline(
    batch: TraceBatch, facet: Facet, facet_rows: Sequence[dict[str, Any]], xs: Sequence[Any], legend_done: set[str]
) -> None:
    """The facet's majority baseline (the mean of its rows'), dashed across the x range ``xs``
    spans; nothing when no row has one."""
    base_vals = [r["majority_baseline"] for r in facet_rows if finite(r.get("majority_baseline"))]
    if not base_vals:
        return
    b = sum(base_vals) / len(base_vals)
    xs_all = [x for x in xs if finite(x)]
    batch.add(
        go.Scatter(
            x=[min(xs_all), max(xs_all)] if xs_all else [],
            y=[b, b] if xs_all else [],
            mode="lines",
            line={"color": BASELINE_COLOR, "width": 1.5, "dash": "dash"},
            name="majority baseline",
            legendgroup="baseline",
            showlegend="baseline" not in legend_done,
            hovertemplate=f"majority baseline {b:.1%}<extra></extra>",
            meta={"kind": "baseline", "task": facet.task, "eval_length": facet.length, "value": b},
        ),
        row=facet.row,
        col=facet.col,
    )
    legend_done.add("baseline")


def layerwise_curves(
    rows: Sequence[dict[str, Any]],
    *,
    x: str = "layer",
    tasks: Sequence[str] | None = None,
    families: Sequence[str] | None = None,
    eval_lengths: Sequence[int] | None = None,
    seed_rows: Sequence[dict[str, Any]] | None = None,
    show_ci: bool = True,
    show_baseline: bool = True,
    show_selectivity: bool = False,
    title: str | None = None,
    control_rows: Sequence[dict[str, Any]] | None = None,
    type_rows: Sequence[dict[str, Any]] | None = None,
    caption: str | None = None,
) -> go.Figure:
    """``rows``: ``/api/curves`` items ``{task, family, eval_length, layer, depth, n_layers,
    mean, lo, hi, n, seeds, majority_baseline, run_ids?, untrained_run_ids?, selectivity?}``.
    ``x``: ``"layer"`` or ``"depth"``. ``seed_rows``: ``{task, family, eval_length, layer, depth,
    n_layers, seed, accuracy}``. A line that includes untrained runs gets the legend suffix
    " (untrained: k of n)" (:func:`dashboard.figures.common.untrained_suffix`) and is drawn faint
    (:data:`dashboard.figures.curve_lines.UNTRAINED_OPACITY`) with open markers.
    ``show_selectivity``: a dotted line per family with the probe's selectivity (accuracy −
    control-task accuracy, Hewitt & Liang 2019) where stored. ``control_rows``: ``/api/curves?controls=only`` items (the random-init controls,
    docs/SCIENCE.md#controls), drawn dashed in the family's colour as "<Family> at initialisation".
    ``type_rows``: per-token-type points (:func:`dashboard.figures.curve_extras.type_accuracy_rows`),
    a thin line per family and token type. ``caption``: the settings and suite behind the figure,
    written under it (:func:`dashboard.figures.captions.add_caption`)."""
    rows = [r for r in rows if families is None or r["family"] in families]
    control_rows = [r for r in control_rows or [] if families is None or r["family"] in families]
    type_rows = [r for r in type_rows or [] if families is None or r["family"] in families]
    if not rows:
        return empty_figure("No probe results for this selection yet")
    tasks_, lengths, grid, titles = _facets(rows, tasks, eval_lengths)
    if not tasks_:
        return empty_figure("No probe results for this selection yet")
    n_missing = sum(not finite(r.get("mean")) for r in rows)
    if n_missing == len(rows):
        return empty_figure(f"No probe accuracy to draw: all {len(rows)} points of this selection have no value")
    by_depth = x == "depth"
    x_title = "normalised depth (emb = 0, last layer = 1)" if by_depth else "layer (emb = embedding output)"
    fig = _make_grid(grid, titles, x_title=x_title, y_title="probe accuracy")
    batch = TraceBatch(fig)
    lines = group_lines(rows, seed_rows, families)
    legend_done: set[str] = set()
    for facet in _facet_cells(grid):
        facet_rows = [r for r in rows if r["task"] == facet.task and int(r["eval_length"]) == facet.length]
        for key in lines.keys_in(facet_rows):
            add_line(
                batch,
                lines,
                facet,
                key,
                by_depth=by_depth,
                show_ci=show_ci,
                show_selectivity=show_selectivity,
                legend_done=legend_done,
            )
        add_facet_extras(batch, facet, control_rows, type_rows, lines, by_depth=by_depth, legend_done=legend_done)
        if show_baseline and facet_rows:
            _add_baseline(batch, facet, facet_rows, [x_or_none(r, by_depth) for r in facet_rows], legend_done)
    _layer_axis(fig, by_depth, max(int(r["layer"]) for r in rows))
    if title:
        fig.update_layout(title={"text": esc(title), "x": 0, "xanchor": "left"})
    batch.flush()
    fig.update_layout(meta={"figure": "layerwise_curves", "x": "depth" if by_depth else "layer"})
    add_caption(fig, caption)
    return note_missing(fig, n_missing, len(rows), "points")


def _layer_axis(fig: go.Figure, by_depth: bool, max_layer: int) -> None:
    """The x axis: depth 0–1, or the layers by name (thinned to about 8 ticks past 14 layers)."""
    if by_depth:
        fig.update_xaxes(range=[-0.04, 1.04], tickvals=[0, 0.25, 0.5, 0.75, 1.0])
        return
    ticks = list(range(-1, max_layer + 1))
    step = 1 if len(ticks) <= 14 else max(1, len(ticks) // 8)
    shown = [t for t in ticks if t == -1 or (t + 1) % step == 0 or t == max_layer]
    fig.update_xaxes(tickvals=shown, ticktext=[layer_name(t) for t in shown], range=[-1.3, max_layer + 0.3])


def position_curves(
    rows: Sequence[dict[str, Any]],
    *,
    layer_label: str = "last layer",
    tasks: Sequence[str] | None = None,
    families: Sequence[str] | None = None,
    eval_lengths: Sequence[int] | None = None,
    show_ci: bool = True,
    show_baseline: bool = True,
) -> go.Figure:
    """Per-position probe accuracy. ``rows``: ``{task, family, eval_length, position, mean, lo, hi,
    n, majority_baseline?}``; ``position`` is the x value drawn, 1..L: the stored
    ``per_position[t]`` (0-based t, 0..L-1, as everywhere in the schema) is drawn at t + 1."""
    rows = [r for r in rows if families is None or r["family"] in families]
    if not rows:
        return empty_figure("No per-position probe results for this selection")
    n_missing = sum(not finite(r.get("mean")) for r in rows)
    if n_missing == len(rows):
        return empty_figure(f"No per-position accuracy to draw: all {len(rows)} points have no value")
    tasks_, lengths, grid, titles = _facets(rows, tasks, eval_lengths)
    fig = _make_grid(grid, titles, x_title="position t in the sequence", y_title=f"probe accuracy ({esc(layer_label)})")
    fam_order = ordered([r["family"] for r in rows], FAMILIES)
    legend_done: set[str] = set()
    batch = TraceBatch(fig)
    marks: list[Facet] = []
    for facet in _facet_cells(grid):
        facet_rows = [r for r in rows if r["task"] == facet.task and int(r["eval_length"]) == facet.length]
        for fam in [f for f in fam_order if any(r["family"] == f for r in facet_rows)]:
            pts = sorted((r for r in facet_rows if r["family"] == fam), key=lambda r: int(r["position"]))
            _add_position_line(batch, facet, fam, pts, show_ci=show_ci, legend_done=legend_done)
        if show_baseline:
            _add_baseline(batch, facet, facet_rows, [int(r["position"]) for r in facet_rows], legend_done)
        if facet_rows and max(int(r["position"]) for r in facet_rows) > TRAIN_LENGTH:
            marks.append(facet)
    batch.flush()
    for facet in marks:
        _mark_train_length(fig, facet)
    fig.update_layout(meta={"figure": "position_curves"})
    return note_missing(fig, n_missing, len(rows), "points")


def _add_position_line(
    batch: TraceBatch,
    facet: Facet,
    fam: str,
    pts: Sequence[dict[str, Any]],
    *,
    show_ci: bool,
    legend_done: set[str],
) -> None:
    """One family's accuracy by position on ``facet``: its CI band and mean line."""
    xs = [int(r["position"]) for r in pts]
    color = family_color(fam)
    label = esc(family_label(fam))
    meta_base = {"family": fam, "task": facet.task, "eval_length": facet.length}
    if show_ci:
        batch.add(
            ci_band(
                xs,
                [r.get("lo") for r in pts],
                [r.get("hi") for r in pts],
                color=rgba(color, 0.16),
                name=f"{label} 95% CI",
                legendgroup=fam,
                meta={**meta_base, "kind": "ci"},
            ),
            row=facet.row,
            col=facet.col,
        )
    batch.add(
        go.Scatter(
            x=xs,
            y=[r.get("mean") if finite(r.get("mean")) else None for r in pts],
            mode="lines",
            line={"color": color, "width": 2, "dash": "solid"},
            name=label,
            legendgroup=fam,
            showlegend=label not in legend_done,
            customdata=[[esc_or(r.get("n"), "?")] for r in pts],
            hovertemplate=f"<b>{label}</b> · t = %{{x}}<br>probe accuracy %{{y:.1%}}"
            "<br>n = %{customdata[0]} seeds<extra></extra>",
            meta={**meta_base, "kind": "mean"},
        ),
        row=facet.row,
        col=facet.col,
    )
    legend_done.add(label)


def _mark_train_length(fig: go.Figure, facet: Facet) -> None:
    """A dotted line past the training length on a facet that reaches beyond it."""
    fig.add_vline(
        x=TRAIN_LENGTH + 0.5, line={"color": "#9aa5b1", "dash": "dot", "width": 1}, row=facet.row, col=facet.col
    )
    fig.add_annotation(
        x=TRAIN_LENGTH + 0.5,
        y=0.02,
        text="train length",
        showarrow=False,
        xanchor="left",
        font={"size": 11, "color": "#7b8794"},
        row=facet.row,
        col=facet.col,
    )
