"""Claim 3: does S3's layer profile group with Parity's or with Dyck's (docs/SCIENCE.md#claims)?"""

from __future__ import annotations

from typing import Any

from science import profiles as P
from science.claims.common import (
    CONTRADICTED,
    FAMILIES,
    MATCH_FRACTION,
    NOT_ENOUGH,
    STACK_TASK,
    SUPPORTED,
    Data,
    _ci,
    _claim,
    _curve_cells,
    _finish,
    _summary,
    expected_cells,
)

# ----------------------------------------------------------------------------- claim 3


def claim_3(data: Data) -> dict[str, Any]:
    """``why.case``: ``no data`` (no run on these tasks), ``untestable`` (every family has a cell
    not learned: ``numbers.untestable``), ``short`` (``numbers.cells_short_of_seeds``) or
    ``evaluated`` (``numbers.families``: the distances per family)."""
    tasks = ("s3", "parity", STACK_TASK)
    # a family with a cell not learned within its budget cannot place S3: it leaves the claim, named
    gone = {f for (t, f) in data.not_learned if t in tasks}
    untestable = [data.not_learned[c] for c in expected_cells(tasks, FAMILIES) if c in data.not_learned]
    cells = _curve_cells(data, tasks)
    fams = [f for f in FAMILIES if f not in gone and all(data.stored.get((t, f)) for t in tasks)]
    any_stored = any(data.stored.get(c) for c in expected_cells(tasks, FAMILIES))
    numbers: dict[str, Any] = {
        "families": [],
        "match_fraction_required": MATCH_FRACTION,
        "floor": "random-init control" if data.use_controls else "majority rate",
    }
    if untestable:
        numbers["untestable"] = untestable
    left = data.left_out_for(tasks)
    if not any_stored:
        return _finish(_claim(3, NOT_ENOUGH, numbers, {"case": "no data"}), left)
    if not fams and untestable:
        return _finish(_claim(3, NOT_ENOUGH, numbers, {"case": "untestable"}), left)
    short = data.shortfalls(expected_cells(tasks, [f for f in FAMILIES if f not in gone]), cells)
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(3, NOT_ENOUGH, numbers, {"case": "short"}), left)
    per_family = []
    for f in fams:
        s3, par, dy = (_summary(data, cells[(t, f)]) for t in tasks)
        d_sp = P.profile_distance(s3["curve"], par["curve"], s3["baseline"], par["baseline"])
        d_sd = P.profile_distance(s3["curve"], dy["curve"], s3["baseline"], dy["baseline"])
        per_family.append(
            {
                "family": f,
                "d_s3_parity": d_sp,
                "d_s3_dyck": d_sd,
                "closer_to_parity": d_sp < d_sd,
                "class_s3": s3["profile_class"],
                "class_parity": par["profile_class"],
                "class_dyck": dy["profile_class"],
                "class_votes_s3": s3["class_votes"],
                "class_votes_parity": par["class_votes"],
                "class_votes_dyck": dy["class_votes"],
            }
        )
    numbers["families"] = per_family
    share = sum(r["closer_to_parity"] for r in per_family) / len(per_family)
    numbers["share_closer_to_parity"] = share
    numbers["gap_dyck_minus_parity"] = _ci([r["d_s3_dyck"] - r["d_s3_parity"] for r in per_family])
    numbers["same_class_as_parity"] = sum(r["class_s3"] == r["class_parity"] for r in per_family)
    verdict = SUPPORTED if share >= MATCH_FRACTION else CONTRADICTED
    return _finish(_claim(3, verdict, numbers, {"case": "evaluated"}), left)
