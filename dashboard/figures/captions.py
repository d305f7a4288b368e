"""What a figure shows, in the figure itself: a caption line under the plot
naming the suite and settings behind it, and a notice when one view combines results measured
with different settings. Kept in the figure (not only in the page) so a PNG, an SVG or an
embed (``?embed=1``) carries it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import esc

# the measurement code's version a result row was made with (science.measurement_version): rows of
# two versions agree within stated tolerances, not bit for bit, so a view mixing them says so
MEASUREMENT_VERSION_SETTING = ("measurement_version", "measurement versions")

CAPTION_COLOR = "#52606d"
NOTICE_COLOR = "#9a3412"


def add_caption(fig: go.Figure, text: str | None, *, notice: str | None = None) -> go.Figure:
    """Write ``text`` (plain text, escaped here) under the plot, and ``notice`` (a warning, e.g.
    mixed settings) on a line of its own; records both in ``layout.meta`` (``caption``,
    ``settings_notice``). The bottom margin grows so the x-axis title stays clear."""
    lines = [(t, c) for t, c in ((notice and f"⚠ {notice}", NOTICE_COLOR), (text, CAPTION_COLOR)) if t]
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    if meta.get("empty"):  # a message figure: nothing drawn, nothing to caption
        return fig
    meta.update({"caption": text or None, "settings_notice": notice or None})
    fig.update_layout(meta=meta)
    if not lines:
        return fig
    bottom = fig.layout.margin.b if fig.layout.margin.b is not None else 60
    shift = bottom - 6
    for text_, color in lines:  # one annotation per line group: its own colour, no inline styles
        fig.add_annotation(
            text=esc(text_).replace("\n", "<br>"),
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            xanchor="left",
            yanchor="top",
            yshift=-shift,
            showarrow=False,
            align="left",
            font={"size": 11, "color": color},
            name="caption",
        )
        shift += 16 * (1 + text_.count("\n"))
    fig.update_layout(margin={"b": shift + 14})
    return fig


def _values(rows: Iterable[dict[str, Any]], key: str) -> list[Any]:
    vals = {r.get(key) for r in rows if r.get(key) is not None}
    # numbers in numeric order (64 before 500), anything else as text
    return sorted(vals, key=lambda v: (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v)))


def mixed_settings(rows: Sequence[dict[str, Any]], keys: Sequence[tuple[str, str]]) -> str | None:
    """A notice naming every setting that differs between ``rows`` (stored result rows: probes,
    interventions), e.g. ``n_sequences`` 64 and 500; ``keys`` are ``(column, what it is)``. None
    when each setting has one value (or none stored). ``config_hash`` (the hash of the request
    that measured a row) is named as "N different measurement requests"; compare it within one
    run only: a follow-up job's hash includes its run id, so it differs between runs measured alike.
    ``measurement_version`` (:data:`MEASUREMENT_VERSION_SETTING`) is named with what two versions
    promise: agreement within the stated tolerances."""
    parts = []
    for key, what in keys:
        vals = _values(rows, key)
        if len(vals) > 1:
            if key == "config_hash":
                parts.append(f"{len(vals)} different measurement requests (config_hash)")
            elif key == MEASUREMENT_VERSION_SETTING[0]:
                parts.append(
                    f"{what} {', '.join(str(v) for v in vals)} (their numbers agree within the tolerances of "
                    "docs/SCIENCE.md#measurement-versions, not bit for bit)"
                )
            else:
                shown = ", ".join(str(v) for v in vals[:5]) + (" …" if len(vals) > 5 else "")
                parts.append(f"{what} {shown}")
    if not parts:
        return None
    return "This view combines results measured with different settings: " + "; ".join(parts) + "."
