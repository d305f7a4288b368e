"""Independent recomputation of claim 1 (Parity, S3: the Transformer `gradual`, LSTM/GRU/Mamba/Mamba-2
`late`) from a results bundle alone, written from docs/SCIENCE.md (#claims, #profiles, #controls,
#plateau, #stacked-rnns, #statistics) without reading the claim code; stdlib + numpy/scipy, nothing of
the project imported (checks/independent_profiles.py holds what claims 1 and 3 share).

Usage: python checks/claim1_independent.py [BUNDLE] [--report RESULTS.md] [--any-revision]

It prints every number the report prints for claim 1 — the verdict against the random-init controls
and against the majority rate, each cell short of seeds (with each stopped run's slope at the stop),
the "cannot be supported" note, every trained cell's class, per-seed split and late concentration
with its t-interval, the runs left out — and the same for the stacked LSTM/GRU variant; where a task
has every seed, the exact one-sided permutation test of the per-seed late concentration with Holm's
adjustment over the tests of claims 1 and 2 together (claim 2's Dyck AUC test is recomputed here for
that family, and checked against the report's claim 2 line). Then it compares them with the report's
"## Claim 1" section (docs/RESULTS-<suite>.md, or --report) and exits 1 on any mismatch.

--any-revision reads every plateau as final (the reading before revision 3 of the plateau rule) and
compares with what docs/SCIENCE.md states that reading gave (claim 1 contradicted on parity,
late-concentration difference -0.060) instead of the report."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # checks/ as a folder of the checkout
from checks.independent_profiles import (
    ALPHA,
    CONTROL,
    FAMILIES,
    MAJORITY,
    MATCH_FRACTION,
    MIN_SEEDS,
    ROOT,
    STACKED,
    Bundle,
    Cell,
    Comparison,
    arguments,
    cell_profile,
    cell_state,
    cells,
    compare_head,
    compare_left_out,
    compare_numbers,
    describe,
    g3,
    holm,
    left_out,
    load,
    paragraph,
    permutation_greater,
    report_path,
    section,
    shared_numbers,
    short_text,
)

TASKS = ("parity", "s3")
EXPECTED = {"transformer": "gradual", "other": "late"}
CLAIM2_TASK, CLAIM2_EXPECTED = "dyck", {"transformer": "early", "other": "gradual"}


def expected(family: str, table: dict[str, str]) -> str:
    """The class a claim expects of a family."""
    return table["transformer"] if family == "transformer" else table["other"]


@dataclass
class TaskResult:
    """One task of a class claim: its state (`tested`, `short`, `left out`), its read families,
    the classes of the cells that have their seeds, and the test's numbers when tested."""

    task: str
    state: str
    families: list[str]
    classes: dict[str, str] = field(default_factory=dict)
    class_ok: bool = False
    matched: int = 0
    difference: float = float("nan")
    p: float = float("nan")
    p_opposite: float = float("nan")
    splits: int = 0
    p_holm: float = float("nan")
    verdict: str = ""


def read_task(
    b: Bundle,
    all_cells: dict[tuple[str, str], Cell],
    task: str,
    slots: dict[str, str],
    table: dict[str, str],
    floor: str,
    statistic: str,
    any_revision: bool,
) -> TaskResult:
    """One task: not-learned cells leave it (the Transformer's: the whole task), a short cell keeps it
    untested, otherwise the class condition and the permutation test's unadjusted p."""
    states = {f: cell_state(all_cells.get((task, run_f)), any_revision) for f, run_f in slots.items()}
    if states["transformer"].startswith("not learned"):
        return TaskResult(task, "left out", [])
    read = [f for f in slots if not states[f].startswith("not learned")]
    res = TaskResult(task, "short" if any(states[f] == "short" for f in read) else "tested", read)
    profiles = {f: cell_profile(b, all_cells[(task, slots[f])], floor) for f in read if states[f] == "ok"}
    res.classes = {f: cp.mean.cls for f, cp in profiles.items()}
    if res.state != "tested":
        return res
    others = [f for f in read if f != "transformer"]
    res.matched = sum(res.classes[f] == table["other"] for f in others)
    res.class_ok = res.classes["transformer"] == table["transformer"] and res.matched >= MATCH_FRACTION * len(others)

    def per_seed(f: str) -> list[float]:
        vals = [getattr(p, statistic) for p in profiles[f].seeds.values()]
        return [v for v in vals if v is not None]  # assumed: a seed without the statistic is left out

    t_vals, o_vals = per_seed("transformer"), [v for f in others for v in per_seed(f)]
    if table["transformer"] == "early":  # claim 2: Transformer > others
        res.p, res.p_opposite, res.splits = permutation_greater(t_vals, o_vals)
        res.difference = float(np.mean(t_vals) - np.mean(o_vals))
    else:  # claim 1: others > Transformer
        res.p, res.p_opposite, res.splits = permutation_greater(o_vals, t_vals)
        res.difference = float(np.mean(o_vals) - np.mean(t_vals))
    return res


