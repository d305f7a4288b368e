"""Activation patching: layer × position recovery heatmaps (one per run, side by side) and a
line view of recovery by position for one layer.

Rows are ``GET /api/runs/{id}/patching`` rows: site, layer, position, recovery (None when the run
had too few usable pairs; ``note`` says why), its CI, ``corrupt_position``. A grid is
``{"title", "run_id", "rows", "trained", "heldout_acc"}``; ``trained`` False flags the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.common import TraceBatch, base_layout, ci_band, empty_figure, esc, finite, note_missing
from dashboard.theme import layer_name

SITE_LABELS = {
    "resid_pre": "resid_pre (input of block ℓ)",
    "resid_post": "resid_post (output of block ℓ)",
    "state": "state (carried from t to t+1)",
    "state:ssm": "state: SSM part",
    "state:conv": "state: Conv1D window",
}
LINE_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]


def _site(row: dict) -> str:
    return row.get("site") or "resid_post"  # rows stored before sites existed are resid_post


def _select(grids: Sequence[dict[str, Any]], eval_length: int | None, site: str | None) -> list[dict[str, Any]]:
    out = []
    for g in grids:
        rows = [
            r
            for r in g.get("rows") or []
            if (eval_length is None or int(r["eval_length"]) == int(eval_length)) and (site is None or _site(r) == site)
        ]
        if rows:
            out.append({**g, "rows": rows})
    return out


def run_title(g: dict[str, Any]) -> str:
    """The subplot title of a grid, escaped, with an untrained flag naming the held-out accuracy."""
    title = esc(g.get("title", ""))
    if g.get("trained") is False:
        acc = g.get("heldout_acc")
        title += " · ⚠ untrained" + (f" (held-out acc {100 * acc:.0f}%)" if finite(acc) else "")
    return title


def _recovery_text(r: dict | None) -> str:
    if r is None:
        return "not measured"
    if not finite(r.get("recovery")):
        return "undefined" + (f" — {esc(r['note'])}" if r.get("note") else "")
    s = f"{100 * r['recovery']:.1f}%"
    if finite(r.get("recovery_lo")) and finite(r.get("recovery_hi")):
        s += f" [{100 * r['recovery_lo']:.1f}, {100 * r['recovery_hi']:.1f}]"
    return s


def _corrupt_position(rows: Sequence[dict]) -> int | None:
    ps = {int(r["corrupt_position"]) for r in rows if r.get("corrupt_position") is not None}
    return ps.pop() if len(ps) == 1 else None


def patching_heatmaps(
    grids: Sequence[dict[str, Any]], *, eval_length: int | None = None, site: str | None = None
) -> go.Figure:
    """One heatmap per grid (layer × position) for one site, sharing one colour scale (recovery
    1 = the clean logit difference fully restored). The corruption position is a dashed line,
    the best cell a star (none when every cell is undefined); undefined cells are gaps whose
    hover says "undefined" and why."""
    grids = _select(grids, eval_length, site)
    if not grids:
        return empty_figure("No patching results for this selection")
    k = len(grids)
    fig = make_subplots(
        rows=1,
        cols=k,
        subplot_titles=[run_title(g) for g in grids],
        horizontal_spacing=0.06 if k > 1 else 0.0,
        shared_yaxes=False,
    )
    all_vals = [r["recovery"] for g in grids for r in g["rows"] if finite(r["recovery"])]
    lim = max(1.0, *(abs(v) for v in all_vals)) if all_vals else 1.0
    batch = TraceBatch(fig)
    starred = False
    for ci, g in enumerate(grids, start=1):
        layers = sorted({int(r["layer"]) for r in g["rows"]})
        ylabels = [layer_name(ly) for ly in layers]
        batch.add(_run_heatmap(g, layers, lim=lim, show_scale=ci == k), row=1, col=ci)
        if star := _best_star(g, show_legend=not starred):
            batch.add(star, row=1, col=ci)
            starred = True
        if line := _corruption_line(g, ylabels, show_legend=ci == 1):
            batch.add(line, row=1, col=ci)
        fig.update_yaxes(
            categoryorder="array",
            categoryarray=ylabels,
            showgrid=False,
            row=1,
            col=ci,
            title_text="layer" if ci == 1 else None,
        )
        fig.update_xaxes(title_text="patched position (0-based)", showgrid=False, row=1, col=ci)
    n_layers = max(len({int(r["layer"]) for r in g["rows"]}) for g in grids)
    batch.flush()
    base_layout(fig, height=max(340, 160 + 46 * n_layers))
    fig.update_layout(legend={"y": 1.12}, meta={"figure": "patching", "runs": k, "site": site})
    n_cells = sum(len(g["rows"]) for g in grids)
    return note_missing(fig, n_cells - len(all_vals), n_cells, "cells")


def _recovery(r: dict | None) -> float | None:
    """A cell's colour value: its recovery, None (a gap) where undefined or not measured."""
    return r["recovery"] if r and finite(r["recovery"]) else None


