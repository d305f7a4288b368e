"""Every marker the probe-vs-causal heatmap writes into a cell is explained in its caption
(a new user met 'n.r.' with no explanation)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_cell_marker_is_explained() -> None:
    figure = (ROOT / "dashboard" / "figures" / "probe_causal.py").read_text()
    page = (ROOT / "dashboard" / "pages" / "probe_causal.py").read_text()
    markers = set(re.findall(r's \+= " (n\.[a-z]\.)"', figure))
    assert markers >= {"n.s.", "n.r."}
    assert all(f"'{m}' =" in page for m in markers), markers
