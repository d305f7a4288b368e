"""The detail of claim 5 (``science.claims.conv1d``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.claims_text.common import short_detail, with_untestable


def _task_part(task: str, c: Mapping[str, Any]) -> str:
    iv = f" [{c['lo']:.2f}, {c['hi']:.2f}]" if c["lo"] is not None else ""
    return f"{task}: {c['mean']:.2f}{iv} of the gain over chance lost (n={c['n']})"


def conv1d_detail(claim: Mapping[str, Any]) -> str:
    return with_untestable(_conv1d_detail(claim), claim["numbers"])


def _conv1d_detail(claim: Mapping[str, Any]) -> str:
    n, case = claim["numbers"], claim["why"]["case"]
    if case == "no data":
        return "needs conv1d_removal (every layer) results for mamba/mamba2 on at least two of s3, parity, dyck"
    if case == "short":
        return short_detail(n)
    if case == "no condition":
        return "no condition could be evaluated"
    failed = [k for k, v in n["conditions"].items() if v is not None and not v]
    detail = "; ".join(_task_part(t, row["drop_rel_chance"]) for t, row in n["tasks"].items()) + ". "
    return detail + ("All conditions hold." if not failed else "Fails: " + ", ".join(failed) + ".")
