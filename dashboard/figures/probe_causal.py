"""Probe versus causal, per run: a layer × measure heatmap (probe accuracy and refit accuracy
in one panel, the behavioural drop of each intervention and Conv1D removal in the other) with
the best-probe layer and each intervention's most-damaging layer marked.

The rows behind it are :mod:`dashboard.figures.probe_causal_table`, the words under it
:mod:`dashboard.figures.probe_causal_caption`; the summary across runs of where the two
decouple is :mod:`dashboard.figures.decoupling`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.captions import add_caption
from dashboard.figures.causal_controls import NEAR_WORST_TOL_PP, MethodTraits, random_text, rank_text, tied_worst
from dashboard.figures.common import TraceBatch, base_layout, empty_figure, esc, finite, note_missing
from dashboard.figures.probe_causal_caption import heatmap_caption, settings_notice
from dashboard.figures.probe_causal_table import (
    best_probe_layer,
    most_damaging_layer,
    near_best_probe_layers,
    probe_causal_table,
)
from dashboard.theme import METHODS, layer_name, method_label, ordered
from science.profiles import NEAR_BEST_TOL

Row = dict[str, Any]


@dataclass(frozen=True)
class _Grid:
    """The heatmap's rows (layers, bottom up; "all layers" on top) and columns (the accuracy
    panel's, the drop panel's), and its cells by ``(layer, measure)``."""

    layers: list[int]
    ylabels: list[str]
    acc_cols: list[str]
    drop_cols: list[str]
    cell: dict[tuple[int, str], Row]


@dataclass(frozen=True)
class _Marks:
    """★ the best probe layer and its near-best ties; ▼ each drop column's most damaging layer
    (significant drops only) and the layers tied with it."""

    best: int | None
    near: list[int]
    damaging: dict[str, int]
    damaging_ties: dict[str, list[int]]

    def prefix(self, ly: int, c: str) -> str:
        """The mark a cell's text starts with."""
        if c == "probe" and (ly == self.best or ly in self.near):
            return "★ "
        if ly in self.damaging_ties.get(c, ()):
            return "▼ "
        return ""


def probe_causal_heatmap(
    probes: Sequence[dict],
    interventions: Sequence[dict],
    *,
    eval_length: int | None = None,
    n_layers: int | None = None,
    title: str | None = None,
    d_model: int | None = None,
    caption: str | None = None,
    method_traits: MethodTraits,
) -> go.Figure:
    """``probes``: ``/api/runs/{id}/probes`` rows; ``interventions``: ``/api/runs/{id}/interventions``
    rows. The causal panel reads each drop beyond its rank-matched random removal where stored
    (hover: the raw Δ and the random interval); ``d_model`` (the run's width) gives each edit's
    rank as a share of it and flags a rank chosen by the fit (INLP's; ``method_traits``, GET
    /api/meta's) over half the width "n.sel." (not selective). ★ marks
    every near-best probe layer, ▼ every layer within ``NEAR_WORST_TOL_PP`` of an edit's most
    damaging one (a tie). ``caption``: what the figure shows (run, suite), under the plot, with the
    settings the rows were measured with and a notice when they differ."""
    table = probe_causal_table(
        probes, interventions, method_traits=method_traits, eval_length=eval_length, d_model=d_model
    )
    if not table:
        return empty_figure("No probe or intervention results for this run at this length")
    grid = _grid(table, n_layers)
    marks = _marks(table, grid.drop_cols)
    n_beyond = sum(bool(r.get("beyond_random")) for r in table if r["kind"] == "drop")
    n_drops = sum(r["kind"] == "drop" for r in table)
    fig = _panels(grid, n_beyond)
    batch = TraceBatch(fig)
    if grid.acc_cols:
        batch.add(_accuracy_heatmap(fig, grid, marks, d_model), row=1, col=1)
    if grid.drop_cols:
        batch.add(_drop_heatmap(table, grid, marks, d_model, n_beyond), row=1, col=2)
    _outline_best(fig, batch, grid, marks)
    _outline_damaging(fig, batch, grid, marks)
    batch.flush()
    _style(fig, table, grid, marks, title=title, n_beyond=n_beyond, n_drops=n_drops)
    notice = settings_notice(probes, interventions, eval_length)
    add_caption(fig, heatmap_caption(caption, probes, interventions, eval_length, n_beyond, n_drops), notice=notice)
    return note_missing(fig, sum(not finite(r["value"]) for r in table), len(table), "cells")


