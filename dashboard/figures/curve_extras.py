"""Extra lines on the layerwise curves: each family's random-init control ("at
initialisation", dashed, docs/SCIENCE.md#controls) and the probe accuracy per token type
(docs/SCIENCE.md#token-types), plus the aggregation of stored probe rows into per-type points.

Traces only: :func:`dashboard.figures.curves.layerwise_curves` places them on its facets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import esc, esc_or, finite, t_interval
from dashboard.theme import family_label, layer_name, rgba

CONTROL_DASH = "dash"
# one dash per token type, so "open" and "close" stay apart in grey print too
TYPE_DASH = {"open": "dot", "close": "longdashdot", "bracket": "dot", "other": "longdashdot"}


def control_label(family: str) -> str:
    """The legend entry of a family's control line: ``Transformer at initialisation`` (escaped)."""
    return f"{esc(family_label(family))} at initialisation"


def control_trace(
    points: Sequence[dict[str, Any]], *, family: str, color: str, x_of, legend: bool, group: str, meta: dict[str, Any]
) -> go.Scatter:
    """The family's control curve on one facet: ``points`` are ``/api/curves?controls=only``
    items (``control`` = "init": the same architecture and seed, untrained, probed only) in
    layer order; ``x_of(row)`` gives the x value. Dashed, in the family's colour."""
    label = control_label(family)
    return go.Scatter(
        x=[x_of(r) for r in points],
        y=[r.get("mean") if finite(r.get("mean")) else None for r in points],
        mode="lines",
        line={"color": color, "width": 1.8, "dash": CONTROL_DASH},
        name=label,
        legendgroup=f"{group}-init",
        showlegend=legend,
        customdata=[[esc(r.get("layer_name") or layer_name(int(r["layer"]))), esc_or(r.get("n"), "?")] for r in points],
        hovertemplate=(
            f"<b>{label}</b> (untrained, probed only) · layer %{{customdata[0]}}"
            "<br>probe accuracy %{y:.1%} · n = %{customdata[1]} seeds<extra></extra>"
        ),
        meta={**meta, "kind": "control"},
    )


def type_trace(
    points: Sequence[dict[str, Any]],
    *,
    family_name: str,
    token_type: str,
    color: str,
    x_of,
    legend: bool,
    group: str,
    meta: dict[str, Any],
) -> go.Scatter:
    """One family's probe accuracy on the tokens of one type (``open`` / ``close`` on Dyck,
    ``bracket`` / ``other`` on code_depth), ``points`` from :func:`type_accuracy_rows`."""
    label = f"{family_name} · {esc(token_type)} tokens"
    return go.Scatter(
        x=[x_of(r) for r in points],
        y=[r.get("mean") if finite(r.get("mean")) else None for r in points],
        mode="lines",
        line={"color": rgba(color, 0.75), "width": 1.4, "dash": TYPE_DASH.get(token_type, "dot")},
        name=label,
        legendgroup=f"{group}-type-{token_type}",
        showlegend=legend,
        customdata=[[esc(layer_name(int(r["layer"]))), esc_or(r.get("n"), "?")] for r in points],
        hovertemplate=(
            f"<b>{label}</b> · layer %{{customdata[0]}}<br>probe accuracy on these tokens %{{y:.1%}}"
            " · n = %{customdata[1]} seeds<extra></extra>"
        ),
        meta={**meta, "kind": "token_type", "token_type": token_type},
    )


def type_accuracy_rows(probes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-type points from stored probe rows (``/api/export/probes.json`` with
    ``type_accuracy``): one ``{task, family, pretrained, n_layers, eval_length, layer, depth,
    token_type, mean, lo, hi, n}`` per (cell, length, layer, token type), the mean over seeds
    with its 95% t-interval clipped to 0..1. Rows without ``type_accuracy`` (parity, S3, or
    results stored before it was measured) add nothing."""
    acc: dict[tuple, list[float]] = defaultdict(list)
    for p in probes:
        types = p.get("type_accuracy")
        if not isinstance(types, dict):
            continue
        for tt, v in types.items():
            if finite(v):
                key = (
                    p["task"],
                    p["family"],
                    p.get("pretrained"),
                    int(p["n_layers"]),
                    int(p["eval_length"]),
                    int(p["layer"]),
                    str(tt),
                )
                acc[key].append(float(v))
    out = []
    for (task, fam, pre, n, L, layer, tt), vals in sorted(acc.items(), key=lambda kv: str(kv[0])):
        m, lo, hi = t_interval(vals)
        out.append(
            {
                "task": task,
                "family": fam,
                "pretrained": pre,
                "n_layers": n,
                "eval_length": L,
                "layer": layer,
                "depth": (layer + 1) / n if n else None,
                "token_type": tt,
                "mean": m,
                "lo": lo,
                "hi": hi,
                "n": len(vals),
            }
        )
    return out
