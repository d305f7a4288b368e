"""Independent recomputation of claim 3 (S3 groups with Parity, not with Dyck) from a results bundle
alone, written from docs/SCIENCE.md (#claims, #profile-distance, #profiles, #controls, #plateau,
#statistics) without reading the claim code; stdlib + numpy/scipy, nothing of the project imported
(checks/independent_profiles.py holds what claims 1 and 3 share).

Usage: python checks/claim3_independent.py [BUNDLE] [--report RESULTS.md] [--any-revision]

It prints every number the report prints for claim 3 — the verdict against the random-init controls
and against the majority rate, each cell short of seeds (with each stopped run's slope at the stop),
every trained cell's class, per-seed split and late concentration with its t-interval, the runs left
out — and, for every family whose S3, Parity and Dyck cells have their seeds, the profile distances
d(S3, Parity) and d(S3, Dyck) on the 21-point interpolated depth grid (and, for comparison, on the
native grid of the layers' own depths and with the other reading of "seed-mean normalised curve"),
whether S3 and Parity share a class, the share of families where S3 is closer to Parity, and the
t-interval of the gap d(S3, Dyck) - d(S3, Parity) over families. Then it compares them with the
report's "## Claim 3" section (docs/RESULTS-<suite>.md, or --report) and exits 1 on any mismatch (the
families it names as not placed are printed, not compared: no report of this bundle words them).

--any-revision reads every plateau as final (the reading before revision 3 of the plateau rule) and
compares with the distances and gap docs/SCIENCE.md states that reading gave (#profile-distance,
#independent-checks) instead of the report.

The reading of "S3's seed-mean normalised curve" (#claims, claim 3) used here is the normalised curve
of the seed-mean learned gain (mean over seeds of acc - ctrl, then clip(g / max g, 0, 1)); the other
reading, the mean over seeds of each seed's normalised curve, is printed beside it as `per-seed mean`.
Only the first gives the distances SCIENCE.md states."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # checks/ as a folder of the checkout
from checks.independent_profiles import (
    CONTROL,
    FAMILIES,
    MAJORITY,
    MATCH_FRACTION,
    ROOT,
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
    depths,
    describe,
    left_out,
    load,
    normalised,
    report_path,
    section,
    seed_curve,
    shared_numbers,
    short_text,
    t_interval,
)

TASKS = ("parity", "s3", "dyck")
GRID = np.linspace(0.0, 1.0, 21)  # #profile-distance: 21 equally spaced depths 0, 0.05, ..., 1


def rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def curves(b: Bundle, c: Cell, floor: str) -> tuple[np.ndarray, np.ndarray]:
    """A cell's normalised curve ([n + 1]) two ways: of the seed-mean curve (the reading used) and the
    mean of the seeds' own normalised curves (the other reading)."""
    cp = cell_profile(b, c, floor)
    per_seed = [normalised(*seed_curve(b, c, s, cp.floor_used)) for s in sorted(c.trained)]
    return normalised(cp.curve, cp.floor), np.mean(per_seed, axis=0)


class Family:
    """One placed family: distances S3-Parity and S3-Dyck on the 21-point grid, on the native grid,
    and (21-point) with the per-seed-mean reading; whether S3's class equals Parity's."""

    def __init__(self, b: Bundle, all_cells: dict[tuple[str, str], Cell], family: str, floor: str) -> None:
        self.family = family
        n = {all_cells[(t, family)].trained[s]["n_layers"] for t in TASKS for s in all_cells[(t, family)].trained}
        assert len(n) == 1, f"{family}: models of {sorted(n)} blocks"
        d = depths(n.pop())
        mean, per_seed = {}, {}
        for t in TASKS:
            mean[t], per_seed[t] = curves(b, all_cells[(t, family)], floor)

        def grid(y: np.ndarray) -> np.ndarray:
            return np.interp(GRID, d, y)

        self.d_parity, self.d_dyck = (rms(grid(mean["s3"]), grid(mean[t])) for t in ("parity", "dyck"))
        self.native = tuple(rms(mean["s3"], mean[t]) for t in ("parity", "dyck"))
        self.seedwise = tuple(rms(grid(per_seed["s3"]), grid(per_seed[t])) for t in ("parity", "dyck"))
        self.classes = {t: cell_profile(b, all_cells[(t, family)], floor).mean.cls for t in ("s3", "parity")}

    @property
    def closer_to_parity(self) -> bool:
        return self.d_parity < self.d_dyck

    def line(self) -> str:
        return (
            f"family {self.family}; d_s3_parity {self.d_parity:.3f}; d_s3_dyck {self.d_dyck:.3f}; "
            f"closer to {'parity' if self.closer_to_parity else 'dyck'}; S3 class {self.classes['s3']}, "
            f"parity class {self.classes['parity']}; native grid: {self.native[0]:.3f} / {self.native[1]:.3f}; "
            f"per-seed mean: {self.seedwise[0]:.3f} / {self.seedwise[1]:.3f}"
        )


