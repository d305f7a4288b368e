"""Probe versus causal across runs: one point per run judged by claim 4's rule (where the best
probe and the most damaging edit sit, and whether they decouple) and the architecture × task
summary of those points."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import base_layout, empty_figure, esc, note_missing
from dashboard.figures.rows import row_key, row_label, row_order
from dashboard.theme import TASK_ORDER, depth, layer_name, method_label, ordered, task_label


def decoupling_points(
    runs: Sequence[dict],
    probes: Sequence[dict],
    interventions: Sequence[dict],
    *,
    method: str | None = None,
    eval_length: int = 40,
) -> list[dict[str, Any]]:
    """One point per run with a probe curve and an edit, judged by claim 4's rule
    (``science.claims.run_decouplings``: the one definition, so this view and /claims agree).

    ``method`` None = claim 4's choice (the first of LEACE, INLP, project-out present). Each
    point: ``status`` "decoupled" | "not decoupled" | "not removed" (the refit probe still reads
    the variable: the edit says nothing about necessity), ``decoupled`` True/False/None (None =
    not removed), ``best_layer`` and ``near_best_layers`` (a tie when more than one),
    ``damage_layer`` (None when not removed), both on the normalised depth axis too."""
    from science import claims as C

    meta = {int(r["id"]): r for r in runs}
    rows = C.run_decouplings(
        [
            {
                "id": int(r["id"]),
                "task": r["task"],
                "family": r["family"],
                "seed": r.get("seed"),
                "pretrained": r.get("pretrained"),
            }
            for r in runs
        ],
        [p for p in probes if int(p["layer"]) >= -1],
        interventions,
        eval_length=eval_length,
        method=method,
    )
    out = []
    for d in rows:
        run = meta[int(d["run_id"])]
        n = int(run["n_layers"])
        removed = d["status"] == "evaluated"
        dmg = d.get("damaging_layer") if removed else None
        dec = bool(d["meaningfully_decoupled"]) if removed else None
        b = int(d["best_layer"])
        out.append(
            {
                "run_id": int(d["run_id"]),
                "run_name": run.get("name", ""),
                "family": run["family"],
                "task": run["task"],
                "pretrained": run.get("pretrained"),
                "seed": run.get("seed"),
                "trained": run.get("trained"),
                "n_layers": n,
                "method": d["method"],
                "best_layer": b,
                "near_best_layers": [int(x) for x in d["near_best_layers"]],
                "tie": len(d["near_best_layers"]) > 1,
                "damage_layer": None if dmg is None else int(dmg),
                "best_depth": depth(b, n),
                "damage_depth": None if dmg is None else depth(int(dmg), n),
                "status": "not removed" if not removed else ("decoupled" if dec else "not decoupled"),
                "decoupled": dec,
                "margin_pp": d.get("margin_pp"),
                "significant": d.get("significant"),
                "not_removed_layers": d.get("not_removed_layers", []),
            }
        )
    return out


def _layers_text(layers: Sequence[int]) -> str:
    """``L3`` or, for a near-best tie, ``emb–2 (tie)``."""
    ls = sorted(int(x) for x in layers)
    if len(ls) == 1:
        return layer_name(ls[0])
    if ls == list(range(ls[0], ls[-1] + 1)):
        return f"{layer_name(ls[0])}–{layer_name(ls[-1])} (tie)"
    return f"{', '.join(layer_name(x) for x in ls)} (tie)"


def decoupling_summary(points: Sequence[dict[str, Any]], *, method: str | None = None) -> go.Figure:
    """Architecture × task: claim 4's counts per cell — runs decoupled of those whose edit removed
    the variable, and the runs whose edit did not (``not removed``), with the best-probe layers
    (ties named) and the most common most-damaging layer. The wording is /claims' claim 4."""
    if not points:
        return empty_figure("No runs with both probes and interventions for this selection", height=300)
    total = len(points)
    points = _placed(points)
    if not points:
        return empty_figure(f"No run to place: all {total} have no best-probe layer (no value)", height=300)
    fams = row_order(row_key(p) for p in points)
    tasks = ordered([p["task"] for p in points], TASK_ORDER)
    fig = go.Figure(_summary_heatmap(points, fams, tasks))
    _summary_layout(fig, points, len(fams), method)
    return note_missing(fig, total - len(points), total, "runs")


_STATUS_OF_DECOUPLED: dict[bool | None, str] = {True: "decoupled", False: "not decoupled"}


