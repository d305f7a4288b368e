"""Shared figure helpers: escaping user text, the export config, empty states, layout."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import plotly.graph_objects as go
import plotly.io as pio

if TYPE_CHECKING:
    from dash import dcc

FONT = "Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
GRID = "#e6e8eb"
AXIS = "#5f6b7a"


def esc(text: Any) -> str:
    """Escape user-typed text for Plotly labels — THE one helper.

    Plotly renders a subset of HTML (``<a href>``, ``<b>``, ``<br>``, ``<span style>`` …) in
    titles, legend entries, axis ticks (category values included), hover labels, cell text
    and annotations; escaping ``<``, ``>`` and ``&`` makes a run named ``<b>x</b>`` or
    ``<a href="…">`` show literally. Every builder passes every string that can hold user or
    stored text (run, pretrained, family, task, method names …) through here, once, where it
    builds the label; markup it adds itself (``<br>``, ``<b>``) stays outside the call.
    """
    return html.escape("" if text is None else str(text), quote=False)


def esc_or(value: Any, missing: str = "–") -> str:
    """``esc(value)``, or ``missing`` for None / NaN (so hover text never reads "None")."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return esc(value)


def note_missing(fig: go.Figure, missing: int, total: int, what: str = "values") -> go.Figure:
    """Record ``meta.missing`` and, when values are missing, say so under the title: the
    cells or points without a value are drawn as gaps (never as 0) and hover as nothing."""
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    meta["missing"] = int(missing)
    fig.update_layout(meta=meta)
    if missing <= 0:
        return fig
    if missing >= total:
        note = f"all {total} {what}: no value (nothing to draw or mark)"
    else:
        note = f"{missing} of {total} {what}: no value (gaps)"
    span = f'<span style="font-size:12px;color:#7b8794">{esc(note)}</span>'
    title = fig.layout.title.text
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 70
    fig.update_layout(
        title={"text": f"{title}<br>{span}" if title else span, "x": 0.0, "xanchor": "left"},
        margin={"t": max(top, 60) + (18 if title else 0)},
    )
    return fig


def graph_config(filename: str = "layerscope-figure", *, scale: int = 2) -> dcc.Graph.Config:
    """dcc.Graph config: PNG download from the modebar camera, no Plotly logo."""
    return {
        "displaylogo": False,
        "responsive": True,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": scale},
        "modeBarButtonsToRemove": ["lasso2d", "select2d", "autoScale2d"],
    }


