"""Claim 4: is the most readable layer the necessary one? A necessity test with removal that removes,
read beyond random removal of the same rank (docs/SCIENCE.md#claims)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from layerscope_core.registry import FAMILIES as STUDY_FAMILIES
from layerscope_core.registry import STUDY_TASKS
from science import profiles as P
from science.claims.common import (
    CONTRADICTED,
    DECOUPLED_SHARE_MIN,
    DECOUPLING_MARGIN_PP,
    DECOUPLING_METHODS,
    EVAL_LENGTH,
    MIN_SEEDS,
    NOT_ENOUGH,
    REFIT_TOL,
    STATE_SITE,
    SUPPORTED,
    Cell,
    Data,
    _ci,
    _claim,
    _finish,
    _run_curves,
    _scratch,
    _significance,
    expected_cells,
)
from science.stats import wilson_interval

# ----------------------------------------------------------------------------- claim 4


def _removed(row: Mapping[str, Any]) -> bool:
    """The edit removed the variable: its refit probe is at or under the row's ``refit_line``
    (measurement version 2, docs/SCIENCE.md#removal-line), or, on a row without one (version 1),
    within REFIT_TOL of the majority rate."""
    acc, maj, line = row.get("refit_acc"), row.get("refit_majority"), row.get("refit_line")
    if acc is None:
        return False
    if line is not None:
        return float(acc) <= float(line) + 1e-12
    return maj is not None and float(acc) - float(maj) <= REFIT_TOL + 1e-12


def _removal_lines(rows: Sequence[Mapping[str, Any]]) -> str:
    """``stored`` when every edit row with a refit carries its removal line (version 2),
    ``majority`` when none does (version 1), ``mixed`` otherwise (``majority`` without rows)."""
    has = {r.get("refit_line") is not None for r in rows if r.get("refit_acc") is not None}
    return "mixed" if len(has) == 2 else ("stored" if has == {True} else "majority")


def beyond_random(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """An edit row read against its rank-matched random removal (docs/SCIENCE.md#random-removal):
    ``delta_pp`` becomes ``delta_pp − random_delta_pp`` (the drop beyond removing as many random
    directions; the raw value kept as ``delta_raw_pp``); rows without a random control unchanged."""
    if row.get("random_delta_pp") is None or row.get("delta_pp") is None:
        return row
    return {**row, "delta_pp": float(row["delta_pp"]) - float(row["random_delta_pp"]), "delta_raw_pp": row["delta_pp"]}


def _run_decoupling(
    run: Mapping[str, Any],
    curve: dict[int, float],
    rows: list[Mapping[str, Any]],
    method: str,
    *,
    random_control: bool = True,
    removal_rule: bool = True,
) -> dict[str, Any]:
    """One run's claim-4 row. ``random_control`` False reads the drops raw (not beyond random
    removal of the same rank); ``removal_rule`` False counts every edit, removed or not: the
    readings without the controls, side by side with the verdict (``numbers.without_controls``)."""
    if random_control:
        rows = [beyond_random(r) for r in rows]
    removed = [r for r in rows if _removed(r) or not removal_rule]
    not_removed = sorted(int(r["layer"]) for r in rows if not _removed(r))
    near = P.near_best_layers(curve)
    base = {
        "run_id": run["id"],
        "task": run["task"],
        "family": run["family"],
        "seed": run.get("seed"),
        "pretrained": run.get("pretrained"),
        "method": method,
        "best_layer": P.best_layer(curve),
        "near_best_layers": near,
        "not_removed_layers": not_removed,
        "removed_layers": sorted(int(r["layer"]) for r in removed),
        "beyond_random": (random_control and all(r.get("delta_raw_pp") is not None for r in rows)) if rows else None,
    }
    if not any(int(r["layer"]) in near for r in removed):
        return {**base, "status": "not removed", "meaningfully_decoupled": None}
    d = P.decoupling(curve, removed, method=method)
    sig = [_significance(r) for r in removed if int(r["layer"]) == d["damaging_layer"]]
    known = [s for s in sig if s is not None]
    significant = (sum(known) > len(known) / 2) if known else None
    at_near = d["delta_near_best_pp"] if d["delta_near_best_pp"] is not None else 0.0
    margin = at_near - d["delta_at_damaging_pp"]
    decoupled = bool(d["decoupled"]) and margin >= DECOUPLING_MARGIN_PP and significant is not False
    return {
        **base,
        **d,
        "margin_pp": margin,
        "significant": significant,
        "status": "evaluated",
        "meaningfully_decoupled": decoupled,
    }


def edit_removed(row: Mapping[str, Any]) -> bool:
    """Claim 4's removal test for one edit row (``refit_acc``, ``refit_line`` or, on a version 1
    row without a line, ``refit_majority``, 0..1): True when the refit probe is at or under the
    row's removal line, or within :data:`REFIT_TOL` of the majority rate where it has none.
    Rows without a refit → False."""
    return _removed(row)


def run_decouplings(
    runs: Sequence[Mapping[str, Any]],
    probes: Sequence[Mapping[str, Any]],
    interventions: Sequence[Mapping[str, Any]],
    *,
    eval_length: int = EVAL_LENGTH,
    method: str | None = None,
) -> list[dict[str, Any]]:
    """Claim 4's per-run rule, for views that show it run by run (the /probe-vs-causal summary).

    For each run in ``runs`` (``{id, task, family, seed, pretrained}``; trained or not: the
    caller filters) with a probe curve at ``eval_length`` and edits: the edit is ``method``, or
    by default the first of :data:`DECOUPLING_METHODS` present. An edit counts only where it
    removed the variable (:func:`edit_removed`; else ``status = "not removed"``); near-best probe layers (a tie within ``science.profiles.NEAR_BEST_TOL``) are
    never "decoupled" from each other; ``meaningfully_decoupled`` needs
    :data:`DECOUPLING_MARGIN_PP` and significance as in claim 4.

    Returns:
        one dict per evaluable run: the fields of claim 4's ``numbers["runs"]`` rows.
    """
    by_run: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in interventions:
        if (
            r.get("eval_length", eval_length) == eval_length
            and int(r.get("layer", -2)) >= -1
            and r.get("delta_pp") is not None
            and (r.get("method") == method if method else r.get("method") in DECOUPLING_METHODS)
        ):
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


def _best_layer_of(by_layer: Mapping[int, Mapping[Any, list[float]]], run_id: Any) -> int:
    """The layer of run ``run_id``'s highest mean recovery (the first of a tie)."""
    return max(
        (layer for layer in by_layer if run_id in by_layer[layer]),
        key=lambda layer: float(np.mean(by_layer[layer][run_id])),
    )