def holm_family(claim1: list[TaskResult], claim2: TaskResult) -> None:
    """Holm over every test of claims 1 and 2 together (one per task whose cells all have their seeds)."""
    tested = [r for r in [*claim1, claim2] if r.state == "tested"]
    adjusted = holm([r.p for r in tested])
    for r, a in zip(tested, adjusted):
        r.p_holm = a
        sig = a < ALPHA
        r.verdict = (
            "supported" if r.class_ok and sig else "contradicted" if not (r.class_ok or sig) else "not enough data"
        )


def verdict(results: list[TaskResult]) -> str:
    """#claims: supported when every task read supports it, contradicted when any contradicts it, else
    not enough data (also while a cell is short of seeds or no task is left to test)."""
    if any(r.state == "short" for r in results) or not any(r.state == "tested" for r in results):
        return "not enough data"
    vs = [r.verdict for r in results if r.state == "tested"]
    return (
        "contradicted"
        if "contradicted" in vs
        else "supported"
        if all(v == "supported" for v in vs)
        else "not enough data"
    )


def cannot_be_supported(results: list[TaskResult]) -> list[str]:
    """Per task short of seeds: the cells with their seeds that already fail the class condition,
    when no outcome of the missing cells can meet it. Families named by their slot (the report names
    the stacked cells `lstm`, `gru`)."""
    out = []
    for r in results:
        if r.state != "short":
            continue
        others = [f for f in r.families if f != "transformer"]
        wrong = sorted(f for f in others if f in r.classes and r.classes[f] != EXPECTED["other"])
        t_wrong = "transformer" in r.classes and r.classes["transformer"] != EXPECTED["transformer"]
        can = len(others) - len(wrong)
        if can < MATCH_FRACTION * len(others) or t_wrong:
            named = ", ".join(f"{f} is {r.classes[f]}" for f in wrong)
            tail = f"at most {can} of {len(others)} other families can match (≥ {MATCH_FRACTION:.0%} needed)"
            t_part = f"transformer is {r.classes['transformer']} where gradual is expected; " if t_wrong else ""
            out.append(f"on {r.task} {t_part}{named} where late is expected: {tail}")
    return out


def task_line(r: TaskResult, statistic: str, table: dict[str, str]) -> str:
    """A tested task in the words of the report's claim 2 line (checked there); claim 1's own line is
    compared only when the report decides a task, which the shipped bundle's does not."""
    return (
        f"{r.task}: transformer {r.classes['transformer']} (expected {table['transformer']}), "
        f"{r.matched}/{len(r.families) - 1} others as expected; per-seed {statistic} difference {g3(r.difference)}, "
        f"Holm p = {g3(r.p_holm)} (opposite direction: p = {g3(r.p_opposite)}, unadjusted) → {r.verdict}"
    )