_AXIS = {
    "showgrid": True,
    "gridcolor": GRID,
    "zeroline": False,
    "linecolor": "#c5cbd3",
    "showline": True,
    "ticks": "outside",
    "tickcolor": "#c5cbd3",
    "automargin": True,
    "title": {"font": {"size": 13, "color": AXIS}},
}
# Axis and font defaults for every subplot, over Plotly's default template (see _registered_template).
TEMPLATE = {
    "layout": {
        "font": {"family": FONT, "size": 13, "color": "#1f2933"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": ["#0072B2", "#D55E00", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#999999"],
        "hoverlabel": {"font": {"family": FONT, "size": 12}},
        "xaxis": _AXIS,
        "yaxis": _AXIS,
    }
}


def _registered_template() -> str:
    """The name of :data:`TEMPLATE` as a figure gets it: merged into Plotly's default template
    (``update_layout(template=TEMPLATE)`` on a new figure), validated once and registered in
    ``plotly.io.templates``. Setting a template by name deep-copies it (~30 ms a figure) where the
    dict was validated again with the whole default template on every figure (~100 ms)."""
    name = "layerscope"
    if name not in pio.templates:
        pio.templates[name] = go.Figure().update_layout(template=TEMPLATE).layout.template
    return name


def base_layout(fig: go.Figure, *, title: str | None = None, height: int | None = None) -> go.Figure:
    # facet titles (make_subplots' annotations at the top edge) sit where the legend goes: lift it
    facets = any(a.yref == "paper" and (a.y or 0) >= 1.0 for a in fig.layout.annotations or ())
    fig.update_layout(
        template=_registered_template(),
        title={"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 16}} if title else None,
        margin={"l": 70, "r": 20, "t": (70 if title else 40) + (30 if facets else 0), "b": 60},
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": (1.02 if not title else 1.04) + (0.08 if facets else 0.0),
            "xanchor": "right",
            "x": 1.0,
            "title": {"text": ""},
        },
        height=height,
    )
    return fig


def empty_figure(message: str = "No data for this selection", *, height: int = 320) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(
        text=esc(message),
        showarrow=False,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        font={"size": 15, "color": "#7b8794"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    base_layout(fig, height=height)
    fig.update_layout(meta={"empty": True})
    return fig


def finite(x: object) -> TypeGuard[float]:
    """Whether ``x`` is a finite number (an int or a float; not None, nan or inf)."""
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _num(x: float, digits: int) -> str:
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # "-0.00" (a value of −1e-9) reads 0.00


def fmt_ci(mean: Any, lo: Any, hi: Any, *, pct: bool = False, digits: int = 2) -> str:
    """``mean [lo, hi]`` at ``digits`` decimals (``pct``: in %, one decimal); no negative zero."""
    if not finite(mean):
        return "–"
    if pct:
        s = f"{_num(100 * mean, 1)}%"
        if finite(lo) and finite(hi):
            s += f" [{_num(100 * lo, 1)}, {_num(100 * hi, 1)}]"
        return s
    s = _num(mean, digits)
    if finite(lo) and finite(hi):
        s += f" [{_num(lo, digits)}, {_num(hi, digits)}]"
    return s


def t_interval(values: Sequence[float], bounds: tuple[float, float] | None = (0.0, 1.0)) -> tuple[float, float, float]:
    """Mean and 95% t-interval (two-sided) — used only where the server gave raw values.

    The same computation as the API's (``science.stats.t_interval``), clipped to ``bounds``
    (default: an accuracy's 0..1); n = 1 gives ``(v, v, v)`` and n = 0 nans, as the figures expect."""
    from science.stats import t_interval as _t  # the one definition (clipping included)

    vals = [float(v) for v in values if finite(v)]
    if not vals:
        return (math.nan, math.nan, math.nan)
    mean, lo, hi = _t(vals, bounds=bounds)
    if mean is None:  # no values: excluded above
        return (math.nan, math.nan, math.nan)
    return (mean, mean if lo is None else lo, mean if hi is None else hi)


def ci_band(
    x: Sequence[float],
    lo: Sequence[float | None],
    hi: Sequence[float | None],
    *,
    color: str,
    name: str,
    legendgroup: str,
    meta: dict,
    xaxis: str | None = None,
    yaxis: str | None = None,
) -> go.Scatter:
    """A filled polygon (upper edge then the lower edge reversed): the 95% CI band (where both
    ``lo`` and ``hi`` are finite)."""
    pts = [(a, b, c) for a, b, c in zip(x, lo, hi, strict=False) if finite(b) and finite(c)]
    xs = [p[0] for p in pts]
    return go.Scatter(
        x=xs + xs[::-1],
        y=[p[2] for p in pts] + [p[1] for p in pts][::-1],
        fill="toself",
        fillcolor=color,
        line={"width": 0},
        mode="lines",
        hoverinfo="skip",
        showlegend=False,
        name=name,
        legendgroup=legendgroup,
        meta=meta,
    )


def unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


class TraceBatch:
    """Collect traces (placed on subplots) and add them in one ``add_traces`` call: much
    faster than one ``add_trace(row=, col=)`` per trace on a big figure."""

    def __init__(self, fig: go.Figure):
        self.fig = fig
        self.traces: list = []
        self._axes: dict[tuple[int, int], tuple[str, str]] = {}

    def add(self, trace, row: int | None = None, col: int | None = None) -> None:
        if row is not None and col is not None:
            key = (row, col)
            if key not in self._axes:
                sub = self.fig.get_subplot(row, col)
                self._axes[key] = (sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", ""))
            trace.xaxis, trace.yaxis = self._axes[key]
        self.traces.append(trace)

    def flush(self) -> go.Figure:
        if self.traces:
            self.fig.add_traces(self.traces)
            self.traces = []
        return self.fig


def untrained_suffix(n_untrained: int, n_total: int) -> str:
    """Legend suffix marking a line or cell that includes untrained runs: `` (untrained: 1 of 3)``;
    empty when none is untrained."""
    return f" (untrained: {n_untrained} of {n_total})" if n_untrained else ""


CLASS_ORDER = ("early", "gradual", "late", "flat")  # science.profiles.CLASSES, in depth order


def seeds_disagree(profile_class: Any, votes: Any) -> bool:
    """True when fewer than half the seeds (per-seed classes ``votes``) have the cell's class
    (the class of the seed-mean curve, docs/SCIENCE.md#claims): the cell's class then disagrees
    with most of its seeds."""
    if not isinstance(votes, dict) or not votes or profile_class is None:
        return False
    total = sum(int(v) for v in votes.values() if isinstance(v, (int, float)))
    return total > 0 and 2 * int(votes.get(profile_class) or 0) < total


def class_with_split(profile_class: Any, votes: Any) -> str:
    """``early (seeds: 1 early, 2 gradual) — most seeds differ``: a cell's class (of its seed-mean
    curve) with the per-seed split, flagged when most seeds have another class. Plain text."""
    cls = "–" if profile_class is None else str(profile_class)
    if not isinstance(votes, dict) or not votes:
        return cls
    order = [c for c in CLASS_ORDER if c in votes] + sorted(str(c) for c in votes if c not in CLASS_ORDER)
    split = ", ".join(f"{votes[c]} {c}" for c in order if votes.get(c))
    return f"{cls} (seeds: {split})" + (" — most seeds differ" if seeds_disagree(profile_class, votes) else "")