def _measure_label(measure: str) -> str:
    """A heatmap column's label, escaped (the method name comes from stored rows)."""
    if measure == "probe":
        return "probe"
    kind, m = measure.split(":", 1)
    return ("refit · " if kind == "refit" else "Δ ") + esc(method_label(m))


def _grid(table: Sequence[Row], n_layers: int | None) -> _Grid:
    """Every layer of the run (``n_layers``) or of the rows, and the measures present, in the
    methods' order: probe and refit accuracies on the left, drops on the right."""
    layers = sorted({r["layer"] for r in table if r["layer"] >= -1})
    if n_layers:
        layers = sorted(set(layers) | set(range(-1, n_layers)))
    if any(r["layer"] == -2 for r in table):
        layers = layers + [-2]  # "all layers" (Conv1D removed everywhere) on top
    present = {r["measure"] for r in table}
    methods = ordered([m.split(":", 1)[1] for m in present if ":" in m], METHODS)
    return _Grid(
        layers=layers,
        ylabels=[("all layers" if ly == -2 else layer_name(ly)) for ly in layers],
        acc_cols=["probe"] * ("probe" in present) + [f"refit:{m}" for m in methods if f"refit:{m}" in present],
        drop_cols=[f"drop:{m}" for m in methods if f"drop:{m}" in present],
        cell={(r["layer"], r["measure"]): r for r in table},
    )


def _marks(table: Sequence[Row], drop_cols: Sequence[str]) -> _Marks:
    """The marked layers: the best probe layer and its near-best ties, and per drop column the
    most damaging layer among the edits that removed the variable, with the layers tied with it
    (ties are marked on the causal side as on the probe side)."""
    probe_pts = [
        {"layer": r["layer"], "accuracy": r["value"], "eval_length": 0} for r in table if r["measure"] == "probe"
    ]
    damaging: dict[str, int] = {}
    damaging_ties: dict[str, list[int]] = {}
    for c in drop_cols:
        m = c.split(":", 1)[1]
        eligible = [
            {
                "method": m,
                "layer": r["layer"],
                "delta_pp": r["value"],
                "eval_length": 0,
                "significant": r.get("significant"),
            }
            for r in table
            if r["measure"] == c and r["layer"] >= -1 and r.get("removed") is not False
        ]
        ly = most_damaging_layer(eligible, m)
        if ly is not None:
            damaging[c] = ly
            qualifying = {
                e["layer"]: e["delta_pp"]
                for e in eligible
                if finite(e["delta_pp"]) and e["delta_pp"] < 0 and e.get("significant") is not False
            }
            damaging_ties[c] = tied_worst(qualifying, ly)
    # ties: every layer within the near-best tolerance
    return _Marks(best_probe_layer(probe_pts), near_best_probe_layers(probe_pts), damaging, damaging_ties)


def _cells(
    grid: _Grid, marks: _Marks, cols: Sequence[str], fmt: Callable[[Row], str], d_model: int | None
) -> tuple[list[list], list[list[str]], list[list[list[str]]]]:
    """One panel's ``z`` (None for a gap), cell text (mark + value) and hover data, row by row."""
    z, txt, cd = [], [], []
    for ly in grid.layers:
        zr, tr, cr = [], [], []
        for c in cols:
            r = grid.cell.get((ly, c))
            v = r["value"] if r else None
            zr.append(v if finite(v) else None)
            tr.append(marks.prefix(ly, c) + fmt(r) if r and finite(v) else "")
            cr.append(_hover(r, c, fmt, d_model))
        z.append(zr)
        txt.append(tr)
        cd.append(cr)
    return z, txt, cd


def _hover(r: Row | None, c: str, fmt: Callable[[Row], str], d_model: int | None) -> list[str]:
    """A cell's hover data: the measure, the value, its significance (and "not removed"), and the
    random-removal interval and rank share of a drop."""
    v = r["value"] if r else None
    sig = (
        "n.s."
        if r and r.get("significant") is False
        else (f"p_holm = {r['p_holm']:.3g}" if r and finite(r.get("p_holm")) else "")
    )
    if r and r.get("removed") is False:
        sig += " · not removed: the refit probe still reads the variable"
    extra = "<br>".join(
        t
        for t in (
            random_text(r) if r and r.get("beyond_random") else "",
            rank_text(r, d_model) if r and r["kind"] == "drop" else "",
        )
        if t
    )
    return [_measure_label(c), fmt(r) if r and finite(v) else "–", sig, extra]


