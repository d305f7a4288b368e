"""Layerwise probe curves: a facet per task (× eval length), a line per family with the mean
and 95% CI band over seeds, the majority baseline dashed, optional seed-level traces; and the
per-position variant (accuracy at each position t of the sequence, for one layer)."""

from __future__ import annotations

from collections import defaultdict
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
    untrained_suffix,
)
from dashboard.figures.curve_extras import control_label, control_trace, type_trace
from dashboard.theme import (
    FAMILIES,
    TASKS,
    TRAIN_LENGTH,
    family_color,
    family_label,
    family_symbol,
    layer_name,
    length_label,
    ordered,
    rgba,
    task_label,
)

BASELINE_COLOR = "#52606d"
UNTRAINED_OPACITY = 0.5  # mean line of a family × task that includes untrained runs


def _line_key(row: dict[str, Any], multi_depth: set[str]) -> tuple[str, int | None, str]:
    """A line per family; pretrained models and other depths of a family get their own line."""
    fam = row["family"]
    pre = row.get("pretrained") or ""
    return (fam, int(row.get("n_layers") or 0) if (fam in multi_depth or pre) else None, pre)


def _line_label(key: tuple[str, int | None, str]) -> str:
    """The legend / hover name of a line (escaped: pretrained and family names are stored text)."""
    fam, n, pre = key
    if pre:
        return f"{esc(pre.rstrip('/').split('/')[-1])} ({n} layers)"
    return esc(family_label(fam)) + (f" ({n} layers)" if n else "")


