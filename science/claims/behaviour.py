"""Claim 6: behaviour across eval lengths (docs/SCIENCE.md#claims)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from science.claims.common import (
    CONTRADICTED,
    EVAL_LENGTH,
    FALL_PP,
    FAMILIES,
    NOT_ENOUGH,
    PERFECT_ACC,
    PREFIX_TASKS,
    RECURRENT,
    SSM,
    SUPPORTED,
    TRANSFORMER,
    Cell,
    Data,
    _ci,
    _claim,
    _finish,
    _scratch,
    expected_cells,
)

# ----------------------------------------------------------------------------- claim 6


def claim_6(data: Data) -> dict[str, Any]:
    """``why.case``: ``short`` (``numbers.cells_short_of_seeds``), ``no data`` (no sub-claim could
    be evaluated) or ``evaluated`` (``numbers.sub_claims``: name → holds)."""
    tab: dict[Cell, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in data.trained:
        if not _scratch(r) or r["task"] not in PREFIX_TASKS:
            continue
        accs = {int(L): v.get("token_acc") for L, v in (r.get("behaviour") or {}).items() if isinstance(v, Mapping)}
        scored = {L: a for L, a in accs.items() if a is not None}
        if not scored or not data.learned((r["task"], r["family"])):
            continue
        usable[(r["task"], r["family"])].append(r)
        for L, a in scored.items():
            tab[(r["task"], r["family"])][L].append(float(a))
    read = expected_cells(PREFIX_TASKS, FAMILIES)
    lengths = sorted({L for d in tab.values() for L in d})
    numbers: dict[str, Any] = {
        "lengths_used": lengths,
        "accuracy": [
            {"task": t, "family": f, "by_length": {str(L): _ci(v, "accuracy") for L, v in sorted(d.items())}}
            for (t, f), d in sorted(tab.items())
        ],
    }
    left = data.left_out_for(PREFIX_TASKS)
    short, untestable = data.trained_read(read, usable) if any(data.stored.get(c) for c in read) else ([], [])
    if untestable:
        numbers["untestable"] = untestable
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(6, NOT_ENOUGH, numbers, {"case": "short"}), left)
    sub: dict[str, bool] = {}
    for t in PREFIX_TASKS:
        for f in RECURRENT:
            d = tab.get((t, f))
            if d and len(d) >= 2:
                sub[f"{f} perfect on {t}"] = all(np.mean(v) >= PERFECT_ACC for v in d.values())

    def ood(t: str, f: str) -> float | None:
        d = tab.get((t, f))
        longer = [np.mean(v) for L, v in (d or {}).items() if L > EVAL_LENGTH]
        return float(np.mean(longer)) if longer else None

    order = {}
    for t in PREFIX_TASKS:
        groups = {}
        for name, fams in (("recurrent", RECURRENT), ("ssm", SSM), ("transformer", (TRANSFORMER,))):
            vals = [v for v in (ood(t, f) for f in fams) if v is not None]
            groups[name] = float(np.mean(vals)) if vals else None
        order[t] = groups
        rec, ssm, tf = groups["recurrent"], groups["ssm"], groups["transformer"]
        if rec is not None and ssm is not None and tf is not None:
            sub[f"recurrent > ssm > transformer on {t}"] = rec > ssm > tf
    numbers["ood_lengths"] = [L for L in lengths if L > EVAL_LENGTH]
    numbers["ood_accuracy_by_group"] = order
    d = tab.get(("parity", "mamba"))
    if d and EVAL_LENGTH in d and len(d) >= 2:
        Ls = sorted(d)
        means = [float(np.mean(d[L])) for L in Ls]
        slope = float(np.polyfit(Ls, means, 1)[0])
        fall = (means[-1] - float(np.mean(d[EVAL_LENGTH]))) * 100
        numbers["mamba_parity"] = {"lengths": Ls, "token_acc": means, "slope_per_token": slope, "change_pp": fall}
        sub["mamba accuracy falls with length on parity"] = fall <= -FALL_PP and slope < 0
    numbers["sub_claims"] = sub
    if not sub:
        return _finish(_claim(6, NOT_ENOUGH, numbers, {"case": "no data"}), left)
    failed = [k for k, v in sub.items() if not v]
    return _finish(_claim(6, CONTRADICTED if failed else SUPPORTED, numbers, {"case": "evaluated"}), left)