def _placed(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points that can be placed: with a status and a best-probe layer."""
    # a point without a status (an older caller) is judged from ``decoupled`` alone
    points = [p if p.get("status") else {**p, "status": _STATUS_OF_DECOUPLED.get(p.get("decoupled"))} for p in points]
    return [p for p in points if p.get("best_layer") is not None and p.get("status")]


def _summary_cell(pts: Sequence[dict[str, Any]]) -> tuple[int | None, str, list]:
    """One cell's colour (the count decoupled; None when no run is usable), text and hover data."""
    if not pts:
        return None, "", ["", "", 0, 0, 0, 0]
    ev = [p for p in pts if p["status"] != "not removed"]
    k = sum(bool(p["decoupled"]) for p in ev)
    nr = len(pts) - len(ev)
    best = esc(Counter(_layers_text(p.get("near_best_layers") or [p["best_layer"]]) for p in pts).most_common(1)[0][0])
    dmg_c = Counter(layer_name(int(p["damage_layer"])) for p in ev if p.get("damage_layer") is not None)
    dmg = esc(dmg_c.most_common(1)[0][0]) if dmg_c else "–"
    line = f"{k} decoupled of {len(ev)} usable · n = {len(pts)}" + (f", {nr} not removed" if nr else "")
    text = f"probe ★ {best}" + (f" · causal ▼ {dmg}" if ev else "") + f"<br>{line}"
    # coloured by the count, never by a share: "1 of 1 usable" is not "100% decoupled"
    return (k if ev else None), text, [best, dmg, k, len(ev), nr, len(pts)]


def _summary_heatmap(points: Sequence[dict[str, Any]], fams: list[str], tasks: list[str]) -> go.Heatmap:
    """The architecture × task grid of :func:`_summary_cell`, coloured by the count decoupled."""
    cells = [[_summary_cell([p for p in points if row_key(p) == f and p["task"] == t]) for t in tasks] for f in fams]
    max_n = max(
        (len([p for p in points if row_key(p) == f and p["task"] == t]) for f in fams for t in tasks), default=1
    )
    return go.Heatmap(
        z=[[c[0] for c in row] for row in cells],
        x=[esc(task_label(t)) for t in tasks],
        y=[row_label(f) for f in fams],
        text=[[c[1] for c in row] for row in cells],
        texttemplate="%{text}",
        customdata=[[c[2] for c in row] for row in cells],
        colorscale="Cividis",
        zmin=0,
        zmax=max(1, max_n),
        xgap=3,
        ygap=3,
        hoverongaps=False,
        colorbar={"title": {"text": "runs<br>decoupled"}, "tickformat": "d", "dtick": 1, "thickness": 12},
        hovertemplate="<b>%{y} · %{x}</b><br>best-probe layer %{customdata[0]}, most-damaging layer "
        "%{customdata[1]}<br>%{customdata[2]} decoupled of %{customdata[3]} usable runs "
        "(n = %{customdata[5]}); %{customdata[4]} not removed "
        "(the refit probe still reads the variable)<extra></extra>",
        meta={"kind": "decoupling"},
    )


def _summary_layout(fig: go.Figure, points: Sequence[dict[str, Any]], n_rows: int, method: str | None) -> None:
    """The title (the counts over every run and the edit read), the axes and ``meta``."""
    ev = [p for p in points if p["status"] != "not removed"]
    n_dec = sum(bool(p["decoupled"]) for p in ev)
    n_nr = len(points) - len(ev)
    methods = sorted({m for p in points if (m := p.get("method"))}) or ([method] if method else [])
    edit = ", ".join(esc(method_label(m)) for m in methods)
    base_layout(
        fig,
        height=max(300, 110 + 70 * n_rows),
        title=f"{n_dec} of {len(points)} runs decoupled ({len(ev)} usable, {n_nr} not removed) · edit: {edit}",
    )
    fig.update_yaxes(autorange="reversed", showgrid=False, showline=False, ticks="")
    fig.update_xaxes(side="top", showgrid=False, showline=False, ticks="")
    fig.update_layout(
        margin={"t": 90, "l": 110},
        meta={
            "figure": "decoupling",
            "n": len(points),
            "evaluated": len(ev),
            "decoupled": n_dec,
            "not_removed": n_nr,
            "method": methods[0] if len(methods) == 1 else methods,
        },
    )
