"""A run's own figures on the runs page (`/`): its training loss with the held-out accuracy, its
behaviour by eval length, and the loss curves of several selected runs overlaid."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import base_layout, empty_figure, esc, finite, note_missing
from dashboard.theme import family_color


def loss_figure(run: dict[str, Any]) -> go.Figure:
    """One run's training loss by step (nats) with its held-out token accuracy (0..1, right axis)
    where the loop measured it. ``run``: ``GET /api/runs/{id}`` (``loss_curve``: ``[{step, loss,
    heldout_token_acc, length?}]``, ``train_config.train_length``). A step without a loss is a
    gap, counted in ``meta.missing``."""
    curve = run.get("loss_curve") or []
    if not curve:
        return empty_figure("No loss curve stored", height=260)
    color = family_color(run.get("family", ""))
    fig = go.Figure(
        go.Scatter(
            x=[p.get("step") for p in curve],
            y=[p.get("loss") for p in curve],
            mode="lines",
            line={"color": color, "width": 2},
            name="training loss",
            hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
        )
    )
    acc = [p for p in curve if p.get("heldout_token_acc") is not None]
    train_length = (run.get("train_config") or {}).get("train_length") or 40
    has_len = any(p.get("length") is not None for p in acc)
    acc_name = "held-out token accuracy at the current curriculum length" if has_len else "held-out token accuracy"
    if acc:
        # the training loop measures held-out accuracy at the curriculum's current length (it
        # stores it as "length" when a curriculum runs), not at the training length
        lengths = [p.get("length") or train_length for p in acc]
        fig.add_trace(
            go.Scatter(
                x=[p["step"] for p in acc],
                y=[p["heldout_token_acc"] for p in acc],
                mode="lines",
                line={"color": "#52606d", "dash": "dot"},
                name=acc_name,
                yaxis="y2",
                customdata=lengths,
                hovertemplate="step %{x}<br>held-out accuracy %{y:.1%} at length %{customdata}<extra></extra>",
                meta={"kind": "heldout", "lengths": lengths},
            )
        )
    base_layout(fig, height=280)
    note_missing(fig, sum(not finite(p.get("loss")) for p in curve), len(curve), "steps' losses")
    fig.update_layout(
        xaxis_title="training step",
        yaxis_title="cross-entropy loss (nats)",
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "range": [0, 1.02],
            "tickformat": ".0%",
            "tickvals": [0, 0.25, 0.5, 0.75, 1.0],
            "title": {
                "text": "held-out acc. (at curriculum length)" if has_len else f"held-out accuracy (L={train_length})"
            },
            "showgrid": False,
        },
        margin={"r": 70},
    )
    return fig


def run_behaviour_figure(run: dict[str, Any]) -> go.Figure:
    """One run's token accuracy (every token, and at the last position; 0..1) by eval length
    ``L`` from ``run["behaviour"]`` (``{"40": {"token_acc", "last_acc", "n"}}``), the training
    length marked. A length without a value is a gap, counted in ``meta.missing``."""
    beh = run.get("behaviour") or {}
    lengths = sorted(int(k) for k in beh if str(k).isdigit())
    if not lengths:
        return empty_figure("No behavioural results stored", height=260)
    color = family_color(run.get("family", ""))
    fig = go.Figure()
    for key, name, dash in (("token_acc", "every token", "solid"), ("last_acc", "last position", "dot")):
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=[(beh[str(L)] or {}).get(key) for L in lengths],
                mode="lines+markers",
                name=name,
                line={"color": color, "dash": dash, "width": 2},
                hovertemplate=f"L = %{{x}}<br>{name}: %{{y:.1%}}<extra></extra>",
            )
        )
    fig.add_vline(x=40, line={"color": "#9aa5b1", "dash": "dot"})
    base_layout(fig, height=280)
    values = [(beh[str(L)] or {}).get(k) for L in lengths for k in ("token_acc", "last_acc")]
    note_missing(fig, sum(not finite(v) for v in values), len(values), "accuracies")
    fig.update_layout(xaxis_title="eval length L (train length 40)", yaxis_title="accuracy")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.02])
    return fig


def loss_overlay(runs: list[dict[str, Any]]) -> go.Figure:
    """The training loss (nats) of each run in ``runs`` (``GET /api/runs/{id}`` items with their
    ``loss_curve``) on one axis: a line per run, its family's colour, a dash style per run within
    a family. A step without a loss is a gap, counted in ``meta.missing``."""
    if not runs:
        return empty_figure("No run selected", height=300)
    dashes = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
    seen: dict[str, int] = {}
    fig = go.Figure()
    for run in runs:
        curve = run.get("loss_curve") or []
        fam = run.get("family", "")
        k = seen[fam] = seen.get(fam, -1) + 1
        fig.add_trace(
            go.Scatter(
                x=[p.get("step") for p in curve],
                y=[p.get("loss") for p in curve],
                mode="lines",
                name=esc(f"#{run.get('id')} {run.get('name', '')}"),
                line={"color": family_color(fam), "dash": dashes[k % len(dashes)], "width": 2},
                meta={"kind": "loss", "run_id": run.get("id")},
                hovertemplate=esc(f"#{run.get('id')}") + "<br>step %{x}<br>loss %{y:.4f}<extra></extra>",
            )
        )
    base_layout(fig, height=320)
    losses = [p.get("loss") for run in runs for p in run.get("loss_curve") or []]
    note_missing(fig, sum(not finite(v) for v in losses), len(losses), "steps' losses")
    fig.update_layout(xaxis_title="training step", yaxis_title="cross-entropy loss (nats)")
    return fig
