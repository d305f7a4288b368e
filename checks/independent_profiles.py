"""What the independent checks of claims 1 and 3 (checks/claim1_independent.py,
checks/claim3_independent.py) share: a results bundle read with stdlib zipfile/json, the profile
metrics and classes, the cells and their seeds, and the report's section to compare with. numpy and
scipy only; nothing of the project is imported. Every rule is written from docs/SCIENCE.md, under
the anchor named beside it; where SCIENCE.md leaves a choice open, the docstring says what is
assumed.

Shapes: a probe curve is a float array of n_layers + 1 accuracies at L = EVAL_LENGTH, `emb`
(layer -1) first, then blocks 0 .. n - 1; depths (layer + 1) / n (#normalised-depth)."""

from __future__ import annotations

import argparse
import json
import math
import re
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BUNDLE = ROOT / "examples" / "paper-steps.layerscope.zip"

# docs/SCIENCE.md#claims, #profiles, #controls, #trained, #plateau
EVAL_LENGTH = 40
MIN_SEEDS = 3
DEFAULT_CRITERION = 0.99  # runs.early_stop_acc when none is stored
LEVEL_95 = 0.95
EARLY_DEPTH = 0.5
LATE_SHARE = 0.5
MIN_GAIN = 0.02
FLAT_MARGIN = 0.05
CONTROL_SD_FACTOR = 3.0
MATCH_FRACTION = 0.75
ALPHA = 0.05
SLOPE_WINDOW_STEPS = 2000  # revision 3's window: the larger of 2,000 steps and 10% of max_steps
SLOPE_WINDOW_SHARE = 0.10
FAMILIES = ("transformer", "mamba", "mamba2", "lstm", "gru")  # the study's families, in the report's order
STACKED = {"lstm": "lstm_stack", "gru": "gru_stack"}  # #stacked-rnns: the plain stacks
CONTROL = "control"  # floor: the same seed's random-init control (#controls)
MAJORITY = "majority"  # floor: the majority baseline (#profiles)
NOT_ABOVE_CONTROL = "not above control"


# ------------------------------------------------------------------ the bundle
@dataclass
class Bundle:
    """A bundle's suite, its runs (the `runs` table's rows) and each run's probe curve at L = 40
    (`curves[run id]`, [n_layers + 1]) with its mean majority baseline (`majority[run id]`)."""

    suite: str
    runs: list[dict[str, Any]]
    curves: dict[int, np.ndarray]
    majority: dict[int, float]


def load(path: str | Path) -> Bundle:
    """Read tables/runs.json and tables/probe_results.json of a bundle (a zip). Raises AssertionError
    on two suites, a duplicate probe row or a run whose curve misses a layer."""
    with zipfile.ZipFile(path) as z:
        runs = json.loads(z.read("tables/runs.json"))
        probes = json.loads(z.read("tables/probe_results.json"))
    suites = {r["suite"] for r in runs}
    assert len(suites) == 1, f"one suite per statistic (docs/SCIENCE.md#suites); the bundle holds {suites}"
    by_run: defaultdict[int, dict[int, tuple[float, float | None]]] = defaultdict(dict)
    for p in probes:
        if p["eval_length"] == EVAL_LENGTH:
            assert p["layer"] not in by_run[p["run_id"]], f"duplicate probe row {p['id']}"
            by_run[p["run_id"]][p["layer"]] = (p["accuracy"], p["majority_baseline"])
    n_layers = {r["id"]: r["n_layers"] for r in runs}
    curves, majority = {}, {}
    for rid, rows in by_run.items():
        layers = list(range(-1, n_layers[rid]))
        assert sorted(rows) == layers, f"run {rid}: probe layers {sorted(rows)}"
        curves[rid] = np.array([rows[layer][0] for layer in layers])
        majs = [m for _, m in rows.values() if m is not None]
        # #profiles: "its floor f is the majority baseline (the curve's minimum when none is stored)"
        majority[rid] = float(np.mean(majs)) if majs else float(curves[rid].min())
    return Bundle(suites.pop(), runs, curves, majority)