def _cell_hover(r: dict | None) -> list[Any]:
    """A cell's hover data: recovery (with CI or why undefined), pairs used and dropped, and the
    clean and corrupted logit differences."""
    return [
        _recovery_text(r),
        r.get("n_pairs", "") if r else "",
        r.get("n_dropped") or 0 if r else "",
        f"{r['ld_clean']:.2f}" if r and finite(r.get("ld_clean")) else "–",
        f"{r['ld_corrupted']:.2f}" if r and finite(r.get("ld_corrupted")) else "–",
    ]


def _run_heatmap(g: dict[str, Any], layers: list[int], *, lim: float, show_scale: bool) -> go.Heatmap:
    """One run's layer × position recovery (gaps where undefined), on the shared ±``lim`` scale."""
    rows = g["rows"]
    positions = sorted({int(r["position"]) for r in rows})
    cell = {(int(r["layer"]), int(r["position"])): r for r in rows}
    return go.Heatmap(
        z=[[_recovery(cell.get((ly, p))) for p in positions] for ly in layers],
        x=positions,
        y=[layer_name(ly) for ly in layers],
        customdata=[[_cell_hover(cell.get((ly, p))) for p in positions] for ly in layers],
        colorscale="RdBu",
        zmid=0,
        zmin=-lim,
        zmax=lim,
        showscale=show_scale,
        xgap=1 if len(positions) < 60 else 0,
        ygap=2,
        hoverongaps=False,
        colorbar={"title": {"text": "recovery"}, "thickness": 12, "tickformat": ".0%"},
        texttemplate="%{z:.0%}" if len(positions) <= 8 else None,
        hovertemplate="layer %{y} · position %{x}<br>recovery %{customdata[0]}"
        "<br>n = %{customdata[1]} pairs (%{customdata[2]} dropped) · LD clean %{customdata[3]}, "
        "corrupted %{customdata[4]}<extra></extra>",
        meta={"kind": "heatmap", "run_id": g.get("run_id"), "layers": len(layers), "positions": len(positions)},
    )


def _best_star(g: dict[str, Any], *, show_legend: bool) -> go.Scatter | None:
    """A star on the run's best-recovery cell; None when every cell is undefined."""
    finite_rows = [r for r in g["rows"] if finite(r["recovery"])]
    if not finite_rows:
        return None
    best = max(finite_rows, key=lambda r: r["recovery"])
    return go.Scatter(
        x=[int(best["position"])],
        y=[layer_name(int(best["layer"]))],
        mode="markers",
        marker={"symbol": "star", "size": 15, "color": "#F0E442", "line": {"color": "#111", "width": 1.2}},
        name="best recovery",
        showlegend=show_legend,
        hovertemplate=f"best: layer {layer_name(int(best['layer']))}, position {int(best['position'])}, "
        f"recovery {best['recovery']:.1%}<extra></extra>",
        meta={"kind": "best", "run_id": g.get("run_id")},
    )