def _facets(rows: Sequence[dict], tasks: Sequence[str] | None, lengths: Sequence[int] | None):
    tasks = (
        ordered([r["task"] for r in rows], TASKS)
        if tasks is None
        else [t for t in tasks if any(r["task"] == t for r in rows)]
    )
    lengths = (
        sorted(unique(int(r["eval_length"]) for r in rows))
        if lengths is None
        else [int(length) for length in lengths if any(int(r["eval_length"]) == int(length) for r in rows)]
    )
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
    " (untrained: k of n)" (:func:`untrained_suffix`) and is drawn faint (``UNTRAINED_OPACITY``) with
    open markers. ``show_selectivity``: a dotted line per
    family with the probe's selectivity (accuracy − control-task accuracy, Hewitt & Liang 2019)
    where stored. ``control_rows``: ``/api/curves?controls=only`` items (the random-init controls,
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
    xkey = "depth" if by_depth else "layer"
    x_title = "normalised depth (emb = 0, last layer = 1)" if by_depth else "layer (emb = embedding output)"
    fig = _make_grid(grid, titles, x_title=x_title, y_title="probe accuracy")
    batch = TraceBatch(fig)

    n_by_fam: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        n_by_fam[r["family"]].add(int(r.get("n_layers") or 0))
    multi_depth = {f for f, ns in n_by_fam.items() if len(ns) > 1}
    fam_order = ordered([r["family"] for r in rows], FAMILIES)

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["task"], int(r["eval_length"]), _line_key(r, multi_depth))].append(r)
    seed_groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in seed_rows or []:
        if families is not None and r["family"] not in families:
            continue
        key = (r["task"], int(r["eval_length"]), _line_key(r, multi_depth), r.get("seed"))
        seed_groups[key].append(r)

    run_ids: dict[tuple, set] = defaultdict(set)
    untrained: dict[tuple, set] = defaultdict(set)
    for r in rows:
        k = _line_key(r, multi_depth)
        run_ids[k].update(r.get("run_ids") or [])
        untrained[k].update(r.get("untrained_run_ids") or [])

    legend_done: set[str] = set()
    max_layer = max(int(r["layer"]) for r in rows)
    for ri, grid_row in enumerate(grid, start=1):
        for ci, (task, length) in enumerate(grid_row, start=1):
            facet_rows = [r for r in rows if r["task"] == task and int(r["eval_length"]) == length]
            keys = sorted(
                {_line_key(r, multi_depth) for r in facet_rows},
                key=lambda k: (fam_order.index(k[0]), k[2], k[1] or 0),
            )
            for key in keys:
                fam = key[0]
                pts = sorted(groups[(task, length, key)], key=lambda r: int(r["layer"]))
                xs = [r[xkey] if by_depth else int(r["layer"]) for r in pts]
                color = family_color(fam)
                label = _line_label(key) + untrained_suffix(len(untrained[key]), len(run_ids[key]))
                group = f"{fam}-{key[1]}-{key[2]}"
                meta_base = {
                    "family": fam,
                    "task": task,
                    "eval_length": length,
                    "n_layers": key[1],
                    "pretrained": key[2] or None,
                    "untrained_run_ids": sorted(untrained[key]),
                }
                sx: list = []
                sy: list = []
                stext: list = []
                seeds_here = []
                for (t2, l2, k2, seed), srows in sorted(seed_groups.items(), key=lambda kv: str(kv[0])):
                    if (t2, l2, k2) != (task, length, key):
                        continue
                    srows = sorted(srows, key=lambda r: int(r["layer"]))
                    seeds_here.append(seed)
                    sx += [r[xkey] if by_depth else int(r["layer"]) for r in srows] + [None]
                    sy += [r["accuracy"] for r in srows] + [None]
                    stext += [f"seed {esc(seed)}"] * len(srows) + [None]
                if seeds_here:  # every seed of this line in one trace (gaps between seeds): fast with 1,000 runs
                    batch.add(
                        go.Scatter(
                            x=sx,
                            y=sy,
                            text=stext,
                            mode="lines",
                            connectgaps=False,
                            line={"color": rgba(color, 0.45), "width": 1},
                            name=f"{label} seeds",
                            legendgroup=group,
                            showlegend=False,
                            hovertemplate=f"{label} · %{{text}}<br>%{{y:.1%}}<extra></extra>",
                            meta={**meta_base, "kind": "seed", "seeds": seeds_here},
                        ),
                        row=ri,
                        col=ci,
                    )
                if show_ci:
                    batch.add(
                        ci_band(
                            xs,
                            [r.get("lo") for r in pts],
                            [r.get("hi") for r in pts],
                            color=rgba(color, 0.18),
                            name=f"{label} 95% CI",
                            legendgroup=group,
                            meta={**meta_base, "kind": "ci"},
                        ),
                        row=ri,
                        col=ci,
                    )
                custom = [
                    [
                        esc(r.get("layer_name") or layer_name(int(r["layer"]))),
                        r.get("lo") if finite(r.get("lo")) else r.get("mean"),
                        r.get("hi") if finite(r.get("hi")) else r.get("mean"),
                        esc_or(r.get("n"), "?"),
                        ", ".join(esc(s) for s in (r.get("seeds") or [])),
                        f"{r['depth']:.2f}" if finite(r.get("depth")) else "–",
                    ]
                    for r in pts
                ]
                # a line that includes untrained runs is drawn faint with open markers, so it cannot be
                # read as a trained model's curve at a glance (the legend suffix says how many)
                n_untrained = len(untrained[key])
                symbol = family_symbol(fam)
                if n_untrained and not symbol.endswith("-open"):
                    symbol += "-open"
                batch.add(
                    go.Scatter(
                        x=xs,
                        y=[r.get("mean") if finite(r.get("mean")) else None for r in pts],
                        mode="lines+markers",
                        opacity=UNTRAINED_OPACITY if n_untrained else 1.0,
                        line={"color": color, "width": 2.5, "dash": "dash" if key[2] else "solid"},
                        marker={
                            "symbol": symbol,
                            "size": 8 if not key[1] or key[1] <= 12 else 5,
                            "color": color,
                            "line": {"width": 1, "color": "white"},
                        },
                        name=label,
                        legendgroup=group,
                        showlegend=label not in legend_done,
                        customdata=custom,
                        hovertemplate=(
                            f"<b>{label}</b> · layer %{{customdata[0]}} (depth %{{customdata[5]}})"
                            "<br>probe accuracy %{y:.1%} [95% CI %{customdata[1]:.1%}, %{customdata[2]:.1%}]"
                            "<br>n = %{customdata[3]} seeds (%{customdata[4]})"
                            + (
                                f"<br>⚠ {n_untrained} untrained run(s): held-out accuracy below the criterion"
                                if n_untrained
                                else ""
                            )
                            + "<extra></extra>"
                        ),
                        meta={**meta_base, "kind": "mean"},
                    ),
                    row=ri,
                    col=ci,
                )
                legend_done.add(label)
                sel = [(x_, r.get("selectivity")) for x_, r in zip(xs, pts) if finite(r.get("selectivity"))]
                if show_selectivity and sel:
                    batch.add(
                        go.Scatter(
                            x=[p[0] for p in sel],
                            y=[p[1] for p in sel],
                            mode="lines",
                            line={"color": color, "width": 1.5, "dash": "dot"},
                            name=f"{label} selectivity",
                            legendgroup=group,
                            showlegend=f"{label} selectivity" not in legend_done,
                            hovertemplate=f"<b>{label}</b> selectivity %{{y:.1%}}<extra></extra>",
                            meta={**meta_base, "kind": "selectivity"},
                        ),
                        row=ri,
                        col=ci,
                    )
                    legend_done.add(f"{label} selectivity")
            _facet_extras(
                batch,
                ri,
                ci,
                task,
                length,
                control_rows,
                type_rows,
                multi_depth,
                fam_order,
                xkey,
                by_depth,
                legend_done,
            )
            if show_baseline and facet_rows:
                base_vals = [r["majority_baseline"] for r in facet_rows if finite(r.get("majority_baseline"))]
                if base_vals:
                    b = sum(base_vals) / len(base_vals)
                    xs_all = [
                        x for x in (r.get(xkey) if by_depth else int(r["layer"]) for r in facet_rows) if finite(x)
                    ]
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
                            meta={"kind": "baseline", "task": task, "eval_length": length, "value": b},
                        ),
                        row=ri,
                        col=ci,
                    )
                    legend_done.add("baseline")
    if by_depth:
        fig.update_xaxes(range=[-0.04, 1.04], tickvals=[0, 0.25, 0.5, 0.75, 1.0])
    else:
        ticks = list(range(-1, max_layer + 1))
        step = 1 if len(ticks) <= 14 else max(1, len(ticks) // 8)
        shown = [t for t in ticks if t == -1 or (t + 1) % step == 0 or t == max_layer]
        fig.update_xaxes(tickvals=shown, ticktext=[layer_name(t) for t in shown], range=[-1.3, max_layer + 0.3])
    if title:
        fig.update_layout(title={"text": esc(title), "x": 0, "xanchor": "left"})
    batch.flush()
    fig.update_layout(meta={"figure": "layerwise_curves", "x": xkey})
    add_caption(fig, caption)
    return note_missing(fig, n_missing, len(rows), "points")


def _facet_extras(
    batch, ri, ci, task, length, control_rows, type_rows, multi_depth, fam_order, xkey, by_depth, legend_done
) -> None:
    """One facet's control lines ("at initialisation") and per-token-type lines."""

    def x_of(r):
        return r.get(xkey) if by_depth else int(r["layer"])

    def order(k):
        return (fam_order.index(k[0]) if k[0] in fam_order else len(fam_order), k[2], k[1] or 0)

    ctrl: dict[tuple, list[dict]] = defaultdict(list)
    for r in control_rows:
        if r["task"] == task and int(r["eval_length"]) == length:
            ctrl[_line_key(r, multi_depth)].append(r)
    for key in sorted(ctrl, key=order):
        fam = key[0]
        label = control_label(fam)
        pts = sorted(ctrl[key], key=lambda r: int(r["layer"]))
        batch.add(
            control_trace(
                pts,
                family=fam,
                color=family_color(fam),
                x_of=x_of,
                legend=label not in legend_done,
                group=f"{fam}-{key[1]}-{key[2]}",
                meta={"family": fam, "task": task, "eval_length": length, "n_layers": key[1]},
            ),
            row=ri,
            col=ci,
        )
        legend_done.add(label)
    types: dict[tuple, list[dict]] = defaultdict(list)
    for r in type_rows:
        if r["task"] == task and int(r["eval_length"]) == length:
            types[(_line_key(r, multi_depth), r["token_type"])].append(r)
    for key, tt in sorted(types, key=lambda kt: (order(kt[0]), kt[1])):
        fam = key[0]
        name = _line_label(key)
        label = f"{name} · {esc(tt)} tokens"
        pts = sorted(types[(key, tt)], key=lambda r: int(r["layer"]))
        batch.add(
            type_trace(
                pts,
                family_name=name,
                token_type=tt,
                color=family_color(fam),
                x_of=x_of,
                legend=label not in legend_done,
                group=f"{fam}-{key[1]}-{key[2]}",
                meta={"family": fam, "task": task, "eval_length": length, "n_layers": key[1]},
            ),
            row=ri,
            col=ci,
        )
        legend_done.add(label)


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
    marks: list[tuple[int, int]] = []
    for ri, grid_row in enumerate(grid, start=1):
        for ci, (task, length) in enumerate(grid_row, start=1):
            facet = [r for r in rows if r["task"] == task and int(r["eval_length"]) == length]
            for fam in [f for f in fam_order if any(r["family"] == f for r in facet)]:
                pts = sorted((r for r in facet if r["family"] == fam), key=lambda r: int(r["position"]))
                xs = [int(r["position"]) for r in pts]
                color = family_color(fam)
                label = esc(family_label(fam))
                meta_base = {"family": fam, "task": task, "eval_length": length}
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
                        row=ri,
                        col=ci,
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
                    row=ri,
                    col=ci,
                )
                legend_done.add(label)
            if show_baseline:
                base_vals = [r["majority_baseline"] for r in facet if finite(r.get("majority_baseline"))]
                if base_vals and facet:
                    b = sum(base_vals) / len(base_vals)
                    xs_all = [int(r["position"]) for r in facet]
                    batch.add(
                        go.Scatter(
                            x=[min(xs_all), max(xs_all)],
                            y=[b, b],
                            mode="lines",
                            line={"color": BASELINE_COLOR, "width": 1.5, "dash": "dash"},
                            name="majority baseline",
                            legendgroup="baseline",
                            showlegend="baseline" not in legend_done,
                            hovertemplate=f"majority baseline {b:.1%}<extra></extra>",
                            meta={"kind": "baseline", "task": task, "eval_length": length, "value": b},
                        ),
                        row=ri,
                        col=ci,
                    )
                    legend_done.add("baseline")
            if facet and max(int(r["position"]) for r in facet) > TRAIN_LENGTH:
                marks.append((ri, ci))
    batch.flush()
    for ri, ci in marks:
        if True:
            if True:
                fig.add_vline(
                    x=TRAIN_LENGTH + 0.5, line={"color": "#9aa5b1", "dash": "dot", "width": 1}, row=ri, col=ci
                )
                fig.add_annotation(
                    x=TRAIN_LENGTH + 0.5,
                    y=0.02,
                    text="train length",
                    showarrow=False,
                    xanchor="left",
                    font={"size": 11, "color": "#7b8794"},
                    row=ri,
                    col=ci,
                )
    fig.update_layout(meta={"figure": "position_curves"})
    return note_missing(fig, n_missing, len(rows), "points")