def criterion(run: dict[str, Any]) -> float:
    c = run.get("early_stop_acc")
    return DEFAULT_CRITERION if c is None else float(c)


def is_trained(run: dict[str, Any]) -> bool:
    """#trained: held-out token accuracy at the training length reaches the run's criterion."""
    return run.get("heldout_acc") is not None and run["heldout_acc"] >= criterion(run)


def plateau_revision(run: dict[str, Any]) -> int:
    """#plateau: revision 3 when train_config.plateau_revision is 3, 2 when plateau_gap_share is set,
    else 1."""
    tc = run.get("train_config") or {}
    if tc.get("plateau_revision") == 3:
        return 3
    return 2 if tc.get("plateau_gap_share") is not None else 1


def final_plateau(run: dict[str, Any], any_revision: bool) -> bool:
    """A plateau the claims read as final: revision 3's only (since 2026-12-06), or, with
    `any_revision`, every plateau (the reading before revision 3)."""
    return run.get("stop_reason") == "plateau" and (any_revision or plateau_revision(run) == 3)


# ------------------------------------------------------------------ profile metrics (#profiles)
@dataclass
class Profile:
    """The metrics of one curve over its floor: `first95` a layer (-1 = emb), `late` the late
    concentration (None under MIN_GAIN), `auc` on the depth axis, `gain` = max - floor, `cls`."""

    first95: int
    late: float | None
    auc: float
    gain: float
    cls: str


def depths(n_layers: int) -> np.ndarray:
    """#normalised-depth: emb at 0, block l at (l + 1) / n; [n + 1]."""
    return np.arange(n_layers + 1) / n_layers


def normalised(curve: np.ndarray, floor: float) -> np.ndarray:
    """clip((acc - f) / (max - f), 0, 1) with max over every layer, emb included; [n + 1]. A curve
    with no gain (max <= f) is all zeros (an assumption: SCIENCE.md does not define it)."""
    top = float(curve.max()) - floor
    if top <= 0:
        return np.zeros_like(curve)
    return np.clip((curve - floor) / top, 0.0, 1.0)