def _group_verdict(evaluated: list[dict[str, Any]]) -> dict[str, Any]:
    k = sum(bool(r["meaningfully_decoupled"]) for r in evaluated)
    share, lo, hi = wilson_interval(k, len(evaluated))
    if not evaluated or lo is None or hi is None:  # the interval is None exactly when nothing was evaluated
        verdict = NOT_ENOUGH
    elif lo > DECOUPLED_SHARE_MIN:
        verdict = SUPPORTED
    elif hi < DECOUPLED_SHARE_MIN:
        verdict = CONTRADICTED
    else:
        verdict = NOT_ENOUGH
    return {"decoupled": k, "n": len(evaluated), "share": share, "lo": lo, "hi": hi, "verdict": verdict}


def counted_runs(data: Data) -> list[Mapping[str, Any]]:
    """The runs claim 4 reads: the trained runs, less those of a from-scratch cell not learned
    (docs/SCIENCE.md#plateau: its trained seeds add nothing to claims 4–6). The verdict's per-run
    rows and the state-patching lines beside it both read these, so they count the same runs."""
    return [r for r in data.trained if not _scratch(r) or data.learned((r["task"], r["family"]))]


def _state_patching(data: Data) -> dict[str, Any] | None:
    """State-site patching recovery at the last block, middle position: mean and t-interval over
    the runs claim 4 reads (:func:`counted_runs`) per group (scratch / pretrained) with their run
    ids; None when none is stored."""
    info = {r["id"]: r for r in counted_runs(data)}
    per_run: dict[Any, list[float]] = defaultdict(list)
    for p in data.patching:
        run = info.get(p.get("run_id"))
        if (
            run is None
            or p.get("site") != STATE_SITE
            or p.get("recovery") is None
            or run.get("n_layers") is None
            or int(p["layer"]) != int(run["n_layers"]) - 1
            or int(p["position"]) != int(p.get("eval_length", EVAL_LENGTH)) // 2
        ):
            continue
        per_run[run["id"]].append(float(p["recovery"]))
    if not per_run:
        return None
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
    the last block alone can recover ~0 while layer 0 recovers nearly all of it. Reads the runs
    claim 4 reads (:func:`counted_runs`)."""
    info = {r["id"]: r for r in counted_runs(data)}
    per: dict[str, dict[int, dict[Any, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for p in data.patching:
        run = info.get(p.get("run_id"))
        if (
            run is None
            or p.get("site") != STATE_SITE
            or p.get("recovery") is None
            or int(p["position"]) != int(p.get("eval_length", EVAL_LENGTH)) // 2
        ):
            continue
        key = f"{run['family']} × {run['task']}" if _scratch(run) else f"{run['pretrained']} × {run['task']}"
        per[key][int(p["layer"])][run["id"]].append(float(p["recovery"]))
    out = []
    for key in sorted(per):
        means = {layer: [float(np.mean(v)) for v in runs.values()] for layer, runs in per[key].items()}
        best = max(means, key=lambda layer: float(np.mean(means[layer])))
        last = max(means)
        run_ids = sorted({rid for runs in per[key].values() for rid in runs}, key=str)
        per_run = [_best_layer_of(per[key], rid) for rid in run_ids]
        out.append(
            {
                "family": key,
                "best_layer": best,
                "best_recovery": _ci(means[best]),
                "last_layer": last,
                "last_recovery": _ci(means[last]),
                "best_layer_per_run": sorted(per_run),
            }
        )
    return out


# the readings without claim 4's controls, shown beside its verdict (docs/SCIENCE.md#claims);
# name → the switches of _run_decoupling (backend.claims_text says each in words)
WITHOUT_CONTROLS = {
    "raw drops": {"random_control": False},
    "no removal rule": {"removal_rule": False},
    "neither": {"random_control": False, "removal_rule": False},
}


def _decoupling_rows(
    data: Data, by_run: Mapping[Any, list[Mapping[str, Any]]], **reading: bool
) -> list[dict[str, Any]]:
    """Claim 4's per-run rows of the runs it reads (:func:`counted_runs`) with a curve and edits (the
    first of :data:`DECOUPLING_METHODS` each has); ``reading``: see :func:`_run_decoupling`."""
    per_run = []
    for run in counted_runs(data):
        rid = run["id"]
        if rid not in data.curves or rid not in by_run:
            continue
        methods = {r.get("method") for r in by_run[rid]}
        method = next(m for m in DECOUPLING_METHODS if m in methods)
        rows = [r for r in by_run[rid] if r["method"] == method]
        per_run.append(_run_decoupling(run, data.curves[rid][0], rows, method, **reading))
    return per_run


def _groups(per_run: list[dict[str, Any]], short: list[Any]) -> dict[str, dict[str, Any]]:
    """Per group (from scratch, pretrained): the decoupled share, its Wilson interval and verdict;
    "not enough data" with ``why`` when cells are ``short`` of seeds (from scratch) or fewer than
    ``MIN_SEEDS`` runs are evaluable (pretrained)."""
    groups = {}
    for name, pick in (("scratch", lambda r: not r["pretrained"]), ("pretrained", lambda r: bool(r["pretrained"]))):
        rows = [r for r in per_run if pick(r)]
        if not rows:
            continue
        g = _group_verdict([r for r in rows if r["status"] == "evaluated"])
        g["not_removed"] = sum(r["status"] == "not removed" for r in rows)
        if name == "scratch" and short:
            g["verdict"], g["why"] = NOT_ENOUGH, {"short": short}
        elif name == "pretrained" and g["n"] < MIN_SEEDS:
            g["verdict"], g["why"] = NOT_ENOUGH, {"evaluable": g["n"], "of": MIN_SEEDS}
        groups[name] = g
    return groups


def _overall(groups: Mapping[str, Mapping[str, Any]]) -> str:
    verdicts = [g["verdict"] for g in groups.values()]
    if not verdicts:
        return NOT_ENOUGH
    if SUPPORTED in verdicts:
        return SUPPORTED
    return CONTRADICTED if all(v == CONTRADICTED for v in verdicts) else NOT_ENOUGH


def _without_controls(
    data: Data, by_run: Mapping[Any, list[Mapping[str, Any]]], short: list[Any]
) -> dict[str, dict[str, Any]]:
    """Per reading of :data:`WITHOUT_CONTROLS`: ``{verdict, groups: {name: {decoupled, n,
    not_removed, verdict}}}``."""
    keep = ("decoupled", "n", "not_removed", "verdict")
    out = {}
    for name, switches in WITHOUT_CONTROLS.items():
        alt = _groups(_decoupling_rows(data, by_run, **switches), short)
        out[name] = {
            "verdict": _overall(alt),
            "groups": {g: {k: v[k] for k in keep} for g, v in alt.items()},
        }
    return out


def claim_4(data: Data) -> dict[str, Any]:
    """``why.case``: ``no data`` (no trained run with a curve and an edit of
    ``DECOUPLING_METHODS``) or ``evaluated`` (``numbers.groups``: per group its decoupled share,
    Wilson interval and verdict, with ``why`` where the group cannot decide: ``{short: cells
    short of seeds}`` or ``{evaluable: n, of: MIN_SEEDS}``). ``numbers.without_controls``: the
    same rule with the drops read raw, with every edit counted (no removal rule), and with
    neither; per reading ``{verdict, groups: {name: {decoupled, n, not_removed, verdict}}}``."""
    by_run: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in data.interventions:
        if (
            r.get("eval_length", EVAL_LENGTH) == EVAL_LENGTH
            and int(r.get("layer", -2)) >= -1
            and r.get("method") in DECOUPLING_METHODS
            and r.get("delta_pp") is not None
        ):
            by_run[r["run_id"]].append(r)
    per_run = _decoupling_rows(data, by_run)
    usable: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    for r in per_run:
        if not r["pretrained"]:
            usable[(r["task"], r["family"])].append(r)
    # the from-scratch group reads every family × task of the study (a pretrained-only suite has none)
    short, untestable = (
        data.trained_read(expected_cells(STUDY_TASKS, STUDY_FAMILIES), usable, "probes and edits")
        if data.stored
        else ([], [])
    )
    groups = _groups(per_run, short)
    patch = _state_patching(data)
    numbers: dict[str, Any] = {
        "runs": per_run,
        "groups": groups,
        "refit_tolerance": REFIT_TOL,
        # which removal test the edits read: their stored lines (measurement version 2), version 1's
        # majority + REFIT_TOL, or both (docs/SCIENCE.md#removal-line)
        "removal_lines": _removal_lines([r for rows in by_run.values() for r in rows]),
        "margin_pp_required": DECOUPLING_MARGIN_PP,
        "decoupled_share_min": DECOUPLED_SHARE_MIN,
        "state_patching": patch,
        "decoupled_share_scratch": groups.get("scratch", {}).get("share"),
        "decoupled_share_pretrained": groups.get("pretrained", {}).get("share"),
    }
    by_layer = _state_patching_by_layer(data)
    if by_layer:
        numbers["state_patching_best_layer"] = by_layer
    if short:
        numbers["cells_short_of_seeds"] = short
    if untestable:
        numbers["untestable"] = untestable
    left = data.left_out
    if not groups:
        return _finish(_claim(4, NOT_ENOUGH, numbers, {"case": "no data"}), left)
    numbers["without_controls"] = _without_controls(data, by_run, short)
    return _finish(_claim(4, _overall(groups), numbers, {"case": "evaluated"}), left)
