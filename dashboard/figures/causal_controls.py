"""The causal side of /probe-vs-causal read against its controls: the drop beyond
rank-matched random removal (docs/SCIENCE.md#random-removal), an edit's rank as a share of the
width with an INLP that removes more than half of it flagged "not selective"
(docs/SCIENCE.md#interventions), and ties among the most damaging layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dashboard.figures.common import finite
from dashboard.theme import method_label
from science.profiles import NEAR_BEST_TOL

# {method: {trait: bool}}: GET /api/meta's method_traits (science.methods.traits_meta)
MethodTraits = Mapping[str, Mapping[str, bool]]

NOT_SELECTIVE_SHARE = 0.5  # an INLP removing more than this share of the width is mean ablation, not a concept
# the causal side's tie: drops within this many pp of the most damaging one (the probe side's
# near-best tolerance, NEAR_BEST_TOL, in pp)
NEAR_WORST_TOL_PP = 100 * NEAR_BEST_TOL


def rank_share(row: Mapping[str, Any], d_model: int | None) -> float | None:
    """``rank_removed / d_model`` (0..1), None when either is unknown."""
    r = row.get("rank_removed")
    if not finite(r) or not d_model or int(d_model) <= 0:
        return None
    return min(1.0, max(0.0, float(r) / int(d_model)))


def not_selective(row: Mapping[str, Any], d_model: int | None, method_traits: MethodTraits) -> bool:
    """A row of a method whose rank is chosen by its fit (INLP) that removed more than half the
    width (``NOT_SELECTIVE_SHARE``). ``method_traits``: ``GET /api/meta``'s ``method_traits``."""
    share = rank_share(row, d_model)
    chosen = method_traits.get(str(row.get("method")), {}).get("rank_chosen_by_fit", False)
    return bool(chosen) and share is not None and share > NOT_SELECTIVE_SHARE


def random_text(row: Mapping[str, Any]) -> str:
    """Hover text of a drop read beyond random removal: the raw Δ and the random removal's mean
    and range over its draws; empty when the row has no random control (mean ablation, Conv1D
    removal, results stored before it was measured)."""
    if not finite(row.get("random_delta_pp")):
        return ""
    lo, hi = row.get("random_delta_lo"), row.get("random_delta_hi")
    rng = f" [{lo:+.1f}, {hi:+.1f}]" if finite(lo) and finite(hi) else ""
    draws = row.get("random_draws")
    k = row.get("rank_removed")
    what = f"{int(k)} random directions" if finite(k) else "as many random directions"
    return (
        f"raw Δ {row['delta_raw_pp']:+.1f} pp · removing {what}: {row['random_delta_pp']:+.1f} pp{rng}"
        + (f" over {int(draws)} draws" if finite(draws) else "")
    ).replace("-", "−")


def rank_text(row: Mapping[str, Any], d_model: int | None) -> str:
    """``rank 128 of 128 (100% of the width) · not selective`` for rows that store a rank."""
    share = rank_share(row, d_model)
    if share is None or d_model is None:  # rank_share is None without d_model
        return ""
    text = f"rank {int(row['rank_removed'])} of {int(d_model)} ({100 * share:.0f}% of the width)"
    if row.get("not_selective"):  # the heatmap table's flag (probe_causal_table)
        text += (
            f" · not selective: {method_label(str(row['measure']).removeprefix('drop:'))} removed more than "
            f"{100 * NOT_SELECTIVE_SHARE:.0f}% of the width "
            "(mean ablation, not a concept removal)"
        )
    return text


def tied_worst(values: Mapping[int, float], worst: int | None) -> list[int]:
    """The layers whose drop is within ``NEAR_WORST_TOL_PP`` of the most damaging layer's
    (``worst``): more than one = a tie (mean ablation −50.65 pp at layers 1–3 is three ▼)."""
    if worst is None or worst not in values:
        return []
    top = values[worst]
    return sorted(ly for ly, v in values.items() if finite(v) and v <= top + NEAR_WORST_TOL_PP + 1e-9)