def _panels(grid: _Grid, n_beyond: int) -> go.Figure:
    """The two panels side by side, sharing the layer axis, each as wide as its columns."""
    widths = [max(len(grid.acc_cols), 1), max(len(grid.drop_cols), 1)]
    effect = (
        "behavioural effect — Δ accuracy beyond random removal, where stored (pp)"
        if n_beyond
        else "behavioural effect — Δ accuracy (pp)"
    )
    return make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.12,
        column_widths=[w / sum(widths) for w in widths],
        subplot_titles=["decodability — accuracy", effect],
    )


def _fmt_accuracy(r: Row) -> str:
    return f"{100 * r['value']:.1f}%"


def _fmt_drop(r: Row) -> str:
    """A drop cell's value with its flags (each explained in the page's caption)."""
    s = f"{r['value']:+.1f}"
    if r.get("significant") is False:
        s += " n.s."
    if r.get("removed") is False:
        s += " n.r."  # not removed (claim 4): the hover says so
    if r.get("not_selective"):
        s += " n.sel."  # INLP over half the width: the hover gives the share
    return s.replace("-", "−")


def _panel_heatmap(
    grid: _Grid,
    marks: _Marks,
    cols: list[str],
    fmt: Callable[[Row], str],
    d_model: int | None,
    *,
    panel: str,
    **style: Any,
) -> go.Heatmap:
    """One panel's heatmap over ``cols``: the cells, their text and hover data; ``style`` gives the
    colour scale, its bar and the hover template."""
    z, txt, cd = _cells(grid, marks, cols, fmt, d_model)
    return go.Heatmap(
        z=z,
        x=[_measure_label(c) for c in cols],
        y=grid.ylabels,
        text=txt,
        texttemplate="%{text}",
        customdata=cd,
        xgap=2,
        ygap=2,
        hoverongaps=False,
        meta={"kind": "heatmap", "panel": panel, "columns": cols},
        **style,
    )


def _accuracy_heatmap(fig: go.Figure, grid: _Grid, marks: _Marks, d_model: int | None) -> go.Heatmap:
    """The left panel: probe and refit accuracies, 0–1, its colour bar beside the panel."""
    return _panel_heatmap(
        grid,
        marks,
        grid.acc_cols,
        _fmt_accuracy,
        d_model,
        panel="accuracy",
        colorscale="Blues",
        zmin=0,
        zmax=1,
        colorbar={
            "title": {"text": "accuracy"},
            "x": fig.layout.xaxis.domain[1] + 0.008,
            "thickness": 12,
            "tickformat": ".0%",
            "len": 0.9,
        },
        hovertemplate="layer %{y} · %{customdata[0]}<br>%{customdata[1]}<extra></extra>",
    )


def _drop_range(table: Sequence[Row]) -> float:
    """The drop panel's colour range ±vmax (pp): it follows the targeted edits; mean ablation (a
    ceiling) may saturate."""
    vals = [
        abs(r["value"]) for r in table if r["kind"] == "drop" and finite(r["value"]) and r["measure"] != "drop:mean"
    ]
    if vals:
        return max(vals + [1.0])
    return max([abs(r["value"]) for r in table if r["kind"] == "drop" and finite(r["value"])] + [1.0])


def _drop_heatmap(table: Sequence[Row], grid: _Grid, marks: _Marks, d_model: int | None, n_beyond: int) -> go.Heatmap:
    """The right panel: each edit's drop (pp, beyond random removal where stored), centred on 0."""
    vmax = _drop_range(table)
    return _panel_heatmap(
        grid,
        marks,
        grid.drop_cols,
        _fmt_drop,
        d_model,
        panel="drop",
        colorscale="RdBu",
        zmid=0,
        zmin=-vmax,
        zmax=vmax,
        colorbar={
            "title": {"text": "Δ pp<br>beyond<br>random" if n_beyond else "Δ pp"},
            "x": 1.01,
            "thickness": 12,
            "len": 0.9,
        },
        hovertemplate=(
            "layer %{y} · %{customdata[0]}<br>Δ accuracy "
            + ("beyond random removal " if n_beyond else "")
            + "%{customdata[1]} pp<br>%{customdata[2]}<br>%{customdata[3]}<extra></extra>"
        ),
    )


