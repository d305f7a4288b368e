"""Reversals: two architectures whose profile classes swap between two tasks
(docs/SCIENCE.md#profiles; the definitions: :mod:`science.profiles`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any


def reversal_pairs(classes: Mapping[tuple[str, str], str] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of tasks on which two architectures swap profile classes.

    Args:
        classes: ``{(task, family): class}`` or rows with ``task``, ``family``, ``profile_class``.
            ``flat`` cells are ignored.

    Returns:
        One dict per (family pair, task pair), families and tasks sorted:
        ``{families: [A, B], tasks: [T1, T2], kind: "full"|"partial", shared_class: [x, ...],
        classes: {T1: {A: c, B: d}, T2: {A: e, B: f}}}``.
    """
    if isinstance(classes, Mapping):
        cells = {(t, f): c for (t, f), c in classes.items()}
    else:
        cells = {(r["task"], r["family"]): r["profile_class"] for r in classes}
    cells = {k: v for k, v in cells.items() if v is not None and v != "flat"}
    tasks = sorted({t for t, _ in cells})
    fams = sorted({f for _, f in cells})
    out: list[dict[str, Any]] = []
    for A, B in combinations(fams, 2):
        for T1, T2 in combinations(tasks, 2):
            keys = [(T1, A), (T1, B), (T2, A), (T2, B)]
            if not all(k in cells for k in keys):
                continue
            c, d, e, f = (cells[k] for k in keys)
            if c == d or e == f:
                continue
            shared = sorted({x for x, ok in ((c, c == f), (d, d == e)) if ok})
            if not shared:
                continue
            out.append(
                {
                    "families": [A, B],
                    "tasks": [T1, T2],
                    "kind": "full" if (c == f and d == e) else "partial",
                    "shared_class": shared,
                    "classes": {T1: {A: c, B: d}, T2: {A: e, B: f}},
                }
            )
    return out