def _corruption_line(g: dict[str, Any], ylabels: list[str], *, show_legend: bool) -> go.Scatter | None:
    """A dashed vertical line at the corrupted token's position; None when the rows disagree on it."""
    p_star = _corrupt_position(g["rows"])
    if p_star is None:
        return None
    return go.Scatter(
        x=[p_star, p_star],
        y=[ylabels[0], ylabels[-1]],
        mode="lines",
        line={"color": "#111", "width": 1.5, "dash": "dash"},
        name="corrupted token",
        showlegend=show_legend,
        hovertemplate=f"corrupted token at position {p_star}<extra></extra>",
        meta={"kind": "corruption", "run_id": g.get("run_id"), "position": p_star},
    )


def patching_by_position(
    grids: Sequence[dict[str, Any]], *, layer: int, eval_length: int | None = None, site: str | None = None
) -> go.Figure:
    """Recovery by position at one layer, one line (with its 95% CI band) per run; undefined
    positions are gaps; each run's corruption position a dashed vertical line."""
    grids = [g for g in _select(grids, eval_length, site) if any(int(r["layer"]) == layer for r in g["rows"])]
    if not grids:
        return empty_figure(f"No patching results at layer {layer_name(layer)} for this selection")
    fig = go.Figure()
    for i, g in enumerate(grids):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        rows = sorted((r for r in g["rows"] if int(r["layer"]) == layer), key=lambda r: int(r["position"]))
        x = [int(r["position"]) for r in rows]
        y = [r["recovery"] if finite(r["recovery"]) else None for r in rows]
        name = run_title(g)
        fig.add_trace(
            ci_band(
                x,
                [r.get("recovery_lo") for r in rows],
                [r.get("recovery_hi") for r in rows],
                color=_alpha(color),
                name=name,
                legendgroup=str(i),
                meta={"kind": "ci", "run_id": g.get("run_id")},
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=name,
                legendgroup=str(i),
                connectgaps=False,
                line={"color": color, "width": 2},
                marker={"size": 5},
                customdata=[[_recovery_text(r)] for r in rows],
                hovertemplate="position %{x}<br>recovery %{customdata[0]}<extra>" + name + "</extra>",
                meta={"kind": "line", "run_id": g.get("run_id")},
            )
        )
        p_star = _corrupt_position(rows)
        if p_star is not None:
            fig.add_vline(x=p_star, line={"color": color, "width": 1.2, "dash": "dash"})
    base_layout(fig, height=360)
    fig.update_xaxes(title_text="patched position (0-based)")
    fig.update_yaxes(title_text=f"recovery at layer {layer_name(layer)}", tickformat=".0%")
    fig.update_layout(meta={"figure": "patching_by_position", "runs": len(grids), "layer": layer, "site": site})
    points = [r for g in grids for r in g["rows"] if int(r["layer"]) == layer]
    return note_missing(fig, sum(not finite(r["recovery"]) for r in points), len(points), "points")


def _alpha(hex_color: str, a: float = 0.18) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {a})"


def patching_table(
    grids: Sequence[dict[str, Any]], *, eval_length: int | None = None, site: str | None = None
) -> list[dict[str, Any]]:
    """Flat rows for CSV export (one per run × site × layer × position)."""
    out = []
    for g in _select(grids, eval_length, site):
        for r in g["rows"]:
            out.append(
                {
                    "run_id": g.get("run_id"),
                    "run": g.get("title"),
                    "site": _site(r),
                    "layer": int(r["layer"]),
                    "layer_name": layer_name(int(r["layer"])),
                    "position": int(r["position"]),
                    "eval_length": int(r["eval_length"]),
                    "corrupt_position": r.get("corrupt_position"),
                    "recovery": r["recovery"],
                    "recovery_lo": r.get("recovery_lo"),
                    "recovery_hi": r.get("recovery_hi"),
                    "n_pairs": r.get("n_pairs"),
                    "n_dropped": r.get("n_dropped"),
                    "note": r.get("note"),
                }
            )
    return out
