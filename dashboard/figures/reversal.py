"""The reversal matrix (architecture × task: profile class and late concentration with CI,
reversal pairs outlined) and the S3 question (S3's profile distance to Parity vs Dyck)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
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
from dashboard.theme import (
    FAMILIES,
    TASKS,
    family_color,
    family_label,
    ordered,
    task_label,
)
from science.profiles import profile_distance

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


def row_key(p: dict[str, Any]) -> str:
    """A matrix row: the family, or the pretrained model's name."""
    return p.get("pretrained") or p["family"]


def row_label(key: str) -> str:
    """A matrix row's label, escaped (a pretrained model's name is user text)."""
    return esc(family_label(key) if key in FAMILIES else key.rstrip("/").split("/")[-1])


def _row_order(keys) -> list[str]:
    keys = list(dict.fromkeys(keys))
    fams = [k for k in FAMILIES if k in keys]
    return fams + sorted(k for k in keys if k not in FAMILIES)


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
    rows = _row_order(k for k, _ in cls)
    tasks = ordered({t for _, t in cls}, TASKS)
    out = []
    for t1, t2 in combinations(tasks, 2):
        for f1, f2 in combinations(rows, 2):
            a1, b1, a2, b2 = cls.get((f1, t1)), cls.get((f2, t1)), cls.get((f1, t2)), cls.get((f2, t2))
            if None in (a1, b1, a2, b2) or a1 == b1 or a2 == b2:
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
    fams = _row_order(row_key(p) for p in profiles)
    tks = ordered([p["task"] for p in profiles], TASKS)
    by = {(row_key(p), p["task"]): p for p in profiles}
    reversals = find_reversals(profiles) if reversals is None else reversals
    z, text, custom = [], [], []
    n_missing = n_disagree = n_control = n_fragile = 0
    for fam in fams:
        zr, tr, cr = [], [], []
        for task in tks:
            p = by.get((fam, task))
            if p is None:
                zr.append(None)
                tr.append("")
                cr.append(["", "", "", "", ""])
                continue
            m = metric(p, metric_name)
            zr.append(m["mean"] if finite(m["mean"]) else None)
            n_missing += not finite(m["mean"])
            cls = esc_or(p.get("profile_class"))
            votes = p.get("class_counts")
            split = esc(class_with_split(p.get("profile_class"), votes))
            seed_line = ""
            if isinstance(votes, dict) and votes:  # the per-seed split, flagged when most seeds differ
                counts = ", ".join(
                    f"{esc(votes[c])} {esc(c)}"
                    for c in CLASS_ORDER + tuple(sorted(c for c in votes if c not in CLASS_ORDER))
                    if votes.get(c)
                )
                seed_line = f"<br>seeds: {counts}" + (" ⚠" if seeds_disagree(p.get("profile_class"), votes) else "")
                n_disagree += seeds_disagree(p.get("profile_class"), votes)
            ci = fmt_ci(m["mean"], m["lo"], m["hi"]) if finite(m["mean"]) else "no value"
            n = esc_or(p.get("n"), "?")
            n_un = len(p.get("untrained_run_ids") or [])
            ctrl, frag, frag_c = control_class_line(p), stability_line(p), stability_line(p, against_control=True)
            n_control += bool(ctrl)
            n_fragile += bool(frag or frag_c)
            # ⚑ beside the class that is fragile: the majority-floor class, or the one against the control
            tr.append(
                f"<b>{cls}</b>"
                + (" ⚑" if frag else "")
                + seed_line
                + (f"<br>{ctrl}" + (" ⚑" if frag_c else "") if ctrl else "")
                + f"<br>{ci}<br>n={n}"
                + (f"<br><i>{untrained_suffix(n_un, p.get('n') or n_un).strip()}</i>" if n_un else "")
            )
            cr.append(
                [
                    split,
                    ci,
                    n,
                    ", ".join(esc(s) for s in p.get("seeds") or []),
                    "<br>" + " · ".join(x for x in (ctrl or "no random-init control", frag, frag_c) if x),
                ]
            )
        z.append(zr)
        text.append(tr)
        custom.append(cr)
    bounded = metric_name in ("late_concentration", "auc")
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[esc(task_label(t)) for t in tks],
            y=[row_label(f) for f in fams],
            text=text,
            texttemplate="%{text}",
            textfont={"size": 13},
            customdata=custom,
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
    )
    lines = max((t.count("<br>") + 1 for row in text for t in row if t), default=4)
    base_layout(fig, height=max(320, 110 + max(78, 21 * lines) * len(fams)))  # every line of a cell inside it
    fig.update_yaxes(autorange="reversed", showgrid=False, showline=False, ticks="", title_text="architecture")
    fig.update_xaxes(side="top", showgrid=False, showline=False, ticks="", title_text="")
    fig.update_layout(margin={"t": 50, "l": 110})
    # outline the cells that take part in a reversal
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
    # hatch the cells that include untrained runs (the "trained runs only" switch is off)
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
    fig.update_layout(
        meta={
            "figure": "reversal_matrix",
            "reversals": len(reversals),
            "outlined": len(outlined),
            "untrained_cells": len(hatched),
            "seeds_disagree_cells": n_disagree,
            "control_cells": n_control,
            "fragile_cells": n_fragile,
        }
    )
    if n_disagree:
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
    keys = []
    if n_control:
        keys.append("vs init: the class against the random-init controls (claims 1–3 read it)")
    if n_fragile:
        keys.append("⚑ fragile: the class flips when the thresholds move by their documented margins")
    add_caption(fig, "\n".join(x for x in (caption, " · ".join(keys)) if x) or None)
    return note_missing(fig, n_missing, len(by), "cells")