def profile(curve: np.ndarray, floor: float, margin: float, flat_name: str) -> Profile:
    """#profiles: first layer at 95% of the gain, late concentration with the no-computation floor
    max(f, acc[emb]), the trapezoid AUC of the normalised curve, and the class in the order flat
    (max - f < margin, named `flat_name`), early (depth of first-95 <= 0.5), late (late
    concentration >= 0.5), gradual."""
    n = len(curve) - 1
    gain = float(curve.max()) - floor
    first = next(i for i, a in enumerate(curve) if a - floor >= LEVEL_95 * gain) - 1
    f_c = max(floor, float(curve[0]))
    blocks_gain = float(curve[-1]) - f_c
    late = None if blocks_gain < MIN_GAIN else (float(curve[-1]) - float(curve[-2])) / blocks_gain
    auc = float(np.trapezoid(normalised(curve, floor), depths(n)))
    if gain < margin:
        cls = flat_name
    elif (first + 1) / n <= EARLY_DEPTH:
        cls = "early"
    elif late is not None and late >= LATE_SHARE:
        cls = "late"
    else:
        cls = "gradual"
    return Profile(first, late, auc, gain, cls)


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval (ddof 1) over seeds (#statistics); (mean, nan, nan) for n < 2."""
    x = np.asarray(values, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, math.nan, math.nan
    h = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return m, m - h, m + h


# ------------------------------------------------------------------ cells (#claims, #plateau)
@dataclass
class Cell:
    """One (task, family) of from-scratch runs at L = 40: the trained runs by seed, the untrained
    runs, and the random-init control curves by seed. `family` is the run's family (lstm_stack
    where the stacked variant reads it)."""

    task: str
    family: str
    trained: dict[int, dict[str, Any]] = field(default_factory=dict)
    untrained: list[dict[str, Any]] = field(default_factory=list)
    controls: dict[int, np.ndarray] = field(default_factory=dict)


def cells(b: Bundle) -> dict[tuple[str, str], Cell]:
    """Every (task, family) cell of from-scratch runs at training length 40 (controls beside)."""
    out: dict[tuple[str, str], Cell] = {}
    for r in sorted(b.runs, key=lambda r: r["id"]):
        if r.get("pretrained") or (r.get("train_config") or {}).get("train_length", EVAL_LENGTH) != EVAL_LENGTH:
            continue
        c = out.setdefault((r["task"], r["family"]), Cell(r["task"], r["family"]))
        if r.get("control") == "init":
            if r["id"] in b.curves:
                c.controls[r["seed"]] = b.curves[r["id"]]
        elif r.get("control") is None:
            if is_trained(r):
                assert r["seed"] not in c.trained, f"two runs of seed {r['seed']} in {r['family']} × {r['task']}"
                c.trained[r["seed"]] = r
            else:
                c.untrained.append(r)
    return out


def cell_state(c: Cell | None, any_revision: bool) -> str:
    """#plateau: `ok` (>= MIN_SEEDS trained seeds), `not learned` (every seed stopped at a final
    plateau), `not learned by every seed` (fewer trained seeds, every other seed stopped at a final
    plateau, none missing), else `short`. Assumed: "every seed" means at least MIN_SEEDS runs."""
    if c is None:
        return "short"
    k = len(c.trained)
    if k >= MIN_SEEDS:
        return "ok"
    plateaued = [r for r in c.untrained if final_plateau(r, any_revision)]
    if len(plateaued) != len(c.untrained) or k + len(plateaued) < MIN_SEEDS:
        return "short"
    return "not learned" if k == 0 else "not learned by every seed"


def control_margin(c: Cell) -> float:
    """#controls: max(MIN_GAIN, 3 x the largest per-layer sd (ddof 1) of the trained seeds' control
    curves); the 5 pp flat margin with fewer than two controls."""
    ctrl = [c.controls[s] for s in sorted(c.trained) if s in c.controls]
    if len(ctrl) < 2:
        return FLAT_MARGIN
    return max(MIN_GAIN, CONTROL_SD_FACTOR * float(np.max(np.std(np.stack(ctrl), axis=0, ddof=1))))


@dataclass
class CellProfile:
    """A cell read on one floor: the seed-mean curve's profile, each seed's profile (by seed), the
    seed-mean floored curve ([n + 1]) and its floor, and the floor actually used."""

    mean: Profile
    seeds: dict[int, Profile]
    curve: np.ndarray
    floor: float
    floor_used: str


def seed_curve(b: Bundle, c: Cell, seed: int, floor: str) -> tuple[np.ndarray, float]:
    """A trained seed's curve and floor: the learned gain acc - ctrl with floor 0, or acc with its
    majority baseline."""
    r = c.trained[seed]
    if floor == CONTROL:
        return b.curves[r["id"]] - c.controls[seed], 0.0
    return b.curves[r["id"]], b.majority[r["id"]]


def cell_profile(b: Bundle, c: Cell, floor: str) -> CellProfile:
    """#claims: "a cell's class is the class of its seed-mean curve with the mean majority baseline";
    against the control, of the seed-mean learned gain with floor 0 and the cell's control margin
    (seeds' own classes with the same margin). A cell with a trained seed lacking its control falls
    back to the majority floor (#controls)."""
    seeds = sorted(c.trained)
    used = floor if floor == MAJORITY or all(s in c.controls for s in seeds) else MAJORITY
    margin = control_margin(c) if used == CONTROL else FLAT_MARGIN
    flat_name = NOT_ABOVE_CONTROL if used == CONTROL else "flat"
    pairs = {s: seed_curve(b, c, s, used) for s in seeds}
    per_seed = {s: profile(cv, f, margin, flat_name) for s, (cv, f) in pairs.items()}
    mean_curve = np.mean([cv for cv, _ in pairs.values()], axis=0)
    mean_floor = float(np.mean([f for _, f in pairs.values()]))
    return CellProfile(profile(mean_curve, mean_floor, margin, flat_name), per_seed, mean_curve, mean_floor, used)


def seed_split(cp: CellProfile) -> str:
    """`seeds: 2 early, 1 gradual` (classes in alphabetical order, as the report prints them)."""
    counts: defaultdict[str, int] = defaultdict(int)
    for p in cp.seeds.values():
        counts[p.cls] += 1
    return "seeds: " + ", ".join(f"{n} {cls}" for cls, n in sorted(counts.items()))


def describe(task: str, family: str, cp: CellProfile, expected: str | None = None) -> str:
    """A trained cell as the report's "What the trained cells show" paragraph writes it."""
    agree = sum(p.cls == cp.mean.cls for p in cp.seeds.values())
    most = " — most seeds differ" if agree < len(cp.seeds) / 2 else ""
    expect = "" if expected is None else f" (the claim expects {expected})"
    m, lo, hi = t_interval([p.late for p in cp.seeds.values() if p.late is not None])
    return (
        f"{family} × {task}: class {cp.mean.cls} ({seed_split(cp)}){most}{expect}, "
        f"late concentration {f2(m)} [{f2(lo)}, {f2(hi)}], n = {len(cp.seeds)}"
    )


# ------------------------------------------------------------------ untrained runs (#plateau, #budgets)
def stop_slope(run: dict[str, Any]) -> tuple[float, float, float, int]:
    """#plateau, "slope at the stop": the least-squares slope of held-out accuracy against step over
    the evaluations at the run's last training length within the window (the larger of 2,000 steps
    and 10% of max_steps, cut at the start of that curriculum stage), with its 95% t-interval, in pp
    per 1,000 steps, and the window's length in steps. Assumed: the stage starts at the step of the
    evaluation that moved the curriculum on, and the window holds the evaluations after its start."""
    curve = run["loss_curve"]
    stop, length = int(curve[-1]["step"]), curve[-1]["length"]
    evals = [e for e in curve if e.get("heldout_token_acc") is not None]
    moved = [e["step"] for e in evals if e["length"] != length]
    start = max(
        stop - max(SLOPE_WINDOW_STEPS, SLOPE_WINDOW_SHARE * run["train_config"]["max_steps"]), max(moved, default=0)
    )
    pts = [(e["step"], e["heldout_token_acc"]) for e in evals if e["length"] == length and e["step"] > start]
    x, y = np.array(pts, dtype=float).T
    fit = stats.linregress(x, y)
    half = float(stats.t.ppf(0.975, len(x) - 2) * fit.stderr)
    to_pp = 100 * 1000
    return fit.slope * to_pp, (fit.slope - half) * to_pp, (fit.slope + half) * to_pp, int(stop - start)


def stopped_text(run: dict[str, Any]) -> str:
    """`seed 1 at step 4,800 of 8,000 (60% of its budget), held-out slope +0.25 pp per 1,000 steps
    (95% CI +0.16 to +0.35, last 2,000 steps)`."""
    budget = run["train_config"]["max_steps"]
    slope, lo, hi, span = stop_slope(run)
    return (
        f"seed {run['seed']} at step {run['steps']:,} of {budget:,} ({100 * run['steps'] / budget:.0f}% of its budget), "
        f"held-out slope {slope:+.2f} pp per 1,000 steps (95% CI {lo:+.2f} to {hi:+.2f}, last {span:,} steps)"
    )


def acc_range(values: list[float]) -> str:
    lo, hi = f"{min(values):.3f}", f"{max(values):.3f}"
    return lo if lo == hi else f"{lo}–{hi}"


def short_text(task: str, family: str, c: Cell | None) -> str:
    """A cell short of seeds, as the report names it. Written for what the shipped bundle holds
    (untrained runs stopped by plateau revisions 1-2); runs stopped otherwise get a plain count (not
    checked against any report)."""
    if c is None or not (c.trained or c.untrained):
        return f"{family} × {task}: 0 of {MIN_SEEDS} trained seeds (no runs trained from scratch stored)"
    head = f"{family} × {task}: {len(c.trained)} of {MIN_SEEDS} trained seeds"
    if not c.untrained:
        return head
    groups: defaultdict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in c.untrained:
        groups[(r.get("stop_reason") or "none", plateau_revision(r))].append(r)
    parts = []
    for (reason, rev), rs in sorted(groups.items()):
        best = acc_range([r["best_heldout_acc"] for r in rs if r.get("best_heldout_acc") is not None])
        if reason == "plateau" and rev < 3:
            parts.append(
                f"{len(rs)} stopped by plateau rule revision {rev} (since revised: it stopped runs still rising), "
                f"best held-out accuracy {best}, not enough data: more steps would decide"
            )
        else:
            parts.append(f"{len(rs)} stopped by {reason}, best held-out accuracy {best}")
    seeds = "; ".join(stopped_text(r) for r in sorted(c.untrained, key=lambda r: r["seed"]) if r.get("loss_curve"))
    return f"{head} ({len(c.untrained)} untrained run(s) left out: {'; '.join(parts)}; {seeds})"


def left_out(c: Cell) -> list[tuple[int, str, str]]:
    """(run id, the report's `runs_left_out` row, its words in the verdict's "Left out" sentence) for
    each untrained run of the cell."""
    out = []
    for r in c.untrained:
        reason = f"held-out token accuracy {r['heldout_acc']:.3f} < {criterion(r):g}"
        row = f"run_id {r['id']}; task {r['task']}; family {r['family']}; seed {r['seed']}; reason {reason}"
        out.append((r["id"], row, f"{r['family']} × {r['task']} seed {r['seed']}: {reason}"))
    return out


def left_out_sentence(rows: list[tuple[int, str, str]], named: int = 3) -> str:
    """`Left out 10 untrained run(s): a; b; c; and 7 more.` (runs by id, the first `named` named)."""
    words = [w for _, _, w in sorted(rows)]
    more = f"; and {len(words) - named} more" if len(words) > named else ""
    return f"Left out {len(words)} untrained run(s): {'; '.join(words[:named])}{more}."


def compare_left_out(cmp: Comparison, sec: str, head: str, rows: list[tuple[int, str, str]]) -> None:
    """The runs a claim left out: each row of its `runs_left_out` list, their count, and the sentence."""
    for _, row, _ in rows:
        cmp.contains(sec, f"  - {row}\n", "run left out")
    cmp.equal(len(rows), sec.count("  - run_id "), "runs left out")
    cmp.contains(sec, f"- runs_excluded_undertrained: {len(rows)}\n", "runs_excluded_undertrained")
    if rows:
        cmp.contains(head, left_out_sentence(rows), "left out")


def compare_numbers(cmp: Comparison, sec: str, items: dict[str, str]) -> None:
    """Lines of the section's `Numbers:` list (`- key: value`)."""
    for key, value in items.items():
        cmp.contains(sec, f"\n- {key}: {value}\n", "numbers")


# ------------------------------------------------------------------ statistics (#statistics)
def permutation_greater(high: list[float], low: list[float]) -> tuple[float, float, int]:
    """One-sided two-sample permutation test of mean(high) - mean(low) > 0, exact (scipy's
    permutation_test over every split); (p, p in the opposite direction, number of splits)."""

    def diff(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    data = (np.asarray(high, dtype=float), np.asarray(low, dtype=float))
    kw: dict[str, Any] = dict(permutation_type="independent", n_resamples=np.inf, vectorized=True)
    p = stats.permutation_test(data, diff, alternative="greater", **kw).pvalue
    q = stats.permutation_test(data, diff, alternative="less", **kw).pvalue
    return float(p), float(q), math.comb(len(high) + len(low), len(low))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment (monotone, capped at 1), in the input order."""
    order = np.argsort(pvalues, kind="stable")
    m, out, running = len(pvalues), [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


# ------------------------------------------------------------------ formats and the report
def f2(x: float) -> str:
    """Two decimals as the report prints a late concentration ('nan' for a missing bound); a value that
    rounds to zero is "0.00" whatever its sign (the report's gru × parity: mean -0.0044 prints 0.00)."""
    if math.isnan(x):
        return "nan"
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


def g3(x: float) -> str:
    """Three significant digits as the report's numbers."""
    return f"{x:.3g}"


def report_path(b: Bundle, given: str | None) -> Path:
    """The report the check compares with: --report, else docs/RESULTS-<suite>.md of this checkout."""
    return Path(given) if given else ROOT / "docs" / f"RESULTS-{b.suite}.md"


def n_described(paragraph_text: str) -> int:
    """How many cells a "What the trained cells show" paragraph describes (one number each)."""
    return len(re.findall(r"late concentration -?\d", paragraph_text))


def section(report: Path, claim: int) -> str:
    """The report's `## Claim N:` section (up to the next claim)."""
    text = report.read_text()
    start = text.index(f"## Claim {claim}:")
    end = text.find("## Claim", start + 10)
    return text[start : end if end > 0 else None]


def paragraph(sec: str, bold: str) -> str:
    """The paragraph of a section that starts with **bold** (empty when absent)."""
    m = re.search(rf"\*\*{re.escape(bold)}\*\*[^\n]*", sec)
    return "" if m is None else m.group(0)


class Comparison:
    """Collects MATCH / MISMATCH lines; `failed` is the count of mismatches."""

    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str) -> None:
        print(("MATCH     " if ok else "MISMATCH  ") + what)
        self.failed += not ok

    def contains(self, text: str, needle: str, where: str) -> None:
        self.check(needle in text, f"{where}: {needle.strip()}")

    def equal(self, got: object, want: object, what: str) -> None:
        self.check(got == want, f"{what}: {got!r} (report {want!r})")


def arguments(doc: str) -> argparse.Namespace:
    """The command line both checks share: BUNDLE, --report, --any-revision."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("bundle", nargs="?", default=str(DEFAULT_BUNDLE))
    ap.add_argument("--report", help="the report to compare with (default docs/RESULTS-<suite>.md)")
    ap.add_argument("--any-revision", action="store_true", help="every plateau final (before revision 3)")
    args = ap.parse_args()
    reading = "any revision" if args.any_revision else "revision 3 only"
    print(f"bundle {args.bundle}; plateaus read as final: {reading}")
    return args


def compare_head(
    cmp: Comparison, sec: str, v_control: str, v_majority: str, shorts: list[str], cell_lines: list[str]
) -> str:
    """What claims 1 and 3 print alike: the verdict on both floors, the cells short of seeds (each,
    their count and order) and, while the claim is not decided, every trained cell described. Returns
    the verdict paragraph (the section before its variants)."""
    head = sec.split("\n\n**With", 1)[0]
    cmp.contains(head, f"(verdict: {v_control})", "verdict")
    cmp.contains(
        paragraph(sec, "With and without controls"),
        f": {v_control}; against the majority rate alone: {v_majority}",
        "with and without controls",
    )
    for s in shorts:
        cmp.contains(head, s, "short cell")
    cmp.equal(len(shorts), head.count(f" of {MIN_SEEDS} trained seeds"), "cells short of seeds")
    at = [head.find(s) for s in shorts]
    cmp.check(at == sorted(at), "short cells in the report's order")
    if v_control == "not enough data":
        described = paragraph(sec, "What the trained cells show")
        for s in cell_lines:
            cmp.contains(described, s, "trained cell")
        cmp.equal(len(cell_lines), n_described(described), "trained cells described")
    return head


def shared_numbers(shorts: list[str], v_control: str, listed: str) -> dict[str, str]:
    """The `Numbers:` lines both claims print: constants, the short cells, and `listed` (claim 1's
    `cells`, claim 3's `families`) empty while the claim is not decided."""
    numbers = {
        "match_fraction_required": f"{MATCH_FRACTION:g}",
        "floor": "random-init control",
        "min_seeds": f"{MIN_SEEDS}",
    }
    if shorts:
        numbers["cells_short_of_seeds"] = ", ".join(shorts)
    if v_control == "not enough data":
        numbers[listed] = "–"
    return numbers
