"""Activation patching: layer × position recovery heatmaps, one per run, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.common import TraceBatch, base_layout, empty_figure, esc, finite
from dashboard.theme import layer_name


def patching_heatmaps(grids: Sequence[dict[str, Any]], *, eval_length: int | None = None) -> go.Figure:
    """``grids``: ``[{"title": str, "rows": [patching rows of one run]}]`` → one heatmap each,
    sharing one colour scale (recovery 1 = the clean logit difference fully restored)."""
    grids = [{**g, "rows": [r for r in g["rows"] if eval_length is None or int(r["eval_length"]) == int(eval_length)]}
             for g in grids]
    grids = [g for g in grids if g["rows"]]
    if not grids:
        return empty_figure("No patching results for this selection")
    k = len(grids)
    fig = make_subplots(rows=1, cols=k, subplot_titles=[esc(g["title"]) for g in grids],
                        horizontal_spacing=0.06 if k > 1 else 0.0, shared_yaxes=False)
    all_vals = [r["recovery"] for g in grids for r in g["rows"] if finite(r["recovery"])]
    zmax = max(1.0, max(all_vals))
    zmin = min(-0.2, min(all_vals))
    lim = max(abs(zmin), zmax)
    batch = TraceBatch(fig)
    for ci, g in enumerate(grids, start=1):
        rows = g["rows"]
        layers = sorted({int(r["layer"]) for r in rows})
        positions = sorted({int(r["position"]) for r in rows})
        cell = {(int(r["layer"]), int(r["position"])): r for r in rows}
        z, cd = [], []
        for ly in layers:
            zr, cr = [], []
            for p in positions:
                r = cell.get((ly, p))
                zr.append(r["recovery"] if r and finite(r["recovery"]) else None)
                cr.append([
                    f"[{r['recovery_lo']:.2f}, {r['recovery_hi']:.2f}]" if r and finite(r.get("recovery_lo")) and finite(r.get("recovery_hi")) else "",
                    r.get("n_pairs", "") if r else "",
                    f"{r['ld_clean']:.2f}" if r and finite(r.get("ld_clean")) else "",
                    f"{r['ld_corrupted']:.2f}" if r and finite(r.get("ld_corrupted")) else "",
                ])
            z.append(zr)
            cd.append(cr)
        ylabels = [layer_name(ly) for ly in layers]
        batch.add(go.Heatmap(
            z=z, x=positions, y=ylabels, customdata=cd, colorscale="RdBu", zmid=0, zmin=-lim, zmax=lim,
            showscale=ci == k, xgap=1 if len(positions) < 60 else 0, ygap=2,
            colorbar={"title": {"text": "recovery"}, "thickness": 12, "tickformat": ".0%"},
            texttemplate="%{z:.0%}" if len(positions) <= 8 else None,
            hovertemplate="layer %{y} · position %{x}<br>recovery %{z:.1%} %{customdata[0]}"
                          "<br>n = %{customdata[1]} pairs · LD clean %{customdata[2]}, corrupted %{customdata[3]}<extra></extra>",
            meta={"kind": "heatmap", "run_id": g.get("run_id"), "layers": len(layers), "positions": len(positions)},
        ), row=1, col=ci)
        best = max((r for r in rows if finite(r["recovery"])), key=lambda r: r["recovery"])
        batch.add(go.Scatter(
            x=[int(best["position"])], y=[layer_name(int(best["layer"]))], mode="markers",
            marker={"symbol": "star", "size": 15, "color": "#F0E442", "line": {"color": "#111", "width": 1.2}},
            name="best recovery", showlegend=ci == 1,
            hovertemplate=f"best: layer {layer_name(int(best['layer']))}, position {int(best['position'])}, "
                          f"recovery {best['recovery']:.1%}<extra></extra>",
            meta={"kind": "best", "run_id": g.get("run_id")}), row=1, col=ci)
        fig.update_yaxes(categoryorder="array", categoryarray=ylabels, showgrid=False, row=1, col=ci,
                         title_text="layer" if ci == 1 else None)
        fig.update_xaxes(title_text="patched position (0-based)", showgrid=False, row=1, col=ci)
    n_layers = max(len({int(r['layer']) for r in g['rows']}) for g in grids)
    batch.flush()
    base_layout(fig, height=max(340, 160 + 46 * n_layers))
    fig.update_layout(legend={"y": 1.12}, meta={"figure": "patching", "runs": k})
    return fig


def patching_table(grids: Sequence[dict[str, Any]], *, eval_length: int | None = None) -> list[dict[str, Any]]:
    out = []
    for g in grids:
        for r in g["rows"]:
            if eval_length is not None and int(r["eval_length"]) != int(eval_length):
                continue
            out.append({"run_id": g.get("run_id"), "run": g.get("title"), "layer": int(r["layer"]),
                        "layer_name": layer_name(int(r["layer"])), "position": int(r["position"]),
                        "eval_length": int(r["eval_length"]), "recovery": r["recovery"],
                        "recovery_lo": r.get("recovery_lo"), "recovery_hi": r.get("recovery_hi"),
                        "n_pairs": r.get("n_pairs")})
    return out
