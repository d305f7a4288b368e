"""The detail of claims 1 and 2 (``science.claims.contrast``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.claims_text.common import fragile_text, ruled_out_text, short_detail, untestable_note
from science.claims.common import EVAL_LENGTH, TRANSFORMER


def _task_part(numbers: Mapping[str, Any], why: Mapping[str, Any], task: str) -> str:
    rows = numbers["cells"]
    tf = next((r for r in rows if r["task"] == task and r["family"] == TRANSFORMER), None)
    others = [r for r in rows if r["task"] == task and r["family"] != TRANSFORMER]
    test = numbers[why["test"]][task]
    pt = numbers["per_task"][task]
    class_ok, stat_ok = pt["class_condition"], pt["statistic_condition"]
    return (
        f"{task}: transformer {tf['profile_class'] if tf else '—'} (expected {why['expected_transformer']}), "
        f"{sum(r['matches'] for r in others)}/{len(others)} others as expected; per-seed "
        f"{numbers['test_statistic']} difference {test['diff']:+.3f}, Holm p = {test['p_holm']:.3g}"
        + (
            f" (opposite direction: p = {test['p_opposite']:.3g}, unadjusted)"
            if test.get("p_opposite") is not None
            else ""
        )
        + f" → {pt['verdict']}"
        + (
            ""
            if class_ok == stat_ok
            else f" (mixed: the {'class' if class_ok else 'statistic'} condition holds, the "
            f"{'statistic' if class_ok else 'class'} condition does not)"
        )
    )


def contrast_detail(claim: Mapping[str, Any]) -> str:
    n, why = claim["numbers"], claim["why"]
    case = why["case"]
    if case == "no data":
        note = untestable_note(n)
        if note:
            return "no task of this claim can be tested." + note
        return (
            f"needs trained runs with probe curves at L={EVAL_LENGTH} for every family on "
            f"{' and '.join(why['tasks'])}; none stored"
        )
    if case == "short":
        ruled = [ruled_out_text(r) for r in n.get("cannot_be_supported") or []]
        return short_detail(n) + (
            ". Whatever the missing cells show, it cannot be supported: " + "; ".join(ruled) if ruled else ""
        )
    if case == "undefined":
        return f"per-seed {n['test_statistic']} undefined (curves without gain) on {', '.join(why['tasks'])}"
    detail = (
        f"Supported when, on every task, the transformer's class differs as claimed (others ≥ "
        f"{n['match_fraction_required']:.0%} as expected) and the per-seed {n['test_statistic']} differs in that "
        f"direction at p < {n['alpha']} after Holm over {n['holm_family_size']} test(s); contradicted when both "
        "fail on a task; mixed evidence is not enough data. "
        + "; ".join(_task_part(n, why, t) for t in why["tasks"])
        + "."
    )
    mism = [
        f"{r['family']} on {r['task']}: {r['profile_class']} (expected {r['expected']})"
        for r in n["cells"]
        if not r["matches"]
    ]
    if mism:
        detail += " Mismatches: " + "; ".join(mism) + "."
    if n.get("fragile"):
        detail += " Fragile: " + "; ".join(map(fragile_text, n["fragile_cells"])) + "."
    return detail + untestable_note(n)
