"""The detail of claim 3 (``science.claims.claim3``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.claims_text.common import not_learned_text, short_detail, untestable_note


def claim3_detail(claim: Mapping[str, Any]) -> str:
    n, case = claim["numbers"], claim["why"]["case"]
    if case == "no data":
        return "needs every family with runs on s3, parity and dyck; none stored"
    if case == "untestable":
        return "no family can be tested. Untestable here: " + "; ".join(map(not_learned_text, n["untestable"])) + "."
    if case == "short":
        return short_detail(n)
    fams = n["families"]
    gain = " (learned gain over the random-init control)" if n["floor"] == "random-init control" else ""
    return (
        f"S3's normalised layer curve{gain} is closer to Parity's than to Dyck's in "
        f"{sum(r['closer_to_parity'] for r in fams)}/{len(fams)} families "
        f"(need ≥ {n['match_fraction_required']:.0%}); same class as Parity in {n['same_class_as_parity']}."
        + untestable_note(n)
    )
