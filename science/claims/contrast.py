"""Claims 1 and 2: the Transformer's profile class against the other families' (docs/SCIENCE.md#claims)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from science import profiles as P
from science.claims.common import (
    CONTRADICTED,
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


class Contrast(TypedDict):
    """A contrast claim: its tasks, each family's expected profile class, the per-seed metric its
    permutation test compares, and whether the Transformer's is the higher one."""

    tasks: tuple[str, ...]
    expected: dict[str, str]
    metric: str
    transformer_higher: bool


CONTRAST: dict[int, Contrast] = {
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
            tf: list[float] = []
            other: list[float] = []
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


def _class_condition_ruled_out(spec: Mapping[str, Any], info: Mapping[str, Any], data: Data) -> list[dict[str, Any]]:
    """For a contrast claim still short of seeds: the tasks on which the cells that already have
    their seeds make the class condition fail whatever the others show. One row per task: the
    Transformer cell not in its class (``{task, transformer: its class, expected}``), or too many
    other cells not in theirs for ``MATCH_FRACTION`` to be reachable (``{task, wrong: [{family,
    class}], expected, can_match, of, needed}``)."""
    expected = spec["expected"]
    n_others = sum(f != TRANSFORMER for f in FAMILIES)
    out: list[dict[str, Any]] = []
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
            out.append({"task": t, "transformer": done[TRANSFORMER], "expected": expected[TRANSFORMER]})
            continue
        wrong = sorted(f for f, c in done.items() if f != TRANSFORMER and c != expected[f])
        if n_others - len(wrong) < MATCH_FRACTION * n_others:
            out.append(
                {
                    "task": t,
                    "wrong": [{"family": f, "class": done[f]} for f in wrong],
                    "expected": expected[wrong[0]],
                    "can_match": n_others - len(wrong),
                    "of": n_others,
                    "needed": MATCH_FRACTION,
                }
            )
    return out


def _fragility(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``fragile`` (a cell's class flips within the stability margins) and the cells that do."""
    fragile = [r for r in rows if r["stability"]["stable"] is False]
    return {
        "fragile": bool(fragile),
        "fragile_cells": [
            {
                "family": r["family"],
                "task": r["task"],
                "profile_class": r["profile_class"],
                "agree": r["stability"]["agree"],
                "of": r["stability"]["of"],
            }
            for r in fragile
        ],
    }


def _task_conditions(
    info: Mapping[str, Any], rows: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per task read: the class condition, the statistic condition and the task's verdict
    (:func:`_contrast_task_verdict`); and the tasks whose per-seed statistic is undefined (no test)."""
    per_task: dict[str, dict[str, Any]] = {}
    undefined = []
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
    return per_task, undefined


def _contrast_claim(
    cid: int, spec: Mapping[str, Any], info: Mapping[str, Any], data: Data, n_tests: int
) -> dict[str, Any]:
    """One contrast claim from its prepared cells and tests. ``why.case``: ``no data`` (no task
    with a stored cell), ``short`` (``numbers.cells_short_of_seeds``), ``undefined`` (the per-seed
    statistic undefined on ``why.tasks``) or ``evaluated`` (``why.tasks``: the tasks read, in
    order; ``why.test``: the ``numbers`` key of their tests; ``why.expected_transformer``).
    Supported when every task read supports it, contradicted when one contradicts it, else not
    enough data."""
    tasks, expected, metric = spec["tasks"], spec["expected"], spec["metric"]
    numbers: dict[str, Any] = {
        "match_fraction_required": MATCH_FRACTION,
        "alpha": ALPHA,
        "test_statistic": metric,  # of the contrast test, not the cell table
        "floor": "random-init control" if data.use_controls else "majority rate",
    }
    if info.get("untestable"):
        numbers["untestable"] = info["untestable"]
    left = data.left_out_for(tasks)
    if not info["usable_tasks"]:
        return _finish(
            _claim(cid, NOT_ENOUGH, {**numbers, "cells": []}, {"case": "no data", "tasks": list(tasks)}), left
        )
    if info["short"]:
        numbers["cells_short_of_seeds"] = info["short"]
        ruled_out = _class_condition_ruled_out(spec, info, data)
        if ruled_out:
            numbers["cannot_be_supported"] = ruled_out
        return _finish(_claim(cid, NOT_ENOUGH, {**numbers, "cells": []}, {"case": "short"}), left)
    rows = [_cell_row(t, f, s, expected[f]) for (t, f), s in sorted(info["summaries"].items())]
    numbers["cells"] = rows
    numbers.update(_fragility(rows))
    numbers["class_condition_agreement"] = _class_condition_agreement(spec, info)
    without_controls = [c for c in rows if c["floor"] != "control"]
    if data.use_controls and without_controls:
        numbers["cells_without_controls"] = [{"family": r["family"], "task": r["task"]} for r in without_controls]
    key = (
        "test_auc_transformer_gt_other"
        if spec["transformer_higher"]
        else "test_late_concentration_other_gt_transformer"
    )
    numbers[key] = info.get("tests", {})
    numbers["holm_family_size"] = n_tests
    per_task, undefined = _task_conditions(info, rows)
    if undefined:
        return _finish(_claim(cid, NOT_ENOUGH, numbers, {"case": "undefined", "tasks": undefined}), left)
    numbers["per_task"] = per_task
    task_verdicts = [v["verdict"] for v in per_task.values()]
    verdict = (
        SUPPORTED
        if all(v == SUPPORTED for v in task_verdicts)
        else CONTRADICTED
        if CONTRADICTED in task_verdicts
        else NOT_ENOUGH
    )
    why = {"case": "evaluated", "tasks": list(per_task), "test": key, "expected_transformer": expected[TRANSFORMER]}
    return _finish(_claim(cid, verdict, numbers, why), left)


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