def s3_distances(curve_rows: Sequence[dict[str, Any]], *, eval_length: int | None = None) -> list[dict[str, Any]]:
    """Per family: the distance between S3's mean layer curve and Parity's, and Dyck's, computed by
    claim 3's own function, ``science.profiles.profile_distance`` (RMS between the curves scaled
    to (acc − majority baseline)/(max − baseline), on 21 normalised depths). Smaller = more alike
    in shape. A family without all three curves, or with a layer missing from one, gets no row."""
    curves: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    bases: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in curve_rows:
        if eval_length is not None and int(r["eval_length"]) != int(eval_length):
            continue
        if r.get("pretrained"):
            continue
        if finite(r.get("mean")):
            curves[(r["family"], r["task"])][int(r["layer"])] = float(r["mean"])
            if finite(r.get("majority_baseline")):
                bases[(r["family"], r["task"])].append(float(r["majority_baseline"]))

    def base(key: tuple[str, str]) -> float | None:
        return sum(bases[key]) / len(bases[key]) if bases.get(key) else None

    out = []
    for fam in ordered({f for f, _ in curves}, FAMILIES):
        if not all(len(curves.get((fam, t), {})) >= 2 for t in ("s3", "parity", "dyck")):
            continue
        try:
            dp, dd = (
                profile_distance(curves[(fam, "s3")], curves[(fam, t)], base((fam, "s3")), base((fam, t)))
                for t in ("parity", "dyck")
            )
        except ValueError:  # a layer missing from a curve (no mean stored): no distance to show
            continue
        cell_rows = [
            r
            for r in curve_rows
            if r.get("family") == fam
            and r.get("task") in ("s3", "parity", "dyck")
            and not r.get("pretrained")
            and (eval_length is None or int(r["eval_length"]) == int(eval_length))
        ]
        ns = [int(r["n"]) for r in cell_rows if r.get("n") is not None]
        untrained = sorted({int(i) for r in cell_rows for i in (r.get("untrained_run_ids") or [])})
        out.append(
            {
                "family": fam,
                "to_parity": dp,
                "to_dyck": dd,
                "closer": "parity" if dp < dd else "dyck" if dd < dp else "tie",
                "n": min(ns) if ns else None,
                "untrained_run_ids": untrained,
            }
        )
    return out


