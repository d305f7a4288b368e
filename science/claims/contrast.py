"""Claims 1 and 2: the Transformer's profile class against the other families' (docs/SCIENCE.md#claims)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from science import profiles as P
from science.claims.common import (
    CONTRADICTED,
    EVAL_LENGTH,
    FAMILIES,
    MATCH_FRACTION,
    MIN_SEEDS,
    NON_TRANSFORMER,
    NOT_ENOUGH,
    PREFIX_TASKS,
    STACK_TASK,
    SUPPORTED,
    TRANSFORMER,
    Data,
    _claim,
    _curve_cells,
    _finish,
    _perm_greater,
    _summary,
    expected_cells,
)
from science.stats import ALPHA, holm

# ----------------------------------------------------------------------------- claims 1 and 2

CONTRAST = {
    1: {
        "tasks": PREFIX_TASKS,
        "expected": {TRANSFORMER: "gradual", **dict.fromkeys(NON_TRANSFORMER, "late")},
        "metric": "late_concentration",
        "transformer_higher": False,
    },
    2: {
        "tasks": (STACK_TASK,),
        "expected": {TRANSFORMER: "early", **dict.fromkeys(NON_TRANSFORMER, "gradual")},
        "metric": "auc",
        "transformer_higher": True,
    },
}


def _cell_row(task: str, fam: str, s: Mapping[str, Any], expected: str) -> dict[str, Any]:
    m = s["metrics"]
    return {
        "task": task,
        "family": fam,
        "n": s["n"],
        "seeds": s["seeds"],
        "profile_class": s["profile_class"],
        "class_votes": s["class_votes"],
        "expected": expected,
        "matches": s["profile_class"] == expected,
        "floor": s.get("floor", "majority"),
        "majority_class": s.get("majority_class", s["profile_class"]),
        "stability": {k: (s.get("stability") or {}).get(k) for k in ("agree", "of", "stable")},
        **{
            k: {kk: m[k][kk] for kk in ("mean", "lo", "hi", "n")}
            for k in ("late_concentration", "first_95", "auc", "gain_over_majority", "gain_over_emb")
        },
    }


def claims_1_2(data: Data) -> list[dict[str, Any]]:
    """Claims 1 and 2 together: their statistic tests share one Holm adjustment."""
    prepared: dict[int, dict[str, Any]] = {}
    tests: list[tuple[int, str, dict[str, Any] | None]] = []
    for cid, spec in CONTRAST.items():
        # a cell not learned within its budget (every seed at a plateau) leaves the claim, named; a
        # task whose transformer cell is not learned has no contrast to test (docs/SCIENCE.md#plateau)
        untestable = [data.not_learned[c] for c in expected_cells(spec["tasks"], FAMILIES) if c in data.not_learned]
        tasks = tuple(t for t in spec["tasks"] if (t, TRANSFORMER) not in data.not_learned)
        cells = {c: rs for c, rs in _curve_cells(data, tasks).items() if c not in data.not_learned and c[1] in FAMILIES}
        stored = [(t, f) for t in tasks for f in FAMILIES if data.stored.get((t, f)) and (t, f) not in data.not_learned]
        usable_tasks = [t for t in tasks if any(c[0] == t for c in stored)]
        # every expected cell of every task the claim is about, stored or not
        expected = [c for c in expected_cells(tasks, FAMILIES) if c not in data.not_learned]
        short = data.shortfalls(expected, cells) if usable_tasks else []
        info: dict[str, Any] = {"cells": cells, "usable_tasks": usable_tasks, "short": short, "untestable": untestable}
        prepared[cid] = info
        if not usable_tasks or short:
            continue
        info["summaries"] = {c: _summary(data, rs) for c, rs in cells.items() if c[0] in usable_tasks}
        for t in usable_tasks:
            tf, other = [], []
            for (task, fam), s in info["summaries"].items():
                if task == t:
                    (tf if fam == TRANSFORMER else other).extend(p[spec["metric"]] for p in s["per_seed"])
            test = _perm_greater(tf, other) if spec["transformer_higher"] else _perm_greater(other, tf)
            if test is not None:  # descriptive: how strongly the seeds point the other way (unadjusted)
                opposite = _perm_greater(other, tf) if spec["transformer_higher"] else _perm_greater(tf, other)
                test["p_opposite"] = opposite["p"] if opposite else None
            tests.append((cid, t, test))
    adjusted = holm([t[2]["p"] if t[2] else None for t in tests])
    for (cid, task, test), p in zip(tests, adjusted):
        if test is not None:
            test["p_holm"] = p
        prepared[cid].setdefault("tests", {})[task] = test
    n_tests = sum(t[2] is not None for t in tests)
    return [_contrast_claim(cid, CONTRAST[cid], prepared[cid], data, n_tests) for cid in CONTRAST]


def _contrast_task_verdict(class_ok: bool, stat_ok: bool) -> str:
    """One task of claim 1 or 2: both conditions → supported, neither → contradicted; one without
    the other is mixed evidence (a class pattern the seeds do not separate, or a separated
    statistic without the claimed classes) → not enough data."""
    if class_ok and stat_ok:
        return SUPPORTED
    return CONTRADICTED if not (class_ok or stat_ok) else NOT_ENOUGH


def _class_condition_ruled_out(spec: Mapping[str, Any], info: Mapping[str, Any], data: Data) -> list[str]:
    """For a contrast claim still short of seeds: the tasks on which the cells that already have
    their seeds make the class condition fail whatever the others show (the Transformer cell not
    in its class, or too many other cells not in theirs for ``MATCH_FRACTION`` to be reachable)."""
    expected = spec["expected"]
    n_others = sum(f != TRANSFORMER for f in FAMILIES)
    out = []
    for t in spec["tasks"]:
        # a cell is settled only when each of its stored runs is trained with a curve: one more seed
        # could still move the seed-mean class
        done = {
            f: _summary(data, rs)["profile_class"]
            for (task, f), rs in info["cells"].items()
            if task == t
            and f in FAMILIES
            and (task, f) not in data.duplicated
            and len({r.get("seed") for r in rs}) >= MIN_SEEDS
            and len(rs) == len(data.stored.get((task, f), []))
        }
        if TRANSFORMER in done and done[TRANSFORMER] != expected[TRANSFORMER]:
            out.append(f"on {t} the transformer is {done[TRANSFORMER]}, not {expected[TRANSFORMER]}")
            continue
        wrong = sorted(f for f, c in done.items() if f != TRANSFORMER and c != expected[f])
        if n_others - len(wrong) < MATCH_FRACTION * n_others:
            out.append(
                f"on {t} {', '.join(f'{f} is {done[f]}' for f in wrong)} where {expected[wrong[0]]} is "
                f"expected: at most {n_others - len(wrong)} of {n_others} other families can match "
                f"(≥ {MATCH_FRACTION:.0%} needed)"
            )
    return out


def _contrast_claim(
    cid: int, spec: Mapping[str, Any], info: Mapping[str, Any], data: Data, n_tests: int
) -> dict[str, Any]:
    tasks, expected, metric = spec["tasks"], spec["expected"], spec["metric"]
    if cid == 1:
        views = [f"/reversal?task={t}" for t in tasks] + [f"/curves?task={t}&eval_length={EVAL_LENGTH}" for t in tasks]
    else:
        views = [f"/reversal?task={STACK_TASK}", f"/curves?task={STACK_TASK}&eval_length={EVAL_LENGTH}"]
    numbers: dict[str, Any] = {
        "match_fraction_required": MATCH_FRACTION,
        "alpha": ALPHA,
        "test_statistic": metric,  # of the contrast test, not the cell table
        "floor": "random-init control" if data.use_controls else "majority rate",
    }
    if info.get("untestable"):
        numbers["untestable"] = info["untestable"]
    untestable_note = (" Untestable here: " + "; ".join(info["untestable"]) + ".") if info.get("untestable") else ""
    left = data.left_out_for(tasks)
    if not info["usable_tasks"]:
        return _finish(
            _claim(
                cid,
                NOT_ENOUGH,
                {**numbers, "cells": []},
                (
                    f"needs trained runs with probe curves at L={EVAL_LENGTH} for every family on "
                    f"{' and '.join(tasks)}; none stored"
                    if not untestable_note
                    else "no task of this claim can be tested." + untestable_note
                ),
                views,
            ),
            left,
        )
    if info["short"]:
        numbers["cells_short_of_seeds"] = info["short"]
        ruled_out = _class_condition_ruled_out(spec, info, data)
        if ruled_out:
            numbers["cannot_be_supported"] = ruled_out
        return _finish(
            _claim(
                cid,
                NOT_ENOUGH,
                {**numbers, "cells": []},
                f"needs ≥ {MIN_SEEDS} trained seeds in every cell: "
                + "; ".join(info["short"])
                + (
                    ". Whatever the missing cells show, it cannot be supported: " + "; ".join(ruled_out)
                    if ruled_out
                    else ""
                ),
                views,
            ),
            left,
        )
    rows = [_cell_row(t, f, s, expected[f]) for (t, f), s in sorted(info["summaries"].items())]
    numbers["cells"] = rows
    fragile = [r for r in rows if r["stability"]["stable"] is False]
    numbers["fragile"] = bool(fragile)
    numbers["fragile_cells"] = [
        f"{r['family']} × {r['task']}: {r['profile_class']} under {r['stability']['agree']} "
        f"of {r['stability']['of']} threshold settings"
        for r in fragile
    ]
    numbers["class_condition_agreement"] = _class_condition_agreement(spec, info)
    without_controls = [c for c in rows if c["floor"] != "control"]
    if data.use_controls and without_controls:
        numbers["cells_without_controls"] = [f"{r['family']} × {r['task']}" for r in without_controls]
    key = (
        "test_auc_transformer_gt_other"
        if spec["transformer_higher"]
        else "test_late_concentration_other_gt_transformer"
    )
    numbers[key] = info.get("tests", {})
    numbers["holm_family_size"] = n_tests
    per_task: dict[str, dict[str, Any]] = {}
    parts, undefined = [], []
    for t in info["usable_tasks"]:
        tf = next((r for r in rows if r["task"] == t and r["family"] == TRANSFORMER), None)
        others = [r for r in rows if r["task"] == t and r["family"] != TRANSFORMER]
        share = sum(r["matches"] for r in others) / len(others) if others else 0.0
        class_ok = bool(tf and tf["matches"] and share >= MATCH_FRACTION)
        test = info.get("tests", {}).get(t)
        if test is None:
            undefined.append(t)
            continue
        stat_ok = test["p_holm"] < ALPHA
        per_task[t] = {
            "class_condition": class_ok,
            "statistic_condition": stat_ok,
            "verdict": _contrast_task_verdict(class_ok, stat_ok),
        }
        parts.append(
            f"{t}: transformer {tf['profile_class'] if tf else '—'} (expected {expected[TRANSFORMER]}), "
            f"{sum(r['matches'] for r in others)}/{len(others)} others as expected; per-seed {metric} "
            f"difference {test['diff']:+.3f}, Holm p = {test['p_holm']:.3g}"
            + (
                f" (opposite direction: p = {test['p_opposite']:.3g}, unadjusted)"
                if test.get("p_opposite") is not None
                else ""
            )
            + f" → {per_task[t]['verdict']}"
            + (
                ""
                if class_ok == stat_ok
                else f" (mixed: the {'class' if class_ok else 'statistic'} condition holds, the "
                f"{'statistic' if class_ok else 'class'} condition does not)"
            )
        )
    if undefined:
        return _finish(
            _claim(
                cid,
                NOT_ENOUGH,
                numbers,
                f"per-seed {metric} undefined (curves without gain) on {', '.join(undefined)}",
                views,
            ),
            left,
        )
    numbers["per_task"] = per_task
    task_verdicts = [v["verdict"] for v in per_task.values()]
    verdict = (
        SUPPORTED
        if all(v == SUPPORTED for v in task_verdicts)
        else CONTRADICTED
        if CONTRADICTED in task_verdicts
        else NOT_ENOUGH
    )
    detail = (
        f"Supported when, on every task, the transformer's class differs as claimed (others ≥ "
        f"{MATCH_FRACTION:.0%} as expected) and the per-seed {metric} differs in that direction at p < {ALPHA} "
        f"after Holm over {n_tests} test(s); contradicted when both fail on a task; mixed evidence is not "
        "enough data. " + "; ".join(parts) + "."
    )
    mism = [
        f"{r['family']} on {r['task']}: {r['profile_class']} (expected {r['expected']})"
        for r in rows
        if not r["matches"]
    ]
    if mism:
        detail += " Mismatches: " + "; ".join(mism) + "."
    if fragile:
        detail += " Fragile: " + "; ".join(numbers["fragile_cells"]) + "."
    detail += untestable_note
    return _finish(_claim(cid, verdict, numbers, detail, views), left)


def _class_condition_agreement(spec: Mapping[str, Any], info: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per task: under how many of the rules within the stability margins
    (``science.profiles.rules_within_margin``) the class condition comes out as it does under the
    default rule (``{agree, of}``)."""
    expected = spec["expected"]
    out = {}
    for t in info["usable_tasks"]:
        cells = {f: s for (task, f), s in info["summaries"].items() if task == t}
        if TRANSFORMER not in cells:
            continue

        def holds(rule: P.ClassRule) -> bool:
            classes = {f: s["classify"](rule) for f, s in cells.items()}  # noqa: B023 - evaluated here
            others = [f for f in classes if f != TRANSFORMER]
            share = sum(classes[f] == expected[f] for f in others) / len(others) if others else 0.0
            return classes[TRANSFORMER] == expected[TRANSFORMER] and share >= MATCH_FRACTION

        default = holds(P.DEFAULT_RULE)
        rules = P.rules_within_margin()
        out[t] = {"agree": sum(holds(r) == default for r in rules), "of": len(rules)}
    return out
