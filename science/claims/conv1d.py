"""Claim 5: Mamba's Conv1D matters task by task (docs/SCIENCE.md#claims)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from science.claims.common import (
    CONTRADICTED,
    EVAL_LENGTH,
    NOT_ENOUGH,
    SSM,
    STACK_TASK,
    SUPPORTED,
    Cell,
    Data,
    _ci,
    _claim,
    _finish,
    _perm_greater,
    _scratch,
    expected_cells,
)
from science.stats import ALPHA

# ----------------------------------------------------------------------------- claim 5


def _conv1d_rows(data: Data) -> dict[Any, Mapping[str, Any]]:
    """run id → its ``conv1d_removal`` row of every layer (layer −2) at EVAL_LENGTH, for the
    from-scratch Mamba/Mamba-2 runs."""
    info = {r["id"]: r for r in data.all_runs}
    rows_by_run: dict[Any, Mapping[str, Any]] = {}
    for r in data.interventions:
        run = info.get(r.get("run_id"))
        if (
            run is None
            or r.get("method") != "conv1d_removal"
            or int(r.get("layer", 0)) != -2
            or r.get("eval_length", EVAL_LENGTH) != EVAL_LENGTH
            or run["family"] not in SSM
            or not _scratch(run)
        ):
            continue
        rows_by_run[run["id"]] = r
    return rows_by_run


def claim_5(data: Data) -> dict[str, Any]:
    """``why.case``: ``no data`` (conv1d_removal on fewer than two tasks), ``short``
    (``numbers.cells_short_of_seeds``), ``no condition`` (none could be evaluated) or
    ``evaluated`` (``numbers.conditions``: True / False / None = not evaluated)."""
    info = {r["id"]: r for r in data.all_runs}
    trained_ids = {r["id"] for r in data.trained}
    rows_by_run = _conv1d_rows(data)
    tasks_all = ("s3", "parity", STACK_TASK)
    read = sorted({(info[rid]["task"], info[rid]["family"]) for rid in rows_by_run if info[rid]["task"] in tasks_all})
    expected = expected_cells(tasks_all, SSM)
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for rid, row in rows_by_run.items():
        cell = (info[rid]["task"], info[rid]["family"])
        if rid in trained_ids and row.get("drop_rel_chance") is not None and data.learned(cell):
            usable[(info[rid]["task"], info[rid]["family"])].append(info[rid])
    numbers: dict[str, Any] = {
        "tasks": {},
        "paper_pp": {"s3": -12.6, "parity": -6.8, "dyck": "n.s."},
        "test_statistic": "drop_rel_chance",
    }
    left = [r for r in data.left_out_for(tasks_all) if r["family"] in SSM]
    if len({t for t, _ in read}) < 2:
        return _finish(_claim(5, NOT_ENOUGH, numbers, {"case": "no data"}), left)
    short, untestable = data.trained_read(expected, usable, "conv1d_removal")
    if untestable:
        numbers["untestable"] = untestable
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(5, NOT_ENOUGH, numbers, {"case": "short"}), left)
    vals: dict[str, list[float]] = {}
    for t in tasks_all:
        runs_t = [r for (task, _f), rs in usable.items() if task == t for r in rs]
        if not runs_t:
            continue
        v = [float(rows_by_run[r["id"]]["drop_rel_chance"]) for r in runs_t]
        vals[t] = v
        numbers["tasks"][t] = {
            "drop_rel_chance": _ci(v),
            "n_runs": len(v),
            "delta_pp": _ci([rows_by_run[r["id"]].get("delta_pp") for r in runs_t]),
            "families": sorted({r["family"] for r in runs_t}),
        }
    conds: dict[str, bool | None] = {}
    tasks = numbers["tasks"]

    def drop(t: str) -> bool | None:
        lo = tasks[t]["drop_rel_chance"]["lo"]
        return None if lo is None else lo > 0

    if "s3" in tasks:
        conds["s3 drop above 0"] = drop("s3")
    if "parity" in tasks:
        conds["parity drop above 0"] = drop("parity")
    if "s3" in tasks and "parity" in tasks:
        test = _perm_greater(vals["s3"], vals["parity"])
        numbers["test_s3_gt_parity"] = test
        conds["s3 drop > parity drop"] = None if test is None else test["p"] < ALPHA
    if STACK_TASK in tasks:
        lo = tasks[STACK_TASK]["drop_rel_chance"]["lo"]
        conds["dyck drop not significant"] = None if lo is None else lo <= 0
    numbers["conditions"] = conds
    evaluated = {k: v for k, v in conds.items() if v is not None}
    if not evaluated:
        return _finish(_claim(5, NOT_ENOUGH, numbers, {"case": "no condition"}), left)
    failed = [k for k, v in evaluated.items() if not v]
    return _finish(_claim(5, CONTRADICTED if failed else SUPPORTED, numbers, {"case": "evaluated"}), left)
