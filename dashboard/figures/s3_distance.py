"""The S3 question: is S3's layer profile closer in shape to Parity's or to Dyck's? Per family,
the distance by claim 3's own function and the figure of the two distances."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import base_layout, empty_figure, esc, finite, note_missing
from dashboard.theme import FAMILIES, family_color, family_label, ordered
from science.profiles import profile_distance


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
    fig = go.Figure()
    for d in distances:
        fig.add_trace(
            go.Scatter(
                x=[d["to_parity"], d["to_dyck"]],
                y=[_label(d["family"])] * 2,
                mode="lines",
                line={"color": "#c5cbd3", "width": 3},
                showlegend=False,
                hoverinfo="skip",
                meta={"kind": "connector", "family": d["family"]},
            )
        )
    fig.add_trace(_distance_markers(distances, "to_parity", "S3 ↔ Parity", "circle", "#0072B2"))
    fig.add_trace(_distance_markers(distances, "to_dyck", "S3 ↔ Dyck", "diamond", "#D55E00"))
    xmax = max(max(d["to_parity"], d["to_dyck"]) for d in distances)
    for d in distances:
        fig.add_annotation(
            x=xmax * 1.08 + 0.02,
            y=_label(d["family"]),
            showarrow=False,
            xanchor="left",
            text=f"closer to {'Parity' if d['closer'] == 'parity' else 'Dyck' if d['closer'] == 'dyck' else '—'}",
            font={"size": 12, "color": family_color(d["family"])},
        )
    _distance_layout(fig, fams, xmax, caveat)
    return note_missing(fig, total - len(distances), total, "families")


def _label(fam: str) -> str:
    return esc(family_label(fam))


def _distance_markers(distances: Sequence[dict[str, Any]], key: str, name: str, symbol: str, color: str) -> go.Scatter:
    """One marker per family at its distance ``key`` (``to_parity`` / ``to_dyck``)."""
    return go.Scatter(
        x=[d[key] for d in distances],
        y=[_label(d["family"]) for d in distances],
        mode="markers",
        name=name,
        marker={"symbol": symbol, "size": 14, "color": color},
        hovertemplate=f"%{{y}}: {name} distance %{{x:.3f}}<extra></extra>",
        meta={"kind": key},
    )


def _distance_layout(fig: go.Figure, fams: Sequence[str], xmax: float, caveat: str | None) -> None:
    """Height (a row per family), the distance axis with room for the "closer to" notes, and the
    claim-3 caveat above the plot."""
    base_layout(fig, height=max(240, 90 + 46 * len(fams)))
    fig.update_xaxes(
        title_text="profile distance (RMS between normalised layer curves, 0 = same shape, 1 = opposite)",
        range=[0, xmax * 1.45 + 0.05],
        rangemode="tozero",
    )
    fig.update_yaxes(categoryorder="array", categoryarray=[_label(f) for f in fams], showgrid=False)
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


def s3_caveat(claim3: dict[str, Any] | None) -> str | None:
    """The one line the S3 figure carries about claim 3's verdict (docs/SCIENCE.md#claims): with
    "not enough data" the grouping is descriptive only; None when the verdict is unknown."""
    verdict = (claim3 or {}).get("verdict")
    if verdict == "not enough data":
        return "Not enough data (claim 3 on /claims): descriptively only — the grouping is not a finding."
    if verdict:
        return f"Claim 3 on /claims: {verdict}."
    return None