def evaluate(
    b: Bundle, all_cells: dict[tuple[str, str], Cell], floor: str, any_revision: bool
) -> tuple[str, list[str], list[str], list[Family]]:
    """Verdict, short cells, untestable families, placed families. A family with a cell not learned
    is not placed and its other cells do not hold the claim back (assumed); any other cell short of
    seeds makes it "not enough data"; with no family placed it is "not enough data" too. Supported when
    S3 is closer to Parity in >= 75% of the placed families, else contradicted (no least number of
    families is stated: assumed none)."""
    short, untestable, placed = [], [], []
    states = {(t, f): cell_state(all_cells.get((t, f)), any_revision) for t in TASKS for f in FAMILIES}
    excluded = {f for f in FAMILIES if any(states[(t, f)].startswith("not learned") for t in TASKS)}
    for t in TASKS:
        for f in sorted(FAMILIES):
            if f not in excluded and states[(t, f)] == "short":
                short.append(short_text(t, f, all_cells.get((t, f))))
    for f in FAMILIES:
        if f in excluded:
            which = [f"{f} × {t}" for t in TASKS if states[(t, f)].startswith("not learned")]
            untestable.append(f"{f}: not placed ({', '.join(which)} not learned)")
        elif all(states[(t, f)] == "ok" for t in TASKS):
            placed.append(Family(b, all_cells, f, floor))
    if short or not placed:
        return "not enough data", short, untestable, placed
    share = sum(fam.closer_to_parity for fam in placed) / len(placed)
    return ("supported" if share >= MATCH_FRACTION else "contradicted"), short, untestable, placed


def main() -> int:
    args = arguments(__doc__ or "")
    b = load(args.bundle)
    all_cells = cells(b)
    rev = args.any_revision
    v_control, short, untestable, placed = evaluate(b, all_cells, CONTROL, rev)
    v_majority, _, _, placed_majority = evaluate(b, all_cells, MAJORITY, rev)
    cell_lines = [
        describe(t, f, cell_profile(b, all_cells[(t, f)], CONTROL))
        for t in TASKS
        for f in FAMILIES
        if (t, f) in all_cells and all_cells[(t, f)].trained
    ]
    rows = sorted(row for t in TASKS for f in FAMILIES if (t, f) in all_cells for row in left_out(all_cells[(t, f)]))

    print(f"claim 3 verdict: {v_control}")
    print(f"majority-floor verdict: {v_majority}")
    for s in short:
        print(f"short: {s}")
    for s in untestable:
        print(f"untestable: {s}")
    if placed and v_control == "not enough data":
        print("(the families below have every seed; descriptive while the verdict is not enough data)")
    for fam in placed:
        print(fam.line())
    for fam in placed_majority:
        print(f"majority floor: {fam.line()}")
    gap = (math.nan, math.nan, math.nan)
    if placed:
        closer = sum(fam.closer_to_parity for fam in placed)
        same = sum(fam.classes["s3"] == fam.classes["parity"] for fam in placed)
        gap = t_interval([fam.d_dyck - fam.d_parity for fam in placed])
        print(
            f"closer to parity in {closer} of {len(placed)} families (≥ {MATCH_FRACTION:.0%} needed); "
            f"S3 class = parity class in {same} of {len(placed)}; "
            f"gap d(S3, Dyck) - d(S3, Parity) {gap[0]:.3f} [{gap[1]:.3f}, {gap[2]:.3f}], n = {len(placed)}"
        )
    for s in cell_lines:
        print(f"cell: {s}")
    for _, row, _ in rows:
        print(f"left out: {row}")

    cmp = Comparison()
    if rev:
        return compare_science_md(cmp, v_control, placed, gap)
    sec = section(report_path(b, args.report), 3)
    head = compare_head(cmp, sec, v_control, v_majority, short, cell_lines)
    if v_control != "not enough data":
        for fam in placed:
            cmp.contains(sec, f"{fam.d_parity:.3f}", f"{fam.family} d(S3, Parity)")
            cmp.contains(sec, f"{fam.d_dyck:.3f}", f"{fam.family} d(S3, Dyck)")
    compare_left_out(cmp, sec, head, rows)
    numbers = shared_numbers(short, v_control, "families")
    compare_numbers(cmp, sec, numbers)
    print(f"{cmp.failed} mismatch(es)")
    return 1 if cmp.failed else 0


def compare_science_md(cmp: Comparison, v_control: str, placed: list[Family], gap: tuple[float, float, float]) -> int:
    """--any-revision: the distances (both grids) and the gap docs/SCIENCE.md states for that reading."""
    science = " ".join((ROOT / "docs" / "SCIENCE.md").read_text().split())
    cmp.equal(v_control, "supported", "verdict")
    cmp.equal(sorted(fam.family for fam in placed), ["gru", "lstm"], "families placed")
    for fam in placed:
        name = fam.family.upper()
        cmp.contains(science, f"{name} {fam.d_parity:.3f} / {fam.d_dyck:.3f}", f"SCIENCE.md, 21-point grid, {name}")
        cmp.contains(science, f"{fam.native[0]:.3f} / {fam.native[1]:.3f}", f"SCIENCE.md, native grid, {name}")
    stated = f"gap {gap[0]:.3f} [{gap[1]:.3f}, {gap[2]:.3f}], n = {len(placed)}".replace("-", "−")
    cmp.contains(science, stated, "SCIENCE.md, the gap")
    print(f"{cmp.failed} mismatch(es)")
    return 1 if cmp.failed else 0


if __name__ == "__main__":
    sys.exit(main())