def main() -> int:
    args = arguments(__doc__ or "")
    b = load(args.bundle)
    all_cells = cells(b)
    rev = args.any_revision
    plain = {f: f for f in FAMILIES}
    stacked = {f: STACKED.get(f, f) for f in FAMILIES}

    def claim(slots: dict[str, str], floor: str) -> tuple[list[TaskResult], TaskResult]:
        c1 = [read_task(b, all_cells, t, slots, EXPECTED, floor, "late", rev) for t in TASKS]
        c2 = read_task(b, all_cells, CLAIM2_TASK, plain, CLAIM2_EXPECTED, floor, "auc", rev)
        holm_family(c1, c2)
        return c1, c2

    out: dict[tuple[str, str], tuple[list[TaskResult], TaskResult]] = {
        (v, fl): claim(slots, fl) for v, slots in (("plain", plain), ("stacked", stacked)) for fl in (CONTROL, MAJORITY)
    }
    c1, c2 = out[("plain", CONTROL)]
    v_control, v_majority = verdict(c1), verdict(out[("plain", MAJORITY)][0])
    sc1 = out[("stacked", CONTROL)][0]
    v_stacked = verdict(sc1)

    def shorts(slots: dict[str, str]) -> list[str]:
        return [
            short_text(t, f, all_cells.get((t, slots[f])))
            for t in TASKS
            for f in sorted(slots)
            if cell_state(all_cells.get((t, slots[f])), rev) == "short"
        ]

    def trained_cells(slots: dict[str, str]) -> list[str]:
        return [
            describe(t, slots[f], cell_profile(b, all_cells[(t, slots[f])], CONTROL), expected(f, EXPECTED))
            for t in TASKS
            for f in FAMILIES
            if (t, slots[f]) in all_cells and all_cells[(t, slots[f])].trained
        ]

    rows = sorted(row for t in TASKS for f in FAMILIES if (t, f) in all_cells for row in left_out(all_cells[(t, f)]))
    print(f"claim 1 verdict: {v_control}")
    print(f"majority-floor verdict: {v_majority}")
    short_plain, cbs_plain = shorts(plain), cannot_be_supported(c1)
    short_stacked, cbs_stacked = shorts(stacked), cannot_be_supported(sc1)
    for prefix, ss, cbs in (("", short_plain, cbs_plain), ("stacked ", short_stacked, cbs_stacked)):
        for s in ss:
            print(f"{prefix}short: {s}")
        for s in cbs:
            print(f"{prefix}cannot be supported: {s}")
    for r in c1:
        if r.state == "left out":
            print(f"untestable: {r.task}: its transformer cell is not learned")
        elif r.state == "tested":
            print(f"test: {task_line(r, 'late_concentration', EXPECTED)} ({r.splits} splits, p = {g3(r.p)} unadjusted)")
    cell_lines = trained_cells(plain)
    for s in cell_lines:
        print(f"cell: {s}")
    for _, row, _ in rows:
        print(f"left out: {row}")
    print(f"stacked verdict: {v_stacked} (majority floor: {verdict(out[('stacked', MAJORITY)][0])})")
    for r in sc1:
        if r.state == "tested":
            print(f"stacked test: {task_line(r, 'late_concentration', EXPECTED)}")
    for s in trained_cells(stacked):
        if "_stack" in s:
            print(f"stacked cell: {s}")
    n_tests = sum(r.state == "tested" for r in [*c1, c2])
    c2_line = task_line(c2, "auc", CLAIM2_EXPECTED) if c2.state == "tested" else None
    print(f"claim 2 (for Holm's family): {c2_line}; Holm over {n_tests} test(s)")

    cmp = Comparison()
    if rev:
        return compare_science_md(cmp, v_control, c1)
    sec = section(report_path(b, args.report), 1)
    head = compare_head(cmp, sec, v_control, v_majority, short_plain, cell_lines)
    for s in cbs_plain:
        cmp.contains(head, s, "cannot be supported")
    cmp.equal(len(cbs_plain), head.count("(≥ 75% needed)"), "tasks that cannot be supported")
    for r in c1:
        if r.state == "tested":
            cmp.contains(head, task_line(r, "late_concentration", EXPECTED), "test")
    compare_left_out(cmp, sec, head, rows)
    numbers = shared_numbers(short_plain, v_control, "cells") | {
        "alpha": f"{ALPHA:g}",
        "test_statistic": "late_concentration",
    }
    if cbs_plain:
        numbers["cannot_be_supported"] = ", ".join(cbs_plain)
    compare_numbers(cmp, sec, numbers)
    stacked_par = paragraph(sec, "With the stacked LSTM/GRU")
    cmp.contains(stacked_par, f"): {v_stacked}.", "stacked verdict")
    for s in short_stacked:
        cmp.contains(stacked_par, s, "stacked short cell")
    cmp.equal(len(short_stacked), stacked_par.count(f" of {MIN_SEEDS} trained seeds"), "stacked cells short of seeds")
    for s in cbs_stacked:
        cmp.contains(stacked_par, s, "stacked cannot be supported")
    cmp.equal(len(cbs_stacked), stacked_par.count("(≥ 75% needed)"), "stacked tasks that cannot be supported")
    sec2 = section(report_path(b, args.report), 2)
    if c2_line is not None:
        cmp.contains(sec2, c2_line, "claim 2's test (Holm family shared with claim 1)")
    cmp.contains(sec2, f"after Holm over {n_tests} test(s)", "Holm family size of claims 1 and 2")
    print(f"{cmp.failed} mismatch(es)")
    return 1 if cmp.failed else 0


def compare_science_md(cmp: Comparison, v_control: str, c1: list[TaskResult]) -> int:
    """--any-revision: what docs/SCIENCE.md states the reading before revision 3 gave."""
    science = " ".join((ROOT / "docs" / "SCIENCE.md").read_text().split())
    parity = next(r for r in c1 if r.task == "parity")
    stated = "claim 1 contradicted on parity (late-concentration difference −0.060)"
    cmp.contains(science, stated, "SCIENCE.md")
    cmp.equal(v_control, "contradicted", "verdict")
    cmp.equal(parity.verdict, "contradicted", "parity")
    cmp.equal(f"{parity.difference:.3f}".replace("-", "−"), "−0.060", "parity late-concentration difference")
    print(f"{cmp.failed} mismatch(es)")
    return 1 if cmp.failed else 0


if __name__ == "__main__":
    sys.exit(main())