def _outline(fig: go.Figure, xi: int, yi: int, *, axis: str, line: dict[str, Any]) -> None:
    """Outline the cell at column ``xi``, row ``yi`` of the panel on axes ``x{axis}``/``y{axis}``."""
    fig.add_shape(
        type="rect",
        x0=xi - 0.5,
        x1=xi + 0.5,
        y0=yi - 0.5,
        y1=yi + 0.5,
        xref=f"x{axis}",
        yref=f"y{axis}",
        line=line,
    )


def _legend_key(name: str, color: str, meta: dict[str, Any]) -> go.Scatter:
    """A legend entry for an outline (a point at no position)."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        name=name,
        marker={"symbol": "square-open", "size": 14, "color": color, "line": {"width": 3}},
        meta=meta,
    )


def _outline_best(fig: go.Figure, batch: TraceBatch, grid: _Grid, marks: _Marks) -> None:
    """★: outline the best-probe layer (and its near-best ties) in the probe column; a legend key."""
    if marks.best is None or not grid.acc_cols:
        return
    tied = sorted(set(marks.near) | {marks.best})
    for ly in tied:
        _outline(fig, 0, grid.layers.index(ly), axis="", line={"color": "#E69F00", "width": 3})
    name = (
        f"★ best-probe layer ({layer_name(marks.best)})"
        if len(tied) == 1
        else f"★ best-probe layers, a tie: {', '.join(layer_name(x) for x in tied)} within {100 * NEAR_BEST_TOL:g} pp"
    )
    meta = {"kind": "best_probe", "layer": marks.best, "tie": tied if len(tied) > 1 else []}
    batch.add(_legend_key(name, "#E69F00", meta), row=1, col=1)


def _outline_damaging(fig: go.Figure, batch: TraceBatch, grid: _Grid, marks: _Marks) -> None:
    """▼: outline each edit's most damaging layer (and the layers tied with it); a legend key."""
    for c, ly in marks.damaging.items():
        for tly in marks.damaging_ties.get(c) or [ly]:
            _outline(
                fig, grid.drop_cols.index(c), grid.layers.index(tly), axis="2", line={"color": "#111", "width": 2.5}
            )
    if not marks.damaging:
        return
    tie_note = (
        f"; every layer within {NEAR_WORST_TOL_PP:g} pp of it, a tie"
        if any(len(v) > 1 for v in marks.damaging_ties.values())
        else ""
    )
    meta = {
        "kind": "most_damaging",
        "layers": dict(marks.damaging),
        "ties": {c: v for c, v in marks.damaging_ties.items() if len(v) > 1},
    }
    name = f"▼ most-damaging layer of each edit (significant drops only{tie_note})"
    batch.add(_legend_key(name, "#111", meta), row=1, col=2)


def _style(
    fig: go.Figure,
    table: Sequence[Row],
    grid: _Grid,
    marks: _Marks,
    *,
    title: str | None,
    n_beyond: int,
    n_drops: int,
) -> None:
    """Title, height (a row per layer), axes, the legend above the panels and ``meta``."""
    base_layout(fig, title=esc(title) if title else None, height=max(360, 150 + 58 * len(grid.layers)))
    fig.update_yaxes(
        title_text="layer", row=1, col=1, categoryorder="array", categoryarray=grid.ylabels, showgrid=False
    )
    fig.update_xaxes(showgrid=False, tickangle=-25)
    fig.update_layout(
        legend={"y": 1 + 62 / max(200, fig.layout.height - 200), "yanchor": "bottom", "x": 1, "xanchor": "right"},
        margin={"t": 110 if title else 90, "b": 120},
        meta={
            "figure": "probe_causal",
            "best_probe": marks.best,
            "n_layers": len(grid.layers),
            "beyond_random": n_beyond,
            "drops": n_drops,
            "not_selective": sorted({r["layer"] for r in table if r.get("not_selective")}),
        },
    )
