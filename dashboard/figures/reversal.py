"""The reversal matrix: architecture × task, each cell the profile class and a metric (late
concentration by default) with its CI, the cells of a reversal pair outlined. The S3 question
is :mod:`dashboard.figures.s3_distance`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.captions import add_caption
from dashboard.figures.common import (
    CLASS_ORDER,
    base_layout,
    class_with_split,
    empty_figure,
    esc,
    esc_or,
    finite,
    fmt_ci,
    note_missing,
    seeds_disagree,
    untrained_suffix,
)
from dashboard.figures.rows import row_key, row_label, row_order
from dashboard.theme import TASK_ORDER, ordered, task_label

METRIC_ALIASES = {
    "late_concentration": ("late_concentration", "late_share", "last_layer_share"),
    "auc": ("auc", "area", "area_under_curve"),
    "best_layer": ("best_layer", "best_probe_layer"),
    # the normalised depth the title promises (first_95 itself is a layer index, emb = −1)
    "first_95": ("depth_first_95",),
}
METRIC_TITLES = {
    "late_concentration": "late concentration (share of the probe gain made by the last layer)",
    "auc": "area under the normalised layer curve",
    "best_layer": "best-probe layer (layer index, emb = −1)",
    "first_95": "first layer reaching 95% of the gain (normalised depth, emb = 0, last layer = 1)",
}
# the range each metric's interval is clipped to (science.stats.BOUNDS; a layer index: emb .. last)
METRIC_BOUNDS = {"auc": "auc", "first_95": "depth_first_95"}


def metric(profile: dict[str, Any], name: str) -> dict[str, float | None]:
    """``{mean, lo, hi}`` of a profile metric, tolerant of naming variants, its interval clipped
    to the metric's possible range (a first-at-95% depth of −0.10 is not a depth; a best layer
    below emb is not a layer)."""
    metrics = profile.get("metrics") or {}
    for key in METRIC_ALIASES.get(name, (name,)):
        if key in metrics:
            m = metrics[key]
            if isinstance(m, dict):
                return _clipped(name, profile, {"mean": m.get("mean"), "lo": m.get("lo"), "hi": m.get("hi")})
            return {"mean": m, "lo": None, "hi": None}
    return {"mean": None, "lo": None, "hi": None}


def _clipped(name: str, profile: dict[str, Any], m: dict[str, float | None]) -> dict[str, float | None]:
    from science.stats import bounds_for, clip_interval

    if name == "best_layer":
        n = profile.get("n_layers")
        bounds = (-1.0, float(int(n) - 1)) if isinstance(n, int) and n > 0 else None
    else:
        bounds = bounds_for(METRIC_BOUNDS.get(name, name))
    if not finite(m["mean"]) or not finite(m["lo"]) or not finite(m["hi"]):
        return m
    mean, lo, hi = clip_interval(m["mean"], m["lo"], m["hi"], bounds)
    return {"mean": mean, "lo": lo, "hi": hi}


def control_class_line(profile: dict[str, Any]) -> str:
    """``vs init: gradual`` — the class measured against the seeds' random-init controls
    (docs/SCIENCE.md#controls), the one claims 1–3 read; ``""`` when the cell has no control.
    Escaped (classes are stored text)."""
    ac = profile.get("against_control")
    if not isinstance(ac, dict) or not ac.get("profile_class"):
        return ""
    return f"vs init: {esc(ac['profile_class'])}"


def stability_line(profile: dict[str, Any], *, against_control: bool = False) -> str:
    """``fragile: 41/81 settings`` when the cell's class (``against_control``: its class against
    the random-init controls) flips within the threshold margins (docs/SCIENCE.md#class-stability);
    ``""`` when stable or unknown."""
    src = profile.get("against_control") if against_control else profile
    st = src.get("stability") if isinstance(src, dict) else None
    if not isinstance(st, dict) or st.get("stable") is not False:
        return ""
    return (
        f"{'vs init ' if against_control else ''}fragile: {esc_or(st.get('agree'), '?')}/"
        f"{esc_or(st.get('of'), '?')} settings"
    )


def find_reversals(profiles: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reversal is a pair of tasks on which two architectures swap profile classes
    (the same rule as ``science.profiles.reversal_pairs``): the classes differ on each task and
    a class moves across — ``kind="full"`` when A on T1 = B on T2 and B on T1 = A on T2,
    ``"partial"`` when only one holds (Parity: Transformer gradual / LSTM late; Dyck:
    Transformer early / LSTM gradual — "gradual" changes hands). ``flat`` cells are ignored."""
    cls = {
        (row_key(p), p["task"]): p.get("profile_class")
        for p in profiles
        if p.get("profile_class") and p.get("profile_class") != "flat"
    }
    rows = row_order(k for k, _ in cls)
    tasks = ordered({t for _, t in cls}, TASK_ORDER)
    out = []
    for t1, t2 in combinations(tasks, 2):
        for f1, f2 in combinations(rows, 2):
            a1, b1, a2, b2 = cls.get((f1, t1)), cls.get((f2, t1)), cls.get((f1, t2)), cls.get((f2, t2))
            if a1 is None or b1 is None or a2 is None or b2 is None or a1 == b1 or a2 == b2:
                continue
            shared = sorted({x for x, ok in ((a1, a1 == b2), (b1, b1 == a2)) if ok})
            if not shared:
                continue
            out.append(
                {
                    "task_a": t1,
                    "task_b": t2,
                    "family_a": f1,
                    "family_b": f2,
                    "a1": a1,
                    "b1": b1,
                    "a2": a2,
                    "b2": b2,
                    "shared_class": shared,
                    "kind": "full" if (a1 == b2 and b1 == a2) else "partial",
                }
            )
    return out


@dataclass
class _Cells:
    """The matrix row by row: colour values, cell text and hover data; and how many cells lack
    the metric, have most seeds in another class, have a random-init control, are fragile."""

    z: list[list[float | None]] = field(default_factory=list)
    text: list[list[str]] = field(default_factory=list)
    custom: list[list[list[str]]] = field(default_factory=list)
    n_missing: int = 0
    n_disagree: int = 0
    n_control: int = 0
    n_fragile: int = 0


def reversal_matrix(
    profiles: Sequence[dict[str, Any]],
    *,
    metric_name: str = "late_concentration",
    families: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    reversals: Sequence[dict[str, Any]] | None = None,
    caption: str | None = None,
) -> go.Figure:
    """``profiles``: ``/api/profiles`` items. Each cell: the class of the seed-mean curve against
    the majority rate, its seeds' split, "vs init: <class>" (the class against the seeds' random-init
    controls, which claims 1–3 read) where stored, ⚑ when the class is fragile (flips within the
    threshold margins), the metric with its interval clipped to the metric's range. ``caption``:
    the suite and settings behind the matrix, written under it with a key to the marks."""
    profiles = [
        p for p in profiles if (families is None or row_key(p) in families) and (tasks is None or p["task"] in tasks)
    ]
    if not profiles:
        return empty_figure("No profiles for this selection yet")
    fams = row_order(row_key(p) for p in profiles)
    tks = ordered([p["task"] for p in profiles], TASK_ORDER)
    by = {(row_key(p), p["task"]): p for p in profiles}
    reversals = find_reversals(profiles) if reversals is None else reversals
    cells = _matrix_cells(by, fams, tks, metric_name)
    fig = go.Figure(_matrix_heatmap(cells, fams, tks, metric_name))
    _matrix_layout(fig, cells, len(fams))
    outlined = _outline_reversals(fig, reversals, fams, tks)
    hatched = _hatch_untrained(fig, profiles, fams, tks)
    fig.update_layout(
        meta={
            "figure": "reversal_matrix",
            "reversals": len(reversals),
            "outlined": outlined,
            "untrained_cells": hatched,
            "seeds_disagree_cells": cells.n_disagree,
            "control_cells": cells.n_control,
            "fragile_cells": cells.n_fragile,
        }
    )
    _seeds_note(fig, cells.n_disagree)
    keys = []
    if cells.n_control:
        keys.append("vs init: the class against the random-init controls (claims 1–3 read it)")
    if cells.n_fragile:
        keys.append("⚑ fragile: the class flips when the thresholds move by their documented margins")
    add_caption(fig, "\n".join(x for x in (caption, " · ".join(keys)) if x) or None)
    return note_missing(fig, cells.n_missing, len(by), "cells")


def _matrix_cells(
    by: dict[tuple[str, str], dict[str, Any]], fams: list[str], tks: list[str], metric_name: str
) -> _Cells:
    """Every cell of the matrix (an empty one where a row × task has no profile)."""
    cells = _Cells()
    for fam in fams:
        zr: list[float | None] = []
        tr: list[str] = []
        cr: list[list[str]] = []
        for task in tks:
            p = by.get((fam, task))
            if p is None:
                zr.append(None)
                tr.append("")
                cr.append(["", "", "", "", ""])
                continue
            z, text, custom = _cell(p, metric_name, cells)
            zr.append(z)
            tr.append(text)
            cr.append(custom)
        cells.z.append(zr)
        cells.text.append(tr)
        cells.custom.append(cr)
    return cells


def _seed_line(p: dict[str, Any]) -> str:
    """``<br>seeds: 2 late, 1 gradual``, flagged ⚠ when most seeds differ; ``""`` without votes."""
    votes = p.get("class_counts")
    if not isinstance(votes, dict) or not votes:
        return ""
    counts = ", ".join(
        f"{esc(votes[c])} {esc(c)}"
        for c in CLASS_ORDER + tuple(sorted(c for c in votes if c not in CLASS_ORDER))
        if votes.get(c)
    )
    return f"<br>seeds: {counts}" + (" ⚠" if seeds_disagree(p.get("profile_class"), votes) else "")


def _cell(p: dict[str, Any], metric_name: str, cells: _Cells) -> tuple[float | None, str, list[str]]:
    """One cell's colour value, text (class ⚑, seeds, vs init ⚑, metric, n, untrained) and hover
    data; counts its flags into ``cells``."""
    m = metric(p, metric_name)
    cells.n_missing += not finite(m["mean"])
    cells.n_disagree += seeds_disagree(p.get("profile_class"), p.get("class_counts"))
    ci = fmt_ci(m["mean"], m["lo"], m["hi"]) if finite(m["mean"]) else "no value"
    n = esc_or(p.get("n"), "?")
    n_un = len(p.get("untrained_run_ids") or [])
    ctrl, frag, frag_c = control_class_line(p), stability_line(p), stability_line(p, against_control=True)
    cells.n_control += bool(ctrl)
    cells.n_fragile += bool(frag or frag_c)
    # ⚑ beside the class that is fragile: the majority-floor class, or the one against the control
    text = (
        f"<b>{esc_or(p.get('profile_class'))}</b>"
        + (" ⚑" if frag else "")
        + _seed_line(p)
        + (f"<br>{ctrl}" + (" ⚑" if frag_c else "") if ctrl else "")
        + f"<br>{ci}<br>n={n}"
        + (f"<br><i>{untrained_suffix(n_un, p.get('n') or n_un).strip()}</i>" if n_un else "")
    )
    custom = [
        esc(class_with_split(p.get("profile_class"), p.get("class_counts"))),
        ci,
        n,
        ", ".join(esc(s) for s in p.get("seeds") or []),
        "<br>" + " · ".join(x for x in (ctrl or "no random-init control", frag, frag_c) if x),
    ]
    return (m["mean"] if finite(m["mean"]) else None), text, custom


def _matrix_heatmap(cells: _Cells, fams: list[str], tks: list[str], metric_name: str) -> go.Heatmap:
    """The cells coloured by the metric (0–1 for a bounded one), with the hover naming it."""
    bounded = metric_name in ("late_concentration", "auc")
    return go.Heatmap(
        z=cells.z,
        x=[esc(task_label(t)) for t in tks],
        y=[row_label(f) for f in fams],
        text=cells.text,
        texttemplate="%{text}",
        textfont={"size": 13},
        customdata=cells.custom,
        colorscale="Cividis",
        zmin=0 if bounded else None,
        zmax=1 if bounded else None,
        xgap=3,
        ygap=3,
        hoverongaps=False,
        colorbar={
            "title": {
                "text": "late<br>concentration" if metric_name == "late_concentration" else esc(metric_name),
                "side": "right",
            },
            "thickness": 14,
        },
        hovertemplate="<b>%{y} · %{x}</b><br>profile class (of the seed-mean curve) %{customdata[0]}<br>"
        + esc(METRIC_TITLES.get(metric_name, metric_name))
        + "<br>%{customdata[1]} (95% CI)<br>n = %{customdata[2]} seeds (%{customdata[3]})"
        "%{customdata[4]}<extra></extra>",
        meta={"kind": "matrix", "metric": metric_name},
    )


def _matrix_layout(fig: go.Figure, cells: _Cells, n_rows: int) -> None:
    """Height (every line of a cell inside it), tasks on top, architectures down the side."""
    lines = max((t.count("<br>") + 1 for row in cells.text for t in row if t), default=4)
    base_layout(fig, height=max(320, 110 + max(78, 21 * lines) * n_rows))
    fig.update_yaxes(autorange="reversed", showgrid=False, showline=False, ticks="", title_text="architecture")
    fig.update_xaxes(side="top", showgrid=False, showline=False, ticks="", title_text="")
    fig.update_layout(margin={"t": 50, "l": 110})


def _outline_reversals(fig: go.Figure, reversals: Sequence[dict[str, Any]], fams: list[str], tks: list[str]) -> int:
    """Outline the cells that take part in a reversal; returns how many."""
    outlined = set()
    for r in reversals:
        for f in (r["family_a"], r["family_b"]):
            for t in (r["task_a"], r["task_b"]):
                if f in fams and t in tks:
                    outlined.add((fams.index(f), tks.index(t)))
    for fi, ti in sorted(outlined):
        fig.add_shape(
            type="rect",
            x0=ti - 0.5,
            x1=ti + 0.5,
            y0=fi - 0.5,
            y1=fi + 0.5,
            line={"color": "#111", "width": 3},
            xref="x",
            yref="y",
        )
    return len(outlined)


def _hatch_untrained(fig: go.Figure, profiles: Sequence[dict[str, Any]], fams: list[str], tks: list[str]) -> int:
    """Hatch the cells that include untrained runs (the "trained runs only" switch is off), on an
    overlay axis; returns how many."""
    hatched = [(fams.index(row_key(p)), tks.index(p["task"])) for p in profiles if p.get("untrained_run_ids")]
    for fi, ti in hatched:
        fig.add_trace(
            go.Scatter(
                x=[ti - 0.5, ti + 0.5, ti + 0.5, ti - 0.5, ti - 0.5],
                y=[fi - 0.5, fi - 0.5, fi + 0.5, fi + 0.5, fi - 0.5],
                xaxis="x2",
                yaxis="y2",
                mode="lines",
                fill="toself",
                line={"width": 0},
                # thin, faint hatching with no tint: the cell's colour and text stay readable under it
                fillcolor="rgba(0, 0, 0, 0)",
                fillpattern={"shape": "/", "fgcolor": "#9aa5b1", "fgopacity": 0.45, "size": 14, "solidity": 0.12},
                hoverinfo="skip",
                showlegend=False,
                meta={"kind": "untrained", "family": fams[fi], "task": tks[ti]},
            )
        )
    if hatched:  # an overlay axis on the categorical grid: cell centres at 0..n−1, rows reversed
        fig.update_layout(
            xaxis2={"overlaying": "x", "range": [-0.5, len(tks) - 0.5], "visible": False},
            yaxis2={"overlaying": "y", "range": [len(fams) - 0.5, -0.5], "visible": False},
        )
    return len(hatched)


def _seeds_note(fig: go.Figure, n_disagree: int) -> None:
    """Under the matrix: how many cells have most seeds in another class than the seed-mean curve."""
    if not n_disagree:
        return
    fig.add_annotation(
        text=f"⚠ {n_disagree} cell{'s' if n_disagree != 1 else ''}: most seeds have another class "
        "than the seed-mean curve",
        xref="paper",
        yref="paper",
        x=0,
        y=-0.02,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        font={"size": 12},
    )
    fig.update_layout(margin={"b": 60})
