"""The detail of claim 6 (``science.claims.behaviour``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.claims_text.common import short_detail, with_untestable


def behaviour_detail(claim: Mapping[str, Any]) -> str:
    return with_untestable(_behaviour_detail(claim), claim["numbers"])


def _behaviour_detail(claim: Mapping[str, Any]) -> str:
    n, case = claim["numbers"], claim["why"]["case"]
    if case == "short":
        return short_detail(n)
    if case == "no data":
        return "needs behaviour of trained runs at several eval lengths on parity and s3"
    sub = n["sub_claims"]
    failed = [k for k, v in sub.items() if not v]
    return (
        f"Trained runs at lengths {', '.join(map(str, n['lengths_used']))}: {len(sub) - len(failed)}/{len(sub)} "
        "sub-claims hold" + (": fails " + "; ".join(failed) if failed else ".")
    )
