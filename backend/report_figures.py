"""docs/RESULTS.md's figures (``backend.report``): the dashboard's own figure builders on the
bundle's data, exported to PNG with plotly + kaleido (which drives the installed Chromium,
offline). Without kaleido or a browser nothing is written and the reason is returned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["KALEIDO_MISSING", "CHROME_MISSING", "report_figures", "write_pngs", "export_pngs"]


def report_figures(session, suite: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The product's own figures for the report (plotly Figures by file name)."""
    from backend.api.across_seeds import curves, profiles
    from backend.api.queries import RunFilter
    from dashboard.figures.behaviour import behaviour_rows, length_generalisation
    from dashboard.figures.curves import layerwise_curves
    from dashboard.figures.reversal import reversal_matrix

    flt = RunFilter(suite=[suite])
    return {
        "layer_curves_L40.png": layerwise_curves(
            curves(session, flt, [40]), x="depth", title="Probe accuracy by depth at L = 40 (mean over seeds, 95% CI)"
        ),
        "reversal_late_concentration.png": reversal_matrix(profiles(session, flt, [40])),
        "behaviour_by_length.png": length_generalisation(behaviour_rows(runs)),
    }


KALEIDO_MISSING = "kaleido is not installed (pip install -e '.[report]')"
CHROME_MISSING = (
    "kaleido found no Chrome or Chromium to render PNGs (install chromium, as `make test` does, "
    "or run plotly_get_chrome)"
)


PNG_WIDTH, PNG_HEIGHT = 1100, 520  # px, before the 2× scale; a figure that asks for more height gets it
TITLE_PX, FACET_TITLE_PX = 44, 36  # the figure title's band and the facet titles' above the plots
LEGEND_ENTRY_PX = 175  # a horizontal legend entry's width at the report's font, measured on the PNGs
LEGEND_ROW_PX = 24


def png_height(fig: Any) -> int:
    """The PNG's height in layout px: ``PNG_HEIGHT``, or the figure's own height when it asks for
    more (the reversal matrix sizes itself to its rows × text lines; squeezed into 520 px its
    seven rows' lines were drawn over each other in the paper-steps report)."""
    return max(PNG_HEIGHT, int(fig.layout.height or 0))


def room_for_legend(fig: Any) -> Any:
    """A copy of ``fig`` whose horizontal legend, when it wraps to several rows at the report's
    fixed width (the paper-steps study's eight families), sits in its own band under the title: the
    legend pushed its rows up over the title. Below a title of ``TITLE_PX``, ``LEGEND_ROW_PX`` per
    row, then the facet titles; a legend of one row is left where it is."""
    import math

    import plotly.graph_objects as go

    out = go.Figure(fig)
    entries = {t.name for t in out.data if t.name and t.showlegend is not False}
    rows = math.ceil(len(entries) * LEGEND_ENTRY_PX / PNG_WIDTH) if entries else 1
    if rows > 1 and out.layout.legend.orientation == "h":
        band, height = rows * LEGEND_ROW_PX, png_height(out)
        out.update_layout(
            title={"yref": "container", "y": 1 - 8 / height, "yanchor": "top"},
            legend={"yref": "container", "y": 1 - TITLE_PX / height, "yanchor": "top"},
            margin={"t": TITLE_PX + band + FACET_TITLE_PX},
        )
    return out


def write_pngs(figs: dict[str, Any], folder: Path) -> str | None:
    """Write each figure as PNG (plotly + kaleido, 2× scale). Returns None, or why not (also when
    some files were not written)."""
    return export_pngs(figs, folder)[0]


def export_pngs(figs: dict[str, Any], folder: Path) -> tuple[str | None, set[str]]:
    """:func:`write_pngs`, and the names of the PNGs written (none when the export failed)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        log.warning("figures not exported: %s", KALEIDO_MISSING)
        return KALEIDO_MISSING, set()
    try:
        import plotly.io as pio

        folder.mkdir(parents=True, exist_ok=True)
        names = list(figs)
        pio.write_images(
            [room_for_legend(figs[n]) for n in names],
            [folder / n for n in names],
            width=PNG_WIDTH,
            height=[png_height(figs[n]) for n in names],
            scale=2,
        )
    except Exception as exc:  # noqa: BLE001 - no kaleido or no browser: the report goes on without PNGs
        log.warning("figures not exported: %s", exc)
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        if "kaleido" in first.lower() and "requires" in first.lower():
            return (CHROME_MISSING if "chrome" in first.lower() else KALEIDO_MISSING), set()
        return (f"{type(exc).__name__}: {first}" if first else type(exc).__name__), set()
    written = {n for n in figs if (folder / n).is_file()}
    missing = [n for n in figs if n not in written]
    if missing:
        return f"{len(missing)} of {len(figs)} PNG(s) not written ({', '.join(missing)})", written
    return None, written