def s3_distance_figure(distances: Sequence[dict[str, Any]], *, caveat: str | None = None) -> go.Figure:
    """S3's distance to Parity and to Dyck per family. ``caveat``: the claim-3 verdict line
    (``s3_caveat``), drawn in the figure so an embed or an exported image keeps it."""
    if not distances:
        return empty_figure("Needs curves for S3, Parity and Dyck", height=260)
    total = len(distances)
    distances = [d for d in distances if finite(d.get("to_parity")) and finite(d.get("to_dyck"))]
    if not distances:
        return empty_figure(f"No S3 distance to draw: all {total} families have no value", height=260)
    fams = [d["family"] for d in distances][::-1]

    def label(fam: str) -> str:
        return esc(family_label(fam))

    fig = go.Figure()
    for d in distances:
        fig.add_trace(
            go.Scatter(
                x=[d["to_parity"], d["to_dyck"]],
                y=[label(d["family"])] * 2,
                mode="lines",
                line={"color": "#c5cbd3", "width": 3},
                showlegend=False,
                hoverinfo="skip",
                meta={"kind": "connector", "family": d["family"]},
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[d["to_parity"] for d in distances],
            y=[label(d["family"]) for d in distances],
            mode="markers",
            name="S3 ↔ Parity",
            marker={"symbol": "circle", "size": 14, "color": "#0072B2"},
            hovertemplate="%{y}: S3 ↔ Parity distance %{x:.3f}<extra></extra>",
            meta={"kind": "to_parity"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[d["to_dyck"] for d in distances],
            y=[label(d["family"]) for d in distances],
            mode="markers",
            name="S3 ↔ Dyck",
            marker={"symbol": "diamond", "size": 14, "color": "#D55E00"},
            hovertemplate="%{y}: S3 ↔ Dyck distance %{x:.3f}<extra></extra>",
            meta={"kind": "to_dyck"},
        )
    )
    xmax = max(max(d["to_parity"], d["to_dyck"]) for d in distances)
    for d in distances:
        fig.add_annotation(
            x=xmax * 1.08 + 0.02,
            y=label(d["family"]),
            showarrow=False,
            xanchor="left",
            text=f"closer to {'Parity' if d['closer'] == 'parity' else 'Dyck' if d['closer'] == 'dyck' else '—'}",
            font={"size": 12, "color": family_color(d["family"])},
        )
    base_layout(fig, height=max(240, 90 + 46 * len(fams)))
    fig.update_xaxes(
        title_text="profile distance (RMS between normalised layer curves, 0 = same shape, 1 = opposite)",
        range=[0, xmax * 1.45 + 0.05],
        rangemode="tozero",
    )
    fig.update_yaxes(categoryorder="array", categoryarray=[label(f) for f in fams], showgrid=False)
    fig.update_layout(meta={"figure": "s3_distance", "caveat": caveat}, margin={"l": 110, "t": 64 if caveat else 40})
    if caveat:
        fig.add_annotation(
            text=esc(caveat),
            xref="paper",
            yref="paper",
            x=0,
            y=1.02,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font={"size": 12, "color": "#8a4b00"},
        )
    return note_missing(fig, total - len(distances), total, "families")


def s3_caveat(claim3: dict[str, Any] | None) -> str | None:
    """The one line the S3 figure carries about claim 3's verdict (docs/SCIENCE.md#claims): with
    "not enough data" the grouping is descriptive only; None when the verdict is unknown."""
    verdict = (claim3 or {}).get("verdict")
    if verdict == "not enough data":
        return "Not enough data (claim 3 on /claims): descriptively only — the grouping is not a finding."
    if verdict:
        return f"Claim 3 on /claims: {verdict}."
    return None
