"""What every claim shares (docs/SCIENCE.md#claims): the constants of the rules, the inputs split
once (:class:`Data`), cell summaries against the majority or the control, and small helpers.

The claims return data, not prose: each names the case its verdict came from (``why``) and puts
every number it rests on in ``numbers``; cells short of seeds, cells not learned and the like are
structured rows (``{task, family, kind, ...}``). The sentences and the links to the dashboard's
views are written on the presentation side (``backend.claims_text``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from layerscope_core.registry import FAMILIES as STUDY_FAMILIES
from layerscope_core.registry import STUDY_TASKS, TRAIN_LENGTH, families_where
from science import profiles as P
from science.plateau import REVISION as PLATEAU_REVISION
from science.plateau import plateau_revision, stop_slope
from science.stats import ALPHA, bounds_for, permutation_greater, t_interval
from science.trained import is_trained, untrained_reason

SUPPORTED, CONTRADICTED, NOT_ENOUGH = "supported", "contradicted", "not enough data"

EVAL_LENGTH = TRAIN_LENGTH
MIN_SEEDS = 3  # trained seeds every cell a verdict reads must have
PREFIX_TASKS = ("parity", "s3")
STACK_TASK = "dyck"
# the study's families by kind (layerscope_core.registry): the claims compare these groups
RECURRENT = families_where(STUDY_FAMILIES, kind="rnn")
SSM = families_where(STUDY_FAMILIES, kind="ssm")
(TRANSFORMER,) = families_where(STUDY_FAMILIES, kind="attention")
NON_TRANSFORMER = RECURRENT + SSM
FAMILIES = (TRANSFORMER, *NON_TRANSFORMER)
MATCH_FRACTION = 0.75
DECOUPLING_METHODS = ("leace", "inlp", "project_out")
DECOUPLING_MARGIN_PP = 5.0
# version 1 rows (no refit_line): refit probe at most 2 pp above the majority rate (one-sided) = the
# variable was removed; version 2 rows carry their own line (docs/SCIENCE.md#removal-line)
REFIT_TOL = 0.02
DECOUPLED_SHARE_MIN = 0.10  # decoupling must be more than a one-in-ten fluke
PERFECT_ACC = 0.99
FALL_PP = 5.0
N_PERM = 10_000
STATE_SITE = "state"

Cell = tuple[str, str]  # (task, family)


# ----------------------------------------------------------------------------- helpers


def _clean(x: Any) -> Any:
    """JSON-safe copy: numpy scalars → Python, nan/inf → None, tuple keys → strings."""
    if isinstance(x, Mapping):
        return {(k if isinstance(k, str | int) else str(k)): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _ci(values: Sequence[float | None], quantity: str | None = None) -> dict[str, Any]:
    """Mean and 95% t-interval over ``values``; ``quantity`` names a bounded one (science.stats
    BOUNDS, e.g. "accuracy"), whose interval is clipped to its range."""
    vals = [v for v in values if v is not None]
    m, lo, hi = t_interval(vals, bounds=bounds_for(quantity)) if vals else (None, None, None)
    return {"mean": m, "lo": lo, "hi": hi, "n": len(vals)}


def _claim(cid: int, verdict: str, numbers: dict[str, Any], why: dict[str, Any]) -> dict[str, Any]:
    """A claim's result: ``why`` names the case the verdict came from (``{"case": ..., ...}``, the
    facts a reader needs beyond ``numbers``)."""
    return {"id": cid, "verdict": verdict, "numbers": numbers, "why": why}


def _scratch(run: Mapping[str, Any]) -> bool:
    return not run.get("pretrained")


def expected_cells(tasks: Iterable[str], families: Iterable[str] = STUDY_FAMILIES) -> list[Cell]:
    """Every (task, family) a from-scratch study is meant to have for these tasks and families:
    the study's families × tasks (``FAMILIES`` × ``STUDY_TASKS``, layerscope_core.registry)
    restricted to the ones a claim is about, so a cell with no runs at all is counted short
    rather than skipped."""
    ts, fs = set(tasks), set(families)
    return [(t, f) for t in STUDY_TASKS if t in ts for f in STUDY_FAMILIES if f in fs]


def _cell(cell: Cell, kind: str) -> dict[str, Any]:
    return {"task": cell[0], "family": cell[1], "kind": kind}


class Data:
    """The inputs, split once: trained runs, their curves, and every stored run by cell."""

    def __init__(
        self,
        runs: Sequence[Mapping[str, Any]],
        probes: Sequence[Mapping[str, Any]],
        interventions: Sequence[Mapping[str, Any]],
        patching: Sequence[Mapping[str, Any]],
        controls: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        self.all_runs = list(runs)
        # random-init control curves: (task, family, seed, n_layers) → curve (docs/SCIENCE.md#controls)
        self.controls: dict[tuple, dict[int, float]] = {}
        for c in controls or []:
            try:
                curve = P.normalise_keys(c["curve"])
            except ValueError:
                continue
            self.controls[(c["task"], c["family"], c.get("seed"), c.get("n_layers", max(curve) + 1))] = curve
        self.use_controls = bool(self.controls)
        self.summaries: dict[tuple, dict[str, Any]] = {}  # (use_controls, run ids) → _summary's
        self.trained = [r for r in self.all_runs if is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))]
        trained_ids = {r["id"] for r in self.trained}
        self.left_out = [
            {
                "run_id": r["id"],
                "task": r.get("task"),
                "family": r.get("family"),
                "seed": r.get("seed"),
                "pretrained": r.get("pretrained"),
                "reason": untrained_reason(r.get("heldout_acc"), r.get("early_stop_acc")),
            }
            for r in self.all_runs
            if r["id"] not in trained_ids
        ]
        self.curves = _run_curves(self.trained, probes, EVAL_LENGTH)
        self.interventions = list(interventions)
        self.patching = list(patching)
        self.stored: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)  # from-scratch runs, any state
        for r in self.all_runs:
            if _scratch(r):
                self.stored[(r["task"], r["family"])].append(r)
        # one run per seed and depth in a cell: two (other training settings resumed into the same
        # suite) would count one seed twice and pool two recipes (docs/SCIENCE.md#suites)
        self.duplicated: dict[Cell, list[Any]] = {}
        for cell, rs in self.stored.items():
            keys = [(r.get("seed"), r.get("n_layers")) for r in rs]
            dup = sorted({k[0] for k in keys if keys.count(k) > 1}, key=str)
            if dup:
                self.duplicated[cell] = dup
        # cells that more steps cannot bring to MIN_SEEDS trained seeds: not learned by this
        # architecture at this size within its budget (docs/SCIENCE.md#plateau)
        self.not_learned: dict[Cell, dict[str, Any]] = {
            cell: {**_cell(cell, "not learned"), **row} for cell, row in not_learned_cells(self.all_runs).items()
        }

    def shortfalls(
        self, cells: Iterable[Cell], usable: Mapping[Cell, Sequence[Mapping[str, Any]]], need: str | None = None
    ) -> list[dict[str, Any]]:
        """One row ``{task, family, kind, ...}`` per cell short of ``MIN_SEEDS`` usable seeds, by kind:
        ``duplicated`` (``seeds``: the seeds with more than one run), ``none stored`` (no run at
        all), ``not learned`` (:attr:`not_learned`), ``short`` (``k`` of ``of`` seeds, ``need``:
        what a usable seed needs beyond being trained, e.g. "conv1d_removal", ``untrained``: the
        cell's runs left out as untrained; with ``budget_stopped``, ``budget``, ``budget_best`` when
        some of those were stopped by their step budget while still improving)."""
        out: list[dict[str, Any]] = []
        for cell in sorted(set(cells)):
            if cell in self.duplicated:
                out.append({**_cell(cell, "duplicated"), "seeds": self.duplicated[cell]})
                continue
            if not self.stored.get(cell):
                out.append({**_cell(cell, "none stored"), "of": MIN_SEEDS})
                continue
            if cell in self.not_learned:
                out.append(self.not_learned[cell])
                continue
            k = len({r.get("seed") for r in usable.get(cell, [])})
            if k < MIN_SEEDS:
                untrained = [
                    r for r in self.stored[cell] if not is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))
                ]
                row = {**_cell(cell, "short"), "k": k, "of": MIN_SEEDS, "need": need, "untrained": len(untrained)}
                out.append({**row, **_budget_stopped(untrained)})
        return out

    def trained_read(
        self, cells: Iterable[Cell], usable: Mapping[Cell, Sequence[Mapping[str, Any]]], need: str | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """For claims 4–6, which read trained runs only: (``cells_short_of_seeds`` that block the
        verdict, ``untestable`` cells not learned). A cell not learned adds nothing to these claims
        and does not hold them back (docs/SCIENCE.md#plateau); its trained seeds, if any, are left
        out too (:meth:`learned`)."""
        rows = self.shortfalls(cells, usable, need)
        return [r for r in rows if r["kind"] != "not learned"], [r for r in rows if r["kind"] == "not learned"]

    def learned(self, cell: Cell) -> bool:
        """Whether ``cell`` is not one of :attr:`not_learned` (its runs count in claims 4–6)."""
        return cell not in self.not_learned

    def left_out_for(self, tasks: Iterable[str]) -> list[dict[str, Any]]:
        ts = set(tasks)
        return [r for r in self.left_out if r["task"] in ts]


def not_learned_cells(runs: Iterable[Mapping[str, Any]]) -> dict[Cell, dict[str, Any]]:
    """(task, family) → :func:`not_learned_cell`'s row, for each from-scratch cell of ``runs`` (one
    suite's study runs, random-init controls left out) that is not learned. The one place the
    claims and the views that count claim 4's runs (/probe-vs-causal) find those cells."""
    stored: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in runs:
        if _scratch(r) and not r.get("control"):
            stored[(r["task"], r["family"])].append(r)
    return {cell: row for cell, rs in stored.items() if (row := not_learned_cell(rs)) is not None}


def not_learned_cell(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Whether a cell's stored runs (from scratch, one per seed) make it *not learned* within its
    budget (docs/SCIENCE.md#plateau): at least ``MIN_SEEDS`` runs, fewer than ``MIN_SEEDS`` of them
    trained, and every untrained one stopped at a plateau below the criterion **under revision 3
    of the rule** (``science.plateau.plateau_revision``) — no run that more steps could still bring
    to it (``budget``, or a plateau of revision 1 or 2, which stopped runs still improving) and no
    seed missing. With every seed plateaued the cell is not learned by the architecture; with some
    trained, not learned by every seed: the cell cannot reach the trained seeds the statistics
    need, so the claims treat it the same way.

    Returns None, or ``{budget (steps), plateaued (seeds), trained (seeds), best: [lo, hi] best
    held-out accuracy of the plateaued seeds, or None, stopped: [lo, hi] steps the plateaued seeds
    stopped at, stages: the curriculum lengths below the training length they stopped at, sorted
    ([] when all stopped at the full length), stopped_runs: each plateaued seed's slope at the stop
    and budget share (:func:`stopped_run`)}``: a cell stopped at step 5,000 of a 40,000-step
    budget must not read as if it had used the budget."""
    untrained = [r for r in runs if not is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))]
    trained = len(runs) - len(untrained)
    if len(runs) < MIN_SEEDS or not untrained or trained >= MIN_SEEDS:
        return None
    if any(not _final_plateau(r) for r in untrained):
        return None
    best = [float(r["best_heldout_acc"]) for r in untrained if r.get("best_heldout_acc") is not None]
    steps = [int(r.get("steps") or 0) for r in untrained]
    stages = {
        length
        for r in untrained
        if (length := stop_length(r)) is not None
        and length < int((r.get("train_config") or {}).get("train_length") or 0)
    }
    return {
        "budget": max(int((r.get("train_config") or {}).get("max_steps") or r.get("steps") or 0) for r in runs),
        "plateaued": len(untrained),
        "trained": trained,
        "best": [min(best), max(best)] if best else None,
        "stopped": [min(steps), max(steps)],
        "stages": sorted(stages),
        "stopped_runs": [stopped_run(r) for r in sorted(untrained, key=lambda r: str(r.get("seed")))],
    }


def _final_plateau(run: Mapping[str, Any]) -> bool:
    """A plateau stop under revision 3, the only one that says more steps would not help."""
    return run.get("stop_reason") == "plateau" and plateau_revision(run.get("train_config")) == PLATEAU_REVISION


def stopped_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """An untrained run as the claims print it beside a cell: ``{seed, stop_reason, revision (the
    plateau rule it trained under, or None), steps, max_steps, budget_share, best, slope}``;
    ``slope``: :func:`science.plateau.stop_slope` (the run's ``stop_slope`` where the caller read it
    already, else from its ``loss_curve``), or None without a curve."""
    tc = run.get("train_config") or {}
    max_steps = int(tc.get("max_steps") or run.get("steps") or 0)
    steps = int(run.get("steps") or 0)
    slope = run["stop_slope"] if "stop_slope" in run else stop_slope(run)
    return {
        "seed": run.get("seed"),
        "stop_reason": run.get("stop_reason"),
        "revision": plateau_revision(tc),
        "steps": steps,
        "max_steps": max_steps,
        "budget_share": steps / max_steps if max_steps else None,
        "best": run.get("best_heldout_acc"),
        "slope": None if slope is None else {k: slope[k] for k in ("slope_pp", "lo_pp", "hi_pp", "window_steps")},
    }


def stop_length(run: Mapping[str, Any]) -> int | None:
    """The training length a run stopped at: its ``stop_length`` where given, else the last
    ``length`` of its loss curve (a curriculum stage below the training length when that stage
    plateaued); None when neither is there."""
    if run.get("stop_length") is not None:
        return int(run["stop_length"])
    for point in reversed(run.get("loss_curve") or []):
        if point.get("length") is not None:
            return int(point["length"])
    return None


def _budget_stopped(untrained: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Of a cell's untrained runs, those stopped while more steps could still decide
    (docs/SCIENCE.md#plateau): by their step budget (``stop_reason`` "budget") or by a plateau rule
    before revision 3, which stopped runs still improving. ``budget_stopped`` (runs stopped by the
    budget), ``old_plateau`` (runs stopped by revision 1 or 2), ``budget`` (their largest
    ``max_steps``), ``budget_best`` ([lo, hi] best held-out accuracy, or None) and
    ``stopped_runs`` (:func:`stopped_run`, each with its slope and budget share); {} when there
    are none."""
    rs = [
        r
        for r in untrained
        if r.get("stop_reason") == "budget" or (r.get("stop_reason") == "plateau" and not _final_plateau(r))
    ]
    if not rs:
        return {}
    best = [float(r["best_heldout_acc"]) for r in rs if r.get("best_heldout_acc") is not None]
    return {
        "budget_stopped": sum(r.get("stop_reason") == "budget" for r in rs),
        "old_plateau": sum(r.get("stop_reason") == "plateau" for r in rs),
        "budget": max(int((r.get("train_config") or {}).get("max_steps") or r.get("steps") or 0) for r in rs),
        "budget_best": [min(best), max(best)] if best else None,
        "stopped_runs": [stopped_run(r) for r in sorted(rs, key=lambda r: str(r.get("seed")))],
    }


def _run_curves(
    runs: Iterable[Mapping[str, Any]], probes: Iterable[Mapping[str, Any]], eval_length: int
) -> dict[Any, tuple[dict[int, float], float | None]]:
    """run_id → (curve at eval_length, mean majority baseline); runs with a gapped curve dropped."""
    ids = {r["id"] for r in runs}
    by_run: dict[Any, dict[int, float]] = defaultdict(dict)
    base: dict[Any, list[float]] = defaultdict(list)
    for p in probes:
        if (
            p.get("run_id") in ids
            and p.get("eval_length", eval_length) == eval_length
            and p.get("accuracy") is not None
        ):
            by_run[p["run_id"]][int(p["layer"])] = float(p["accuracy"])
            if p.get("majority_baseline") is not None:
                base[p["run_id"]].append(float(p["majority_baseline"]))
    out = {}
    for rid, c in by_run.items():
        try:
            P.normalise_keys(c)
        except ValueError:
            continue
        out[rid] = (c, float(np.mean(base[rid])) if base[rid] else None)
    return out


def _curve_cells(data: Data, tasks: Iterable[str]) -> dict[Cell, list[Mapping[str, Any]]]:
    """(task, family) → trained from-scratch runs with a complete curve (the most common depth)."""
    group: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in data.trained:
        if _scratch(r) and r["task"] in tasks and r["id"] in data.curves:
            group[(r["task"], r["family"])].append(r)
    out = {}
    for key, rs in group.items():
        depths = [max(data.curves[r["id"]][0]) for r in rs]
        common = max(set(depths), key=depths.count)
        out[key] = sorted([r for r, d in zip(rs, depths) if d == common], key=lambda r: r.get("seed", 0))
    return out


def _summary(data: Data, rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`_cell_summary` of the runs ``rs``, once per ``data`` and floor (claims 1–3 and the
    descriptive cells read the same cells; shared: not to be changed)."""
    key = (data.use_controls, tuple(r["id"] for r in rs))
    if key not in data.summaries:
        data.summaries[key] = _cell_summary(data, rs)
    return data.summaries[key]


def _cell_summary(data: Data, rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell's profile summary. Against each seed's random-init control when ``data.use_controls``
    and every seed has one (``floor`` = "control": the curve is then the seed-mean learned gain, its
    baseline 0); else against the majority rate (``floor`` = "majority"). ``majority_class`` is
    always the majority-floor class; ``classify(rule)`` gives the cell's class under another rule."""
    curves = [data.curves[r["id"]][0] for r in rs]
    bases = [data.curves[r["id"]][1] for r in rs]
    seeds = [r.get("seed") for r in rs]
    s = P.summarise_profiles(curves, bases, seeds=seeds)
    s["curve"] = P.mean_curve(curves)
    bl = [b for b in bases if b is not None]
    s["baseline"] = float(np.mean(bl)) if bl else None
    s["majority_class"] = s["profile_class"]
    s["floor"] = "majority"
    mc, base = s["curve"], s["baseline"]
    s["classify"] = P.classifier(mc, base)
    ctrls = [data.controls.get((r["task"], r["family"], r.get("seed"), max(c) + 1)) for r, c in zip(rs, curves)]
    known = [k for k in ctrls if k is not None]
    if (
        data.use_controls
        and ctrls
        and len(known) == len(ctrls)
        and all(sorted(k) == sorted(c) for k, c in zip(known, curves))
    ):
        a = P.summarise_against_controls(curves, known, seeds=seeds)
        margin, mk = a["margin"], a["control_curve"]
        s.update({k: a[k] for k in ("profile_class", "class_votes", "metrics", "per_seed", "stability", "margin")})
        s["curve"], s["baseline"], s["floor"], s["control_curve"] = P.learned_gain(mc, mk), 0.0, "control", mk
        s["classify"] = P.control_classifier(mc, mk, margin)
    return s


def _perm_greater(x: Sequence[float | None], y: Sequence[float | None]) -> dict[str, Any] | None:
    """:func:`science.stats.permutation_greater` of ``mean(x) > mean(y)`` over ``N_PERM`` splits,
    Nones dropped; None when either side has fewer than 2 values."""
    return permutation_greater(x, y, n_resamples=N_PERM)


def _significance(row: Mapping[str, Any]) -> bool | None:
    if row.get("significant") is not None:
        return bool(row["significant"])
    for key in ("p_holm", "p_value"):
        if row.get(key) is not None:
            return float(row[key]) < ALPHA
    return None


def _finish(claim: dict[str, Any], left_out: list[dict[str, Any]]) -> dict[str, Any]:
    claim["numbers"]["runs_left_out"] = left_out
    claim["numbers"]["runs_excluded_undertrained"] = len(left_out)
    claim["numbers"]["min_seeds"] = MIN_SEEDS
    return _clean(claim)
