"""The study's six claims → verdicts from stored results (docs/SCIENCE.md#claims).

Input: plain lists of dicts as the API serves them — no DB access, numpy/scipy only:

- ``runs``: ``{id, task, family, seed, n_layers, pretrained (None = trained from scratch),
  heldout_acc, early_stop_acc, behaviour: {"40": {"token_acc", "last_acc", "n"}, …}}``
- ``probes``: ``{run_id, layer, eval_length, accuracy, majority_baseline, …}``
- ``interventions``: ``{run_id, method, layer, eval_length, delta_pp, drop_rel_chance, refit_acc,
  refit_majority, p_value, p_holm, significant, …}`` (``conv1d_removal`` uses layer −2 for
  "every layer")
- ``patching``: ``{run_id, site, layer, position, eval_length, recovery, …}``

Output of :func:`evaluate_claims`: one dict per claim ``{id, title, verdict, numbers, detail,
views}`` with ``verdict`` ∈ {"supported", "contradicted", "not enough data"}.

Rules shared by every claim (every threshold is a module constant):

- **Trained runs only.** A run is read only when it is trained for its task
  (:func:`science.trained.is_trained`: held-out token accuracy at the training length reached
  its early-stop criterion). Every claim lists the runs it left out and why
  (``numbers.runs_left_out``).
- **Seeds.** A *cell* is a (task, family) of from-scratch runs. A claim reads every cell the
  study is meant to have for the tasks and families it is about (worker.params FAMILIES × TASKS,
  restricted to the claim's), stored or not. A verdict needs at least ``MIN_SEEDS`` trained
  seeds in every one of them; otherwise "not enough data", naming each short cell
  ("transformer × parity: 1 of 3 trained seeds"; a cell with no run at all: "mamba × dyck: 0 of
  3 trained seeds (no runs stored)"), so no verdict is given with a family or task missing.
- Profiles are computed at the training length ``EVAL_LENGTH`` (40) from each run's probe curve
  (:mod:`science.profiles`); a cell's class is the class of its seed-mean curve.
- **Against the control.** With random-init controls stored, claims 1–3 read each cell against
  its seeds' controls (the learned gain, ``science.profiles.summarise_against_controls``; a cell
  whose gain stays under the control margin is ``not above control``) and carry the verdict
  against the majority rate beside it (``numbers.majority_floor``). A cell without its controls
  falls back to the majority floor and is named (``numbers.cells_without_controls``).
- **Fragility.** Each cell row carries the stability of its class (the rule's thresholds moved by
  ``science.profiles.STABILITY_MARGINS``); ``numbers.fragile`` is True when a class read flips
  within them, ``numbers.class_condition_agreement`` counts the threshold settings under which the
  class condition comes out the same.
- **Not learned.** A cell whose every seed (≥ ``MIN_SEEDS``) stopped at a plateau below the
  criterion is "not learned by this architecture at this size within N steps"; it leaves claims
  1–3 as a named untestable part (``numbers.untestable``): in claims 1–2 a task whose Transformer
  cell is not learned is not tested, another family's cell leaves the class condition and the
  statistic; in claim 3 the family is not placed (docs/SCIENCE.md#plateau).

Per claim:

- **Claims 1 and 2 test the contrast.** Claim 1 (Parity, S3): Transformer ``gradual``,
  LSTM/GRU/Mamba/Mamba-2 ``late``; claim 2 (Dyck): Transformer ``early``, the others ``gradual``.
  Per task: the *class condition* holds when the Transformer cell has its expected class and at
  least ``MATCH_FRACTION`` of the other cells have theirs; the *statistic condition* holds when a
  one-sided permutation test of the per-seed statistic (late concentration, others >
  Transformer, for claim 1; AUC, Transformer > others, for claim 2) gives p < ``ALPHA`` after
  Holm's adjustment across all the tests of claims 1 and 2 together. Per task: both hold →
  supported, neither → contradicted, one without the other → not enough data (mixed). The
  claim: supported when every task read supports it, contradicted when one contradicts it,
  else not enough data. All five families identical → contradicted.
- **Claim 3**: per family with all of S3, Parity and Dyck, ``d(S3, Parity) < d(S3, Dyck)``
  (seed-mean normalised curves); supported when that holds in ≥ ``MATCH_FRACTION`` of the
  families.
- **Claim 4 (readable ≠ necessary), a necessity test.** Per trained run with a probe curve and
  an edit from ``DECOUPLING_METHODS`` (the first present): an edit *removed* the variable only
  where its refit probe is within ``REFIT_TOL`` of the majority rate; other edits are reported as
  "not removed" and never count as damage. A run is evaluable when the edit removed the
  variable at one of its near-best probe layers; it is *decoupled* when the most damaging layer
  among the removed ones is not near-best, is at least ``DECOUPLING_MARGIN_PP`` more damaging
  than the near-best layers, and (when stored) significant after Holm; every drop is read beyond its
  rank-matched random removal (``delta_pp − random_delta_pp`` where stored). The decoupled share, per
  group (from scratch / pretrained), carries a Wilson 95 % interval: a group supports the claim
  when the interval's lower end is above ``DECOUPLED_SHARE_MIN``, contradicts it when its upper
  end is below, and is inconclusive otherwise; a pretrained group needs ``MIN_SEEDS`` evaluable
  runs. Supported when a group supports; contradicted when every group with runs contradicts.
  Beside it, descriptive and not part of the verdict: state-site patching recovery at the last
  block, middle position, mean and t-interval over trained runs (or "no state patching
  stored"), and per family the layer whose state patch at the middle position recovers most.
  In stacked recurrent models the last block alone can read ~0: the blocks below it still
  carry the corrupted state.
- **Claim 5 (Conv1D)**: ``conv1d_removal`` of every layer (layer −2) on trained Mamba/Mamba-2
  runs, read as ``drop_rel_chance`` (share of the gain over chance lost; > 0 = a drop), with a
  t-interval over seeds per task. Conditions: S3 drop > 0 (interval above 0); Parity drop > 0;
  S3 drop > Parity drop (one-sided permutation test, p < ``ALPHA``); Dyck drop not significant
  (interval reaches 0). Needs conv1d_removal on two of the three tasks and ``MIN_SEEDS`` trained
  seeds in each of the six SSM cells;
  supported when every evaluated condition holds.
- **Claim 6 (behaviour)**, trained runs, seed means of token accuracy per stored length:
  (a) LSTM and GRU ≥ ``PERFECT_ACC`` at every stored length on Parity and S3; (b) on Parity and
  on S3 the mean accuracy at the lengths beyond training is ordered recurrent > SSM >
  Transformer; (c) Mamba on Parity falls with length (longest length ≥ ``FALL_PP`` below 40 and
  a negative least-squares slope). Names the lengths it used. Supported when every sub-claim
  that can be evaluated holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as _st

from science import profiles as P
from layerscope_core.registry import FAMILIES as STUDY_FAMILIES
from layerscope_core.registry import TASKS as STUDY_TASKS
from layerscope_core.registry import STACKED_VARIANTS, TRAIN_LENGTH, families_where
from science.stats import ALPHA, bounds_for, holm, t_interval, wilson_interval
from science.trained import is_trained, untrained_reason

__all__ = ["CLAIM_TITLES", "CONTRADICTED", "MIN_SEEDS", "NOT_ENOUGH", "SUPPORTED", "edit_removed", "evaluate_claims", "run_decouplings"]

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
REFIT_TOL = 0.02  # refit probe within 2 pp of the majority rate = the variable was removed
DECOUPLED_SHARE_MIN = 0.10  # decoupling must be more than a one-in-ten fluke
PERFECT_ACC = 0.99
FALL_PP = 5.0
N_PERM = 10_000
STATE_SITE = "state"

CLAIM_TITLES = {
    1: "Prefix-update tasks: recurrent models and SSMs readable only at the last layer, Transformers gradual",
    2: "Bounded Dyck flips the pattern: Transformers early, recurrent models and SSMs gradual",
    3: "S3 groups with Parity, not with Dyck: computational structure, not commutativity",
    4: "The most readable layer is not always the causally necessary one",
    5: "Conv1D importance is task dependent: S3 > Parity > Dyck (n.s.)",
    6: "Behaviour: recurrent models length-generalise; recurrent > SSM > Transformer; Mamba fails on Parity",
}

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


def _ci(values: Sequence[float], quantity: str | None = None) -> dict[str, Any]:
    """Mean and 95% t-interval over ``values``; ``quantity`` names a bounded one (science.stats
    BOUNDS, e.g. "accuracy"), whose interval is clipped to its range."""
    vals = [v for v in values if v is not None]
    m, lo, hi = t_interval(vals, bounds=bounds_for(quantity)) if vals else (None, None, None)
    return {"mean": m, "lo": lo, "hi": hi, "n": len(vals)}


def _claim(cid: int, verdict: str, numbers: dict[str, Any], detail: str, views: list[str]) -> dict[str, Any]:
    return {"id": cid, "title": CLAIM_TITLES[cid], "verdict": verdict, "numbers": numbers,
            "detail": detail, "views": views}


def _scratch(run: Mapping[str, Any]) -> bool:
    return not run.get("pretrained")


def _f2(x: float) -> str:
    return f"{x:.2f}".replace("-0.00", "0.00")  # no negative zero in prose


def _cell_name(cell: Cell) -> str:
    return f"{cell[1]} × {cell[0]}"


def expected_cells(tasks: Iterable[str], families: Iterable[str] = STUDY_FAMILIES) -> list[Cell]:
    """Every (task, family) a from-scratch study is meant to have for these tasks and families:
    the study's families × tasks (worker.params) restricted to the ones a claim is about, so a
    cell with no runs at all is counted short rather than skipped."""
    ts, fs = set(tasks), set(families)
    return [(t, f) for t in STUDY_TASKS if t in ts for f in STUDY_FAMILIES if f in fs]


class Data:
    """The inputs, split once: trained runs, their curves, and every stored run by cell."""

    def __init__(self, runs: Sequence[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
                 interventions: Sequence[Mapping[str, Any]], patching: Sequence[Mapping[str, Any]],
                 controls: Sequence[Mapping[str, Any]] | None = None) -> None:
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
        self.trained = [r for r in self.all_runs if is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))]
        trained_ids = {r["id"] for r in self.trained}
        self.left_out = [
            {"run_id": r["id"], "task": r.get("task"), "family": r.get("family"), "seed": r.get("seed"),
             "pretrained": r.get("pretrained"), "reason": untrained_reason(r.get("heldout_acc"), r.get("early_stop_acc"))}
            for r in self.all_runs if r["id"] not in trained_ids]
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
        # cells whose every stored run stopped at a plateau below the criterion: not learned by this
        # architecture at this size within its budget (docs/SCIENCE.md#plateau)
        self.not_learned: dict[Cell, str] = {}
        for cell, rs in self.stored.items():
            if len(rs) >= MIN_SEEDS and all(r.get("stop_reason") == "plateau" and
                                            not is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in rs):
                budget = max(int((r.get("train_config") or {}).get("max_steps") or r.get("steps") or 0) for r in rs)
                best = [r.get("best_heldout_acc") for r in rs if r.get("best_heldout_acc") is not None]
                self.not_learned[cell] = (
                    f"{_cell_name(cell)}: not learned by this architecture at this size within {budget:,} steps "
                    f"({len(rs)} of {len(rs)} seeds plateaued"
                    + (f"; best held-out accuracy {min(best):.3f}–{max(best):.3f}" if best else "") + ")")
    def shortfalls(self, cells: Iterable[Cell], usable: Mapping[Cell, Sequence[Mapping[str, Any]]],
                   what: str = "trained seeds") -> list[str]:
        """'family × task: k of MIN_SEEDS trained seeds (u untrained)' for each cell short of seeds;
        a cell with no stored run at all reads '0 of MIN_SEEDS trained seeds (no runs stored)'."""
        out = []
        for cell in sorted(set(cells)):
            if cell in self.duplicated:
                out.append(f"{_cell_name(cell)}: more than one run for seed(s) "
                           f"{', '.join(map(str, self.duplicated[cell]))} (runs made with other settings in the "
                           "same suite; one suite holds one run per seed — run other settings under another name)")
                continue
            if not self.stored.get(cell):
                out.append(f"{_cell_name(cell)}: 0 of {MIN_SEEDS} trained seeds (no runs stored)")
                continue
            if cell in self.not_learned:
                out.append(self.not_learned[cell])
                continue
            k = len({r.get("seed") for r in usable.get(cell, [])})
            if k < MIN_SEEDS:
                n_un = sum(not is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in self.stored[cell])
                out.append(f"{_cell_name(cell)}: {k} of {MIN_SEEDS} {what}"
                           + (f" ({n_un} untrained run(s) left out)" if n_un else ""))
        return out

    def left_out_for(self, tasks: Iterable[str]) -> list[dict[str, Any]]:
        ts = set(tasks)
        return [r for r in self.left_out if r["task"] in ts]


def _run_curves(runs: Iterable[Mapping[str, Any]], probes: Iterable[Mapping[str, Any]],
                eval_length: int) -> dict[Any, tuple[dict[int, float], float | None]]:
    """run_id → (curve at eval_length, mean majority baseline); runs with a gapped curve dropped."""
    ids = {r["id"] for r in runs}
    by_run: dict[Any, dict[int, float]] = defaultdict(dict)
    base: dict[Any, list[float]] = defaultdict(list)
    for p in probes:
        if p.get("run_id") in ids and p.get("eval_length", eval_length) == eval_length and p.get("accuracy") is not None:
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
    s["classify"] = lambda rule: P.profile_class(mc, base, rule)
    ctrls = [data.controls.get((r["task"], r["family"], r.get("seed"), max(c) + 1)) for r, c in zip(rs, curves)]
    if data.use_controls and ctrls and all(k is not None and sorted(k) == sorted(c) for k, c in zip(ctrls, curves)):
        a = P.summarise_against_controls(curves, ctrls, seeds=seeds)  # type: ignore[arg-type]
        margin, mk = a["margin"], a["control_curve"]
        s.update({k: a[k] for k in ("profile_class", "class_votes", "metrics", "per_seed", "stability", "margin")})
        s["curve"], s["baseline"], s["floor"], s["control_curve"] = P.learned_gain(mc, mk), 0.0, "control", mk
        s["classify"] = lambda rule: P.control_class(mc, mk, margin + (rule.flat_margin - P.FLAT_MARGIN), rule)
    return s


def _perm_greater(x: Sequence[float | None], y: Sequence[float | None]) -> dict[str, Any] | None:
    """One-sided two-sample permutation test of mean(x) > mean(y) (scipy.stats.permutation_test;
    exact when every split fits in N_PERM)."""
    xa = [v for v in x if v is not None]
    ya = [v for v in y if v is not None]
    if len(xa) < 2 or len(ya) < 2:
        return None
    res = _st.permutation_test((np.asarray(xa), np.asarray(ya)), lambda a, b, axis: a.mean(axis) - b.mean(axis),
                               permutation_type="independent", alternative="greater",
                               n_resamples=N_PERM, rng=np.random.default_rng(0))
    return {"diff": float(np.mean(xa) - np.mean(ya)), "p": float(res.pvalue), "n_x": len(xa), "n_y": len(ya)}


def _significance(row: Mapping[str, Any]) -> bool | None:
    if row.get("significant") is not None:
        return bool(row["significant"])
    for key in ("p_holm", "p_value"):
        if row.get(key) is not None:
            return float(row[key]) < ALPHA
    return None


def _left_out_note(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    shown = "; ".join(f"{r['family']} × {r['task']} seed {r['seed']}: {r['reason']}" for r in rows[:3])
    more = f"; and {len(rows) - 3} more" if len(rows) > 3 else ""
    return f" Left out {len(rows)} untrained run(s): {shown}{more}."


def _finish(claim: dict[str, Any], left_out: list[dict[str, Any]]) -> dict[str, Any]:
    claim["numbers"]["runs_left_out"] = left_out
    claim["numbers"]["runs_excluded_undertrained"] = len(left_out)
    claim["numbers"]["min_seeds"] = MIN_SEEDS
    if left_out and not claim["detail"].rstrip().endswith("."):
        claim["detail"] = claim["detail"].rstrip() + "."
    claim["detail"] += _left_out_note(left_out)
    return _clean(claim)


# ----------------------------------------------------------------------------- claims 1 and 2

CONTRAST = {
    1: {"tasks": PREFIX_TASKS, "expected": {TRANSFORMER: "gradual", **dict.fromkeys(NON_TRANSFORMER, "late")},
        "metric": "late_concentration", "transformer_higher": False},
    2: {"tasks": (STACK_TASK,), "expected": {TRANSFORMER: "early", **dict.fromkeys(NON_TRANSFORMER, "gradual")},
        "metric": "auc", "transformer_higher": True},
}


def _cell_row(task: str, fam: str, s: Mapping[str, Any], expected: str) -> dict[str, Any]:
    m = s["metrics"]
    return {
        "task": task, "family": fam, "n": s["n"], "seeds": s["seeds"],
        "profile_class": s["profile_class"], "class_votes": s["class_votes"],
        "expected": expected, "matches": s["profile_class"] == expected,
        "floor": s.get("floor", "majority"), "majority_class": s.get("majority_class", s["profile_class"]),
        "stability": {k: (s.get("stability") or {}).get(k) for k in ("agree", "of", "stable")},
        **{k: {kk: m[k][kk] for kk in ("mean", "lo", "hi", "n")}
           for k in ("late_concentration", "first_95", "auc", "gain_over_majority", "gain_over_emb")},
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
        done = {f: _summary(data, rs)["profile_class"] for (task, f), rs in info["cells"].items()
                if task == t and f in FAMILIES and (task, f) not in data.duplicated
                and len({r.get("seed") for r in rs}) >= MIN_SEEDS and len(rs) == len(data.stored.get((task, f), []))}
        if TRANSFORMER in done and done[TRANSFORMER] != expected[TRANSFORMER]:
            out.append(f"on {t} the transformer is {done[TRANSFORMER]}, not {expected[TRANSFORMER]}")
            continue
        wrong = sorted(f for f, c in done.items() if f != TRANSFORMER and c != expected[f])
        if n_others - len(wrong) < MATCH_FRACTION * n_others:
            out.append(f"on {t} {', '.join(f'{f} is {done[f]}' for f in wrong)} where {expected[wrong[0]]} is "
                       f"expected: at most {n_others - len(wrong)} of {n_others} other families can match "
                       f"(≥ {MATCH_FRACTION:.0%} needed)")
    return out


def _contrast_claim(cid: int, spec: Mapping[str, Any], info: Mapping[str, Any], data: Data,
                    n_tests: int) -> dict[str, Any]:
    tasks, expected, metric = spec["tasks"], spec["expected"], spec["metric"]
    if cid == 1:
        views = [f"/reversal?task={t}" for t in tasks] + [f"/curves?task={t}&eval_length={EVAL_LENGTH}" for t in tasks]
    else:
        views = [f"/reversal?task={STACK_TASK}", f"/curves?task={STACK_TASK}&eval_length={EVAL_LENGTH}"]
    numbers: dict[str, Any] = {"match_fraction_required": MATCH_FRACTION, "alpha": ALPHA, "test_statistic": metric,  # of the contrast test, not the cell table
                               "floor": "random-init control" if data.use_controls else "majority rate"}
    if info.get("untestable"):
        numbers["untestable"] = info["untestable"]
    untestable_note = (" Untestable here: " + "; ".join(info["untestable"]) + ".") if info.get("untestable") else ""
    left = data.left_out_for(tasks)
    if not info["usable_tasks"]:
        return _finish(_claim(cid, NOT_ENOUGH, {**numbers, "cells": []},
                              (f"needs trained runs with probe curves at L={EVAL_LENGTH} for every family on "
                               f"{' and '.join(tasks)}; none stored" if not untestable_note else
                               "no task of this claim can be tested." + untestable_note), views), left)
    if info["short"]:
        numbers["cells_short_of_seeds"] = info["short"]
        ruled_out = _class_condition_ruled_out(spec, info, data)
        if ruled_out:
            numbers["cannot_be_supported"] = ruled_out
        return _finish(_claim(cid, NOT_ENOUGH, {**numbers, "cells": []},
                              f"needs ≥ {MIN_SEEDS} trained seeds in every cell: " + "; ".join(info["short"])
                              + (". Whatever the missing cells show, it cannot be supported: " + "; ".join(ruled_out)
                                 if ruled_out else ""), views), left)
    rows = [_cell_row(t, f, s, expected[f]) for (t, f), s in sorted(info["summaries"].items())]
    numbers["cells"] = rows
    fragile = [r for r in rows if r["stability"]["stable"] is False]
    numbers["fragile"] = bool(fragile)
    numbers["fragile_cells"] = [f"{r['family']} × {r['task']}: {r['profile_class']} under {r['stability']['agree']} "
                                f"of {r['stability']['of']} threshold settings" for r in fragile]
    numbers["class_condition_agreement"] = _class_condition_agreement(spec, info)
    without_controls = [c for c in rows if c["floor"] != "control"]
    if data.use_controls and without_controls:
        numbers["cells_without_controls"] = [f"{r['family']} × {r['task']}" for r in without_controls]
    key = "test_auc_transformer_gt_other" if spec["transformer_higher"] else "test_late_concentration_other_gt_transformer"
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
        per_task[t] = {"class_condition": class_ok, "statistic_condition": stat_ok,
                       "verdict": _contrast_task_verdict(class_ok, stat_ok)}
        parts.append(f"{t}: transformer {tf['profile_class'] if tf else '—'} (expected {expected[TRANSFORMER]}), "
                     f"{sum(r['matches'] for r in others)}/{len(others)} others as expected; per-seed {metric} "
                     f"difference {test['diff']:+.3f}, Holm p = {test['p_holm']:.3g}"
                     + (f" (opposite direction: p = {test['p_opposite']:.3g}, unadjusted)"
                        if test.get("p_opposite") is not None else "") + f" → {per_task[t]['verdict']}"
                     + ("" if class_ok == stat_ok else
                        f" (mixed: the {'class' if class_ok else 'statistic'} condition holds, the "
                        f"{'statistic' if class_ok else 'class'} condition does not)"))
    if undefined:
        return _finish(_claim(cid, NOT_ENOUGH, numbers,
                              f"per-seed {metric} undefined (curves without gain) on {', '.join(undefined)}", views), left)
    numbers["per_task"] = per_task
    task_verdicts = [v["verdict"] for v in per_task.values()]
    verdict = (SUPPORTED if all(v == SUPPORTED for v in task_verdicts)
               else CONTRADICTED if CONTRADICTED in task_verdicts else NOT_ENOUGH)
    detail = (f"Supported when, on every task, the transformer's class differs as claimed (others ≥ "
              f"{MATCH_FRACTION:.0%} as expected) and the per-seed {metric} differs in that direction at p < {ALPHA} "
              f"after Holm over {n_tests} test(s); contradicted when both fail on a task; mixed evidence is not "
              "enough data. " + "; ".join(parts) + ".")
    mism = [f"{r['family']} on {r['task']}: {r['profile_class']} (expected {r['expected']})" for r in rows if not r["matches"]]
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


# ----------------------------------------------------------------------------- claim 3


def claim_3(data: Data) -> dict[str, Any]:
    tasks = ("s3", "parity", STACK_TASK)
    # a family with a cell not learned within its budget cannot place S3: it leaves the claim, named
    gone = {f for (t, f) in data.not_learned if t in tasks}
    untestable = [data.not_learned[c] for c in expected_cells(tasks, FAMILIES) if c in data.not_learned]
    cells = _curve_cells(data, tasks)
    fams = [f for f in FAMILIES if f not in gone and all(data.stored.get((t, f)) for t in tasks)]
    any_stored = any(data.stored.get(c) for c in expected_cells(tasks, FAMILIES))
    views = ["/reversal?task=s3", "/curves?task=s3", "/curves?task=parity", "/curves?task=dyck"]
    numbers: dict[str, Any] = {"families": [], "match_fraction_required": MATCH_FRACTION,
                               "floor": "random-init control" if data.use_controls else "majority rate"}
    if untestable:
        numbers["untestable"] = untestable
    left = data.left_out_for(tasks)
    if not any_stored:
        return _finish(_claim(3, NOT_ENOUGH, numbers, "needs every family with runs on s3, parity and dyck; none "
                              "stored", views), left)
    if not fams and untestable:
        return _finish(_claim(3, NOT_ENOUGH, numbers, "no family can be tested. Untestable here: "
                              + "; ".join(untestable) + ".", views), left)
    short = data.shortfalls(expected_cells(tasks, [f for f in FAMILIES if f not in gone]), cells)
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(3, NOT_ENOUGH, numbers,
                              f"needs ≥ {MIN_SEEDS} trained seeds in every cell: " + "; ".join(short), views), left)
    per_family = []
    for f in fams:
        s3, par, dy = (_summary(data, cells[(t, f)]) for t in tasks)
        d_sp = P.profile_distance(s3["curve"], par["curve"], s3["baseline"], par["baseline"])
        d_sd = P.profile_distance(s3["curve"], dy["curve"], s3["baseline"], dy["baseline"])
        per_family.append({"family": f, "d_s3_parity": d_sp, "d_s3_dyck": d_sd, "closer_to_parity": d_sp < d_sd,
                           "class_s3": s3["profile_class"], "class_parity": par["profile_class"],
                           "class_dyck": dy["profile_class"], "class_votes_s3": s3["class_votes"],
                           "class_votes_parity": par["class_votes"], "class_votes_dyck": dy["class_votes"]})
    numbers["families"] = per_family
    share = sum(r["closer_to_parity"] for r in per_family) / len(per_family)
    numbers["share_closer_to_parity"] = share
    numbers["gap_dyck_minus_parity"] = _ci([r["d_s3_dyck"] - r["d_s3_parity"] for r in per_family])
    numbers["same_class_as_parity"] = sum(r["class_s3"] == r["class_parity"] for r in per_family)
    verdict = SUPPORTED if share >= MATCH_FRACTION else CONTRADICTED
    detail = (f"S3's normalised layer curve{' (learned gain over the random-init control)' if data.use_controls else ''} "
              f"is closer to Parity's than to Dyck's in "
              f"{sum(r['closer_to_parity'] for r in per_family)}/{len(per_family)} families "
              f"(need ≥ {MATCH_FRACTION:.0%}); same class as Parity in {numbers['same_class_as_parity']}."
              + (" Untestable here: " + "; ".join(untestable) + "." if untestable else ""))
    return _finish(_claim(3, verdict, numbers, detail, views), left)


# ----------------------------------------------------------------------------- claim 4


def _removed(row: Mapping[str, Any]) -> bool:
    """The edit removed the variable: its refit probe is within REFIT_TOL of the majority rate."""
    acc, maj = row.get("refit_acc"), row.get("refit_majority")
    return acc is not None and maj is not None and float(acc) - float(maj) <= REFIT_TOL + 1e-12


def beyond_random(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """An edit row read against its rank-matched random removal (docs/SCIENCE.md#random-removal):
    ``delta_pp`` becomes ``delta_pp − random_delta_pp`` (the drop beyond removing as many random
    directions; the raw value kept as ``delta_raw_pp``); rows without a random control unchanged."""
    if row.get("random_delta_pp") is None or row.get("delta_pp") is None:
        return row
    return {**row, "delta_pp": float(row["delta_pp"]) - float(row["random_delta_pp"]), "delta_raw_pp": row["delta_pp"]}


def _run_decoupling(run: Mapping[str, Any], curve: dict[int, float], rows: list[Mapping[str, Any]],
                    method: str) -> dict[str, Any]:
    rows = [beyond_random(r) for r in rows]
    removed = [r for r in rows if _removed(r)]
    not_removed = sorted(int(r["layer"]) for r in rows if not _removed(r))
    near = P.near_best_layers(curve)
    base = {"run_id": run["id"], "task": run["task"], "family": run["family"], "seed": run.get("seed"),
            "pretrained": run.get("pretrained"), "method": method, "best_layer": P.best_layer(curve),
            "near_best_layers": near, "not_removed_layers": not_removed,
            "removed_layers": sorted(int(r["layer"]) for r in removed),
            "beyond_random": all(r.get("delta_raw_pp") is not None for r in rows) if rows else None}
    if not any(int(r["layer"]) in near for r in removed):
        return {**base, "status": "not removed", "meaningfully_decoupled": None}
    d = P.decoupling(curve, removed, method=method)
    sig = [_significance(r) for r in removed if int(r["layer"]) == d["damaging_layer"]]
    known = [s for s in sig if s is not None]
    significant = (sum(known) > len(known) / 2) if known else None
    at_near = d["delta_near_best_pp"] if d["delta_near_best_pp"] is not None else 0.0
    margin = at_near - d["delta_at_damaging_pp"]
    decoupled = bool(d["decoupled"]) and margin >= DECOUPLING_MARGIN_PP and significant is not False
    return {**base, **d, "margin_pp": margin, "significant": significant, "status": "evaluated",
            "meaningfully_decoupled": decoupled}


def edit_removed(row: Mapping[str, Any]) -> bool:
    """Claim 4's removal test for one edit row (``refit_acc``, ``refit_majority``, 0..1): True when
    the refit probe is within :data:`REFIT_TOL` of the majority rate. Rows without a refit → False."""
    return _removed(row)


def run_decouplings(runs: Sequence[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
                    interventions: Sequence[Mapping[str, Any]], *, eval_length: int = EVAL_LENGTH,
                    method: str | None = None) -> list[dict[str, Any]]:
    """Claim 4's per-run rule, for views that show it run by run (the /probe-vs-causal summary).

    For each run in ``runs`` (``{id, task, family, seed, pretrained}``; trained or not: the
    caller filters) with a probe curve at ``eval_length`` and edits: the edit is ``method``, or
    by default the first of :data:`DECOUPLING_METHODS` present. An edit counts only where its
    refit probe is within :data:`REFIT_TOL` of the majority rate (else ``status = "not
    removed"``); near-best probe layers (a tie within ``science.profiles.NEAR_BEST_TOL``) are
    never "decoupled" from each other; ``meaningfully_decoupled`` needs
    :data:`DECOUPLING_MARGIN_PP` and significance as in claim 4.

    Returns:
        one dict per evaluable run: the fields of claim 4's ``numbers["runs"]`` rows.
    """
    by_run: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in interventions:
        if r.get("eval_length", eval_length) == eval_length and int(r.get("layer", -2)) >= -1 \
                and r.get("delta_pp") is not None \
                and (r.get("method") == method if method else r.get("method") in DECOUPLING_METHODS):
            by_run[r["run_id"]].append(r)
    curves = _run_curves(runs, probes, eval_length)
    out = []
    for run in runs:
        rid = run["id"]
        if rid not in curves or rid not in by_run:
            continue
        present = {r.get("method") for r in by_run[rid]}
        m = method or next(x for x in DECOUPLING_METHODS if x in present)
        out.append(_run_decoupling(run, curves[rid][0], [r for r in by_run[rid] if r["method"] == m], m))
    return out


def _group_verdict(evaluated: list[dict[str, Any]]) -> dict[str, Any]:
    k = sum(bool(r["meaningfully_decoupled"]) for r in evaluated)
    share, lo, hi = wilson_interval(k, len(evaluated))
    if not evaluated:
        verdict = NOT_ENOUGH
    elif lo > DECOUPLED_SHARE_MIN:
        verdict = SUPPORTED
    elif hi < DECOUPLED_SHARE_MIN:
        verdict = CONTRADICTED
    else:
        verdict = NOT_ENOUGH
    return {"decoupled": k, "n": len(evaluated), "share": share, "lo": lo, "hi": hi, "verdict": verdict}


def _state_patching(data: Data) -> dict[str, Any] | str:
    info = {r["id"]: r for r in data.trained}
    per_run: dict[Any, list[float]] = defaultdict(list)
    for p in data.patching:
        run = info.get(p.get("run_id"))
        if (run is None or p.get("site") != STATE_SITE or p.get("recovery") is None or run.get("n_layers") is None
                or int(p["layer"]) != int(run["n_layers"]) - 1
                or int(p["position"]) != int(p.get("eval_length", EVAL_LENGTH)) // 2):
            continue
        per_run[run["id"]].append(float(p["recovery"]))
    if not per_run:
        return "no state patching stored"
    out: dict[str, Any] = {}
    for name, pick in (("scratch", _scratch), ("pretrained", lambda r: not _scratch(r))):
        vals = [float(np.mean(v)) for rid, v in per_run.items() if pick(info[rid])]
        if vals:
            out[name] = {**_ci(vals), "runs": [rid for rid in per_run if pick(info[rid])]}
    out["site"], out["where"] = STATE_SITE, "last block, position eval_length // 2"
    return out


def _state_patching_by_layer(data: Data) -> list[dict[str, Any]]:
    """Per family (from scratch) or pretrained model, and task: the layer whose ``state`` patch at the
    middle position recovers most of the logit gap, as a seed mean over trained runs.

    The layer is the best of the seed-mean recoveries; ``best_layer_per_run`` lists each run's own
    best layer, which can differ between seeds. Descriptive only. Patching one block's state leaves the blocks below it corrupted, and in a
    stacked recurrent model they write the corrupted state back in at every later position, so
    the last block alone can recover ~0 while layer 0 recovers nearly all of it."""
    info = {r["id"]: r for r in data.trained}
    per: dict[str, dict[int, dict[Any, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for p in data.patching:
        run = info.get(p.get("run_id"))
        if (run is None or p.get("site") != STATE_SITE or p.get("recovery") is None
                or int(p["position"]) != int(p.get("eval_length", EVAL_LENGTH)) // 2):
            continue
        key = f"{run['family']} × {run['task']}" if _scratch(run) else f"{run['pretrained']} × {run['task']}"
        per[key][int(p["layer"])][run["id"]].append(float(p["recovery"]))
    out = []
    for key in sorted(per):
        means = {layer: [float(np.mean(v)) for v in runs.values()] for layer, runs in per[key].items()}
        best = max(means, key=lambda layer: float(np.mean(means[layer])))
        last = max(means)
        run_ids = sorted({rid for runs in per[key].values() for rid in runs}, key=str)
        per_run = [max((layer for layer in per[key] if rid in per[key][layer]),
                       key=lambda layer, rid=rid: float(np.mean(per[key][layer][rid]))) for rid in run_ids]
        out.append({"family": key, "best_layer": best, "best_recovery": _ci(means[best]),
                    "last_layer": last, "last_recovery": _ci(means[last]), "best_layer_per_run": sorted(per_run)})
    return out


STATE_PATCH_NOTE = ("Why the last block can read ~0 in stacked recurrent models: patching one block's state leaves "
                    "the blocks below it corrupted, and their outputs carry the corrupted information back into the "
                    "patched block at every later position. Descriptive, not part of the verdict.")


def claim_4(data: Data) -> dict[str, Any]:
    by_run: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in data.interventions:
        if r.get("eval_length", EVAL_LENGTH) == EVAL_LENGTH and int(r.get("layer", -2)) >= -1 \
                and r.get("method") in DECOUPLING_METHODS and r.get("delta_pp") is not None:
            by_run[r["run_id"]].append(r)
    per_run = []
    for run in data.trained:
        rid = run["id"]
        if rid not in data.curves or rid not in by_run:
            continue
        methods = {r.get("method") for r in by_run[rid]}
        method = next(m for m in DECOUPLING_METHODS if m in methods)
        per_run.append(_run_decoupling(run, data.curves[rid][0], [r for r in by_run[rid] if r["method"] == method],
                                       method))
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in per_run:
        if not r["pretrained"]:
            usable[(r["task"], r["family"])].append(r)
    # the from-scratch group reads every family × task of the study (a pretrained-only suite has none)
    short = (data.shortfalls(expected_cells(STUDY_TASKS, STUDY_FAMILIES), usable, "trained seeds with probes and edits")
             if data.stored else [])
    groups = {}
    for name, pick in (("scratch", lambda r: not r["pretrained"]), ("pretrained", lambda r: bool(r["pretrained"]))):
        rows = [r for r in per_run if pick(r)]
        if not rows:
            continue
        g = _group_verdict([r for r in rows if r["status"] == "evaluated"])
        g["not_removed"] = sum(r["status"] == "not removed" for r in rows)
        if name == "scratch" and short:
            g["verdict"], g["why"] = NOT_ENOUGH, "cells short of seeds: " + "; ".join(short)
        elif name == "pretrained" and g["n"] < MIN_SEEDS:
            g["verdict"], g["why"] = NOT_ENOUGH, f"{g['n']} of {MIN_SEEDS} evaluable pretrained runs"
        groups[name] = g
    patch = _state_patching(data)
    numbers: dict[str, Any] = {
        "runs": per_run, "groups": groups, "refit_tolerance": REFIT_TOL, "margin_pp_required": DECOUPLING_MARGIN_PP,
        "decoupled_share_min": DECOUPLED_SHARE_MIN, "state_patching": patch,
        "decoupled_share_scratch": groups.get("scratch", {}).get("share"),
        "decoupled_share_pretrained": groups.get("pretrained", {}).get("share"),
    }
    by_layer = _state_patching_by_layer(data)
    if by_layer:
        numbers["state_patching_best_layer"] = by_layer
    if short:
        numbers["cells_short_of_seeds"] = short
    views = ["/probe-vs-causal", "/patching"]
    left = data.left_out
    if not groups:
        return _finish(_claim(4, NOT_ENOUGH, numbers,
                              f"needs trained runs with probe curves and {'/'.join(DECOUPLING_METHODS)} edits at "
                              f"L={EVAL_LENGTH}", views), left)
    verdicts = [g["verdict"] for g in groups.values()]
    if SUPPORTED in verdicts:
        verdict = SUPPORTED
    elif all(v == CONTRADICTED for v in verdicts):
        verdict = CONTRADICTED
    else:
        verdict = NOT_ENOUGH
    parts = []
    for name, g in groups.items():
        iv = "" if g["share"] is None else f" = {g['share']:.0%} [95% Wilson {g['lo']:.0%}, {g['hi']:.0%}]"
        parts.append(f"{'from scratch' if name == 'scratch' else 'pretrained'}: {g['decoupled']}/{g['n']} decoupled{iv}, "
                     f"{g['not_removed']} run(s) whose edit left the variable readable (not removed) → {g['verdict']}"
                     + (f" ({g['why']})" if g.get("why") else ""))
    patch_txt = patch if isinstance(patch, str) else "; ".join(
        f"{k}: {_f2(v['mean'])}" + (f" [{_f2(v['lo'])}, {_f2(v['hi'])}]" if v.get("lo") is not None else "")
        + f" (n={v['n']})"
        for k, v in patch.items() if isinstance(v, dict))
    detail = (f"An edit counts only where its refit probe is within {REFIT_TOL * 100:g} pp of the majority rate; "
              f"a group supports the claim when the Wilson interval of its decoupled share is above "
              f"{DECOUPLED_SHARE_MIN:.0%}. " + "; ".join(parts) + f". State patching at the last block, mid-position: "
              f"{patch_txt}.")
    if by_layer:
        detail += (" Layer whose state patch at the middle position recovers most: " + "; ".join(
            f"{b['family']} layer {b['best_layer']} ({_f2(b['best_recovery']['mean'])}, n={b['best_recovery']['n']}; "
            f"best layer per run: {', '.join(map(str, b['best_layer_per_run']))})"
            for b in by_layer) + ". " + STATE_PATCH_NOTE)
    return _finish(_claim(4, verdict, numbers, detail, views), left)


# ----------------------------------------------------------------------------- claim 5


def _conv1d_rows(data: Data) -> dict[Any, Mapping[str, Any]]:
    """run id → its ``conv1d_removal`` row of every layer (layer −2) at EVAL_LENGTH, for the
    from-scratch Mamba/Mamba-2 runs."""
    info = {r["id"]: r for r in data.all_runs}
    rows_by_run: dict[Any, Mapping[str, Any]] = {}
    for r in data.interventions:
        run = info.get(r.get("run_id"))
        if (run is None or r.get("method") != "conv1d_removal" or int(r.get("layer", 0)) != -2
                or r.get("eval_length", EVAL_LENGTH) != EVAL_LENGTH or run["family"] not in SSM or not _scratch(run)):
            continue
        rows_by_run[run["id"]] = r
    return rows_by_run


def claim_5(data: Data) -> dict[str, Any]:
    info = {r["id"]: r for r in data.all_runs}
    trained_ids = {r["id"] for r in data.trained}
    rows_by_run = _conv1d_rows(data)
    tasks_all = ("s3", "parity", STACK_TASK)
    read = sorted({(info[rid]["task"], info[rid]["family"]) for rid in rows_by_run if info[rid]["task"] in tasks_all})
    expected = expected_cells(tasks_all, SSM)
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for rid, row in rows_by_run.items():
        if rid in trained_ids and row.get("drop_rel_chance") is not None:
            usable[(info[rid]["task"], info[rid]["family"])].append(info[rid])
    numbers: dict[str, Any] = {"tasks": {}, "paper_pp": {"s3": -12.6, "parity": -6.8, "dyck": "n.s."},
                               "test_statistic": "drop_rel_chance"}
    views = ["/probe-vs-causal?method=conv1d_removal&family=mamba", "/probe-vs-causal?method=conv1d_removal&family=mamba2"]
    left = [r for r in data.left_out_for(tasks_all) if r["family"] in SSM]
    if len({t for t, _ in read}) < 2:
        return _finish(_claim(5, NOT_ENOUGH, numbers, "needs conv1d_removal (every layer) results for mamba/mamba2 on "
                              "at least two of s3, parity, dyck", views), left)
    short = data.shortfalls(expected, usable, "trained seeds with conv1d_removal")
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(5, NOT_ENOUGH, numbers,
                              f"needs ≥ {MIN_SEEDS} trained seeds in every cell: " + "; ".join(short), views), left)
    vals: dict[str, list[float]] = {}
    for t in tasks_all:
        runs_t = [r for (task, _f), rs in usable.items() if task == t for r in rs]
        if not runs_t:
            continue
        v = [float(rows_by_run[r["id"]]["drop_rel_chance"]) for r in runs_t]
        vals[t] = v
        numbers["tasks"][t] = {"drop_rel_chance": _ci(v), "n_runs": len(v),
                               "delta_pp": _ci([rows_by_run[r["id"]].get("delta_pp") for r in runs_t]),
                               "families": sorted({r["family"] for r in runs_t})}
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
        return _finish(_claim(5, NOT_ENOUGH, numbers, "no condition could be evaluated", views), left)
    failed = [k for k, v in evaluated.items() if not v]

    def fmt(t: str) -> str:
        c = tasks[t]["drop_rel_chance"]
        iv = f" [{c['lo']:.2f}, {c['hi']:.2f}]" if c["lo"] is not None else ""
        return f"{t}: {c['mean']:.2f}{iv} of the gain over chance lost (n={c['n']})"

    detail = "; ".join(fmt(t) for t in tasks) + ". "
    detail += "All conditions hold." if not failed else "Fails: " + ", ".join(failed) + "."
    return _finish(_claim(5, CONTRADICTED if failed else SUPPORTED, numbers, detail, views), left)


# ----------------------------------------------------------------------------- claim 6


def claim_6(data: Data) -> dict[str, Any]:
    tab: dict[Cell, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in data.trained:
        if not _scratch(r) or r["task"] not in PREFIX_TASKS:
            continue
        accs = {int(L): v.get("token_acc") for L, v in (r.get("behaviour") or {}).items() if isinstance(v, Mapping)}
        accs = {L: a for L, a in accs.items() if a is not None}
        if not accs:
            continue
        usable[(r["task"], r["family"])].append(r)
        for L, a in accs.items():
            tab[(r["task"], r["family"])][L].append(float(a))
    read = expected_cells(PREFIX_TASKS, FAMILIES)
    lengths = sorted({L for d in tab.values() for L in d})
    numbers: dict[str, Any] = {"lengths_used": lengths, "accuracy": [
        {"task": t, "family": f, "by_length": {str(L): _ci(v, "accuracy") for L, v in sorted(d.items())}}
        for (t, f), d in sorted(tab.items())]}
    views = ["/?task=parity", "/?task=s3", "/curves?task=parity&view=behaviour"]
    left = data.left_out_for(PREFIX_TASKS)
    short = data.shortfalls(read, usable) if any(data.stored.get(c) for c in read) else []
    if short:
        numbers["cells_short_of_seeds"] = short
        return _finish(_claim(6, NOT_ENOUGH, numbers,
                              f"needs ≥ {MIN_SEEDS} trained seeds in every cell: " + "; ".join(short), views), left)
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
        if all(v is not None for v in groups.values()):
            sub[f"recurrent > ssm > transformer on {t}"] = groups["recurrent"] > groups["ssm"] > groups["transformer"]
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
        return _finish(_claim(6, NOT_ENOUGH, numbers, "needs behaviour of trained runs at several eval lengths on "
                              "parity and s3", views), left)
    failed = [k for k, v in sub.items() if not v]
    detail = (f"Trained runs at lengths {', '.join(map(str, lengths))}: {len(sub) - len(failed)}/{len(sub)} sub-claims hold"
              + (": fails " + "; ".join(failed) if failed else "."))
    return _finish(_claim(6, CONTRADICTED if failed else SUPPORTED, numbers, detail, views), left)


# ----------------------------------------------------------------------------- descriptive


CLAIM_SCOPE: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {  # claim → (tasks, families) it reads
    1: (PREFIX_TASKS, FAMILIES),
    2: ((STACK_TASK,), FAMILIES),
    3: (("s3", "parity", STACK_TASK), FAMILIES),
    4: (tuple(STUDY_TASKS), FAMILIES),
    5: (("s3", "parity", STACK_TASK), SSM),
    6: (PREFIX_TASKS, FAMILIES),
}


def trained_cells(data: Data, tasks: Iterable[str], families: Iterable[str],
                  expected: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """What the trained from-scratch runs of each cell show, whatever their number: the class of
    the seed-mean probe curve at L = EVAL_LENGTH and the late concentration (mean, t-interval,
    n seeds). Descriptive: no seed minimum, no test; never part of a verdict."""
    cells = _curve_cells(data, tuple(tasks))
    out = []
    for cell in expected_cells(tasks, families):
        rs = cells.get(cell)
        if not rs:
            continue
        s = _summary(data, rs)
        lc = s["metrics"]["late_concentration"]
        row = {"task": cell[0], "family": cell[1], "n": s["n"], "profile_class": s["profile_class"],
               "class_votes": s["class_votes"], "late_concentration": {k: lc[k] for k in ("mean", "lo", "hi", "n")}}
        if expected:
            row["expected"] = expected.get(cell[1])
        out.append(row)
    return out


def trained_conv1d_cells(data: Data) -> list[dict[str, Any]]:
    """Claim 5's descriptive block: per Mamba/Mamba-2 cell of S3, Parity and Dyck, the Conv1D
    removal drop (``drop_rel_chance``: mean, t-interval, n) over its trained runs that have one,
    whatever their number. Never part of a verdict."""
    rows = _conv1d_rows(data)
    trained = {r["id"]: r for r in data.trained}
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for rid, row in rows.items():
        if rid in trained and row.get("drop_rel_chance") is not None:
            by_cell[(trained[rid]["task"], trained[rid]["family"])].append(float(row["drop_rel_chance"]))
    return [{"task": t, "family": f, "n": len(by_cell[(t, f)]), "drop_rel_chance": _ci(by_cell[(t, f)])}
            for t, f in expected_cells(("s3", "parity", STACK_TASK), SSM) if by_cell.get((t, f))]


def _describe_when_short(claims: list[dict[str, Any]], data: Data) -> list[dict[str, Any]]:
    """Add ``numbers.trained_cells`` (descriptive) to each "not enough data" claim."""
    for c in claims:
        if c["verdict"] == NOT_ENOUGH:
            tasks, fams = CLAIM_SCOPE[c["id"]]
            spec = CONTRAST.get(c["id"])
            c["numbers"]["trained_cells"] = _clean(trained_conv1d_cells(data) if c["id"] == 5 else
                                                   trained_cells(data, tasks, fams, spec["expected"] if spec else None))
    return claims


def evaluate_claims(
    runs: Sequence[Mapping[str, Any]] | None = None,
    probes: Sequence[Mapping[str, Any]] | None = None,
    interventions: Sequence[Mapping[str, Any]] | None = None,
    patching: Sequence[Mapping[str, Any]] | None = None,
    controls: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """All six claims, in order. Missing inputs count as empty (→ "not enough data").

    ``controls``: the random-init control curves ``{task, family, seed, n_layers, curve: {layer:
    accuracy}}`` at ``EVAL_LENGTH``. With them, claims 1–3 read each cell against its seeds'
    controls (``numbers.floor`` "random-init control"; docs/SCIENCE.md#controls) and carry the
    majority-floor verdict beside it (``numbers.majority_floor``: verdict, cells, detail).

    Only trained runs (:func:`science.trained.is_trained`) are read; each claim lists the runs it
    left out (``numbers.runs_left_out``) with the reason. A "not enough data" claim also carries
    ``numbers.trained_cells``: what the trained cells it reads show (:func:`trained_cells`),
    descriptive only."""
    data = Data(runs or [], probes or [], interventions or [], patching or [], controls)
    first = [*claims_1_2(data), claim_3(data)]
    if data.use_controls:  # the same claims against the majority rate, side by side
        data.use_controls = False
        plain = [*claims_1_2(data), claim_3(data)]
        data.use_controls = True
        for c, p in zip(first, plain):
            c["numbers"]["majority_floor"] = _clean({"verdict": p["verdict"], "detail": p["detail"],
                                                     "cells": p["numbers"].get("cells") or p["numbers"].get("families")})
    stacked = _claim_1_with_stacked_rnns(runs or [], probes or [], interventions or [], patching or [], controls)
    if stacked is not None:
        first[0]["numbers"]["stacked_rnns"] = stacked
    out = [*first, claim_4(data), claim_5(data), claim_6(data)]
    return _describe_when_short(out, data)


def _claim_1_with_stacked_rnns(runs: Sequence[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
                               interventions: Sequence[Mapping[str, Any]], patching: Sequence[Mapping[str, Any]],
                               controls: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """Claim 1 again with the plain stacked LSTM/GRU (``lstm_stack``, ``gru_stack``) in the place
    of the residual ones (docs/SCIENCE.md#stacked-rnns): ``{verdict, detail, cells, families}``,
    or None when no stacked run is stored."""
    if not any(r.get("family") in STACKED_VARIANTS for r in runs):
        return None
    swap = {v: k for k, v in STACKED_VARIANTS.items()}  # lstm → lstm_stack

    def relabel(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            fam = r.get("family")
            if fam in swap:
                continue  # the residual run steps aside
            out.append({**r, "family": STACKED_VARIANTS.get(fam, fam)})
        return out

    claim = claims_1_2(Data(relabel(runs), probes, interventions, patching, relabel(controls or [])))[0]
    for row in claim["numbers"].get("cells", []):
        row["family"] = swap.get(row["family"], row["family"])
    return _clean({"verdict": claim["verdict"], "detail": claim["detail"], "cells": claim["numbers"].get("cells"),
                   "families": [swap.get(f, f) for f in FAMILIES]})
