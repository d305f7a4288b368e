"""What /patching's figures show: the site, length, runs and pairs behind
the recovery heatmaps, and a notice when the runs side by side were patched with different
settings."""

from __future__ import annotations

from typing import Any

from dashboard.figures.captions import MEASUREMENT_VERSION_SETTING, mixed_settings
from dashboard.figures.common import finite
from dashboard.figures.patching import SITE_LABELS

# counts and the measurement version: a patch job's config_hash includes its run id, so it differs
# between runs patched alike
PATCH_SETTINGS = (("n_pairs", "clean/corrupted pairs"), MEASUREMENT_VERSION_SETTING)


def patching_caption(grids: list[dict[str, Any]], state: dict[str, Any]) -> tuple[str, str | None]:
    """(caption, mixed-settings notice or None) for the grids ``{title, run_id, rows}`` shown."""
    rows = [r for g in grids for r in g.get("rows") or []]
    pairs = sorted({int(r["n_pairs"]) for r in rows if finite(r.get("n_pairs"))})
    site = state.get("site")
    bits = [
        f"{len([g for g in grids if g.get('rows')])} run(s)",
        f"site {SITE_LABELS.get(site, site) if isinstance(site, str) else site}",
        f"L={state.get('length')}",
        ("pairs per cell " + "/".join(map(str, pairs))) if pairs else "pairs not stored",
        "recovery = (LD patched − LD corrupted) / (LD clean − LD corrupted), ratio of means over the usable pairs",
    ]
    return " · ".join(bits), mixed_settings(rows, PATCH_SETTINGS)
