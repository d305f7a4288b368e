"""The bundle and training sections of docs/RESULTS.md (``backend.report``): the code versions
each part of a study was made with, the preset a suite was made from, the training budget used,
why training stopped, the runs rebuilt, and the table of cells. Plain data in, Markdown lines out."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Set as AbstractSet
from typing import Any

from backend.claims_text.common import stages_text, stopped_runs_text
from layerscope_core.provenance import commit_label
from science.claims.common import not_learned_cell, stopped_run
from science.plateau import plateau_revision
from science.trained import is_trained

__all__ = [
    "version_lines",
    "preset_of",
    "stop_reason_lines",
    "budget_lines",
    "rebuilt_lines",
    "training_table",
]


def version_lines(manifest: dict[str, Any]) -> list[str]:
    """One line per part of a study made in parts (the manifest's ``parts``), else one line."""

    def line(m: dict[str, Any], prefix: str = "") -> str:
        return (
            f"- {prefix}layerscope {m.get('layerscope')}, commit {commit_label(m) or 'unknown'}; "
            f"torch {m.get('torch')}, transformers {m.get('transformers')}, Python {m.get('python')}"
        )

    parts = manifest.get("parts") or []
    if len(parts) < 2:
        return [line(manifest)]
    return [
        line(
            p,
            f"part {i} ({p.get('runs')} run{'' if p.get('runs') == 1 else 's'} on "
            f"{', '.join(p.get('devices') or ['unknown'])}): ",
        )
        for i, p in enumerate(parts, 1)
    ]


def measurement_version_lines(versions: dict[str, dict[int, int]]) -> list[str]:
    """The bundle's measurement versions (``table → {version: rows}``, science.measurement_version):
    one line, a warning when its rows come from more than one version (they agree within the
    tolerances of docs/SCIENCE.md#measurement-versions, not bit for bit)."""
    every = sorted({v for counts in versions.values() for v in counts})
    if not every:
        return []
    if len(every) == 1:
        return [f"- measurement version: {every[0]} (every result row)"]
    shown = "; ".join(
        f"{table} " + ", ".join(f"version {v}: {n}" for v, n in sorted(counts.items()))
        for table, counts in versions.items()
        if counts
    )
    return [
        f"- **measurement versions mixed** ({', '.join(map(str, every))}): {shown} rows. Numbers of two versions "
        "agree within the tolerances of docs/SCIENCE.md#measurement-versions, not bit for bit; every verdict "
        "and class is meant to be the same"
    ]


def preset_of(
    suite: str, runs: list[dict[str, Any]] | None = None, suite_params: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The preset a suite was made from (``backend.study_parts.suite_preset``: the preset whose
    runs the suite's ``runs`` are, else the one it is named after): its name, families, tasks,
    seeds, run count (controls and variants included) and its default training budget. With the
    suite job's ``suite_params`` (a bundle's manifest carries them), the families, tasks, seeds
    and runs are those the suite asked for (its ``--family``/``--task``/``--seed`` filters)."""
    from backend.study_parts import preset_run_count, suite_preset
    from worker.presets import PRESETS

    hashes = [h for r in runs or [] if (h := r.get("config_hash"))]
    if not isinstance(suite_params, dict):  # a bundle's manifest is read as hostile input
        suite_params = None
    name = suite_preset(suite, hashes) or (suite_params or {}).get("preset")
    p = PRESETS.get(name) if name else None
    if p is None or p.get("pretrained"):
        return None
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    train = p.get("train") or {}
    trained = preset_run_count(suite, hashes) or 0
    jobs = expand_suite(SuiteParams(preset=name))
    asked = _asked(suite_params, str(name))
    if asked is not None:
        jobs = asked
        trained = sum(j.control is None for j in jobs)
    return {
        "name": name,
        "families": list(dict.fromkeys(p["families"] if asked is None else [j.family for j in jobs])),
        "tasks": list(p["tasks"] if asked is None else dict.fromkeys(j.task for j in jobs)),
        "seeds": list(p["seeds"] if asked is None else dict.fromkeys(j.seed for j in jobs)),
        "runs": trained,
        "controls": len(jobs) - trained,
        "max_steps": train.get("max_steps"),
        "max_seconds": train.get("max_seconds"),
        # (family, task) → (max_seconds, max_steps): each cell's own budget (the preset's per-cell
        # overrides, docs/SCIENCE.md#budgets)
        "cell_budgets": {(j.family, j.task): (j.max_seconds, j.max_steps) for j in jobs},
    }


def _asked(suite_params: dict[str, Any] | None, preset: str) -> list[Any] | None:
    """The jobs a suite job's params expand to, when they are of ``preset`` and built-in models
    (given models are not the preset's cells); None otherwise, or where they no longer expand."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    if not isinstance(suite_params, dict) or suite_params.get("preset") != preset:
        return None
    try:
        params = SuiteParams.model_validate(suite_params)
        if params.pretrained or params.from_config:
            return None
        return expand_suite(params)
    except (ValueError, OSError):
        return None


def stop_reason_lines(runs: list[dict[str, Any]]) -> list[str]:
    """How the runs' training ended (``stop_reason``), the cells not learned (every untrained seed
    plateaued under revision 3 of the rule) and the cells with untrained runs more steps would
    decide (stopped by their budget, or by a plateau rule before revision 3), each stopped run with
    its slope at the stop and budget share (docs/SCIENCE.md#plateau)."""
    reasons: dict[str, int] = defaultdict(int)
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("control"):
            continue
        reasons[r.get("stop_reason") or "not recorded"] += 1
        by_cell[(r["task"], r["family"])].append(r)
    if set(reasons) <= {"not recorded"}:
        return []
    out = [
        "Why training stopped (docs/SCIENCE.md#plateau): "
        + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
        + "."
    ]
    for (task, fam), rs in sorted(by_cell.items()):
        row = not_learned_cell(rs)
        if row is None:
            continue
        best = ", ".join(
            f"{r.get('best_heldout_acc') or 0:.3f} at step {r.get('best_step')}"
            for r in rs
            if r.get("stop_reason") == "plateau"
        )
        who = "this architecture" if not row["trained"] else "every seed of this architecture"
        how = "every seed plateaued" if not row["trained"] else f"{row['trained']} trained, the others plateaued"
        if row["stages"]:
            how += " " + stages_text(row["stages"])
        out.append(
            f"- {fam} × {task}: not learned by {who} at this size within {row['budget']:,} steps "
            f"({how} under revision 3 of the rule; best held-out accuracy {best}"
            f"{stopped_runs_text(row['stopped_runs'])})."
        )
    for (task, fam), rs in sorted(by_cell.items()):
        if not_learned_cell(rs) is not None:
            continue
        open_runs = [
            r
            for r in rs
            if not is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))
            and r.get("stop_reason") in ("plateau", "budget")
        ]
        if not open_runs:
            continue
        why = []
        if n := sum(r.get("stop_reason") == "budget" for r in open_runs):
            why.append(f"{n} stopped by the step budget before the plateau rule stopped it")
        if n := sum(r.get("stop_reason") == "plateau" for r in open_runs):
            revisions = sorted(
                {
                    v
                    for r in open_runs
                    if r.get("stop_reason") == "plateau" and (v := plateau_revision(r.get("train_config")))
                }
            )
            rule = f"plateau rule revision {'/'.join(map(str, revisions))}" if revisions else "an earlier plateau rule"
            why.append(f"{n} stopped by {rule}, since revised")
        best = ", ".join(f"{r.get('best_heldout_acc') or 0:.3f} at step {r.get('best_step')}" for r in open_runs)
        runs_text = stopped_runs_text([stopped_run(r) for r in sorted(open_runs, key=lambda r: str(r.get("seed")))])
        out.append(
            f"- {fam} × {task}: not enough data: more steps would decide ({'; '.join(why)}; "
            f"best held-out accuracy {best}{runs_text})."
        )
    n_ctrl = sum(bool(r.get("control")) for r in runs)
    if n_ctrl:
        out.append(f"{n_ctrl} random-init control run(s) stored beside them (docs/SCIENCE.md#controls).")
    return out


def _limit(seconds: Any, steps: Any) -> str:
    parts = [
        f"{float(seconds):g} s" if seconds is not None else "no time limit",
        f"{int(steps):,} steps" if steps is not None else "no step limit",
    ]
    return " / ".join(parts)


def budget_lines(runs: list[dict[str, Any]], preset: dict[str, Any] | None) -> list[str]:
    """The training budget the runs were given (their train_config) next to the preset's, and how
    many runs ended at it without reaching the early-stop criterion."""
    used: dict[tuple[Any, Any], int] = defaultdict(int)
    for r in runs:
        used[_budget(r)] += 1
    if not used:
        return []
    if len(used) == 1:
        ((sec, steps),) = used
        line = f"Training budget used: at most {_limit(sec, steps)} per run (every run's train_config)"
    else:
        line = "Training budget used, per run (train_config): " + "; ".join(
            f"{_limit(sec, steps)} ({n} runs)" for (sec, steps), n in sorted(used.items(), key=str)
        )
    if preset is not None:
        line += f"; the preset allows {_limit(preset['max_seconds'], preset['max_steps'])}"
        cells = preset.get("cell_budgets") or {}
        if any(s != preset["max_steps"] for _, s in cells.values()):
            line += " by default, more for some cells (docs/SCIENCE.md#budgets)"
        default = (preset["max_seconds"], preset["max_steps"])
        if any(_budget(r) != cells.get((r.get("family"), r.get("task")), default) for r in runs):
            line += " (the runs were given a different budget than the preset's)"
    from science.trained import is_trained

    # ran to the budget: the stop reason where recorded (a plateau also ends without the early
    # stop, docs/SCIENCE.md#plateau), else no early stop (runs made before stop reasons)
    capped = [
        r
        for r in runs
        if (
            r.get("stop_reason") in ("budget", "time_limit")
            if r.get("stop_reason")
            else r.get("stopped_early") is False
        )
    ]
    n_rebuilt = sum(bool((r.get("made_with") or {}).get("rebuilt_from")) for r in runs)
    if n_rebuilt:
        line += (
            f"; {n_rebuilt} run(s) were rebuilt without the wall-clock cap, within the steps it gave them "
            "where they were first made (their seconds are the rebuild's; listed below the table)"
        )
    out = [line + "."]
    if capped:  # ran to the budget (no early stop); "trained" reads the held-out accuracy at the end
        late = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in capped)
        out.append(
            f"{len(capped)} of {len(runs)} stored runs were stopped by that budget (stop reason budget, or no early "
            "stop where a run records no reason; a run that had plateaued counts as plateau, at its last step too): "
            f"{len(capped) - late} ended below the criterion (untrained), {late} reached it by the end "
            "(trained)."
        )
    return out


def _budget(run: dict[str, Any]) -> tuple[Any, Any]:
    cfg = run.get("train_config") or {}
    return cfg.get("max_seconds"), cfg.get("max_steps")


def rebuilt_lines(runs: list[dict[str, Any]]) -> list[str]:
    """The runs whose weights were rebuilt (``made_with.rebuilt_from``,
    docs/SCIENCE.md#rebuilding-weights): what each recorded before next to what the rebuild
    gave, one table row per run; [] when none was rebuilt."""
    from science.budget import recorded_step_budget
    from science.trained import is_trained

    rebuilt = sorted(
        (r for r in runs if (r.get("made_with") or {}).get("rebuilt_from")),
        key=lambda r: (r["task"], r["family"], r["seed"]),
    )
    if not rebuilt:
        return []

    def acc(a: Any, crit: Any) -> str:
        return "–" if a is None else f"{a:.4f} ({'trained' if is_trained(a, crit) else 'untrained'})"

    lines = [
        f"{len(rebuilt)} run(s) came without weights and had them rebuilt here before they were measured: "
        "their own config, within the steps their wall-clock cap gave them on the machine that made them "
        "(docs/SCIENCE.md#rebuilding-weights). The numbers above are the rebuilt models' (the ones "
        "measured); what each run recorded before:",
        "",
        "| task | family | seed | first made on | step budget | steps: recorded → rebuilt | "
        "seconds: recorded → rebuilt | held-out acc: recorded → rebuilt |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rebuilt:
        was = r["made_with"]["rebuilt_from"]
        crit = r.get("early_stop_acc")
        lines.append(
            f"| {r['task']} | {r['family']} | {r['seed']} | {was.get('made_on') or 'unknown'} | "
            f"{recorded_step_budget(was, r.get('train_config') or {})} | {was.get('steps')} → {r.get('steps')} | {float(was.get('train_seconds') or 0):.0f} → "
            f"{float(r.get('train_seconds') or 0):.0f} on {r.get('made_on') or 'unknown'} | "
            f"{acc(was.get('heldout_acc'), crit)} → {acc(r.get('heldout_acc'), crit)} |"
        )
    return lines


def training_table(
    runs: list[dict[str, Any]],
    measured: set[Any],
    preset: dict[str, Any] | None,
    probed: AbstractSet[Any] = frozenset(),
) -> list[str]:
    """One row per (task, family): runs stored out of the preset's seeds (cells never started
    included), trained and measured separately."""
    from science.trained import is_trained

    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if not r.get("pretrained"):
            cells[(r["task"], r["family"])].append(r)
    order = [(t, f) for t in preset["tasks"] for f in preset["families"]] if preset else []
    order += sorted(c for c in cells if c not in order)
    n_seeds = len(preset["seeds"]) if preset else None
    lines = [
        "| task | family | runs stored | trained | with probes | measured | median steps | "
        "median train time (s) | held-out acc at the training length (min–max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task, family in order:
        rs = cells.get((task, family), [])
        of = n_seeds if n_seeds is not None else len(rs)
        if not rs:
            lines.append(f"| {task} | {family} | 0/{of}, never started | – | – | – | – | – | – |")
            continue
        trained = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in rs)
        n_meas = sum(r["id"] in measured for r in rs)
        n_probed = sum(r["id"] in probed for r in rs)
        accs = [r["heldout_acc"] for r in rs if r.get("heldout_acc") is not None]
        acc = f"{min(accs):.3f}–{max(accs):.3f}" if accs else "–"
        steps = [r["steps"] for r in rs if r.get("steps") is not None]
        secs = [r["train_seconds"] for r in rs if r.get("train_seconds") is not None]
        med = f"{statistics.median(steps):.0f} | {statistics.median(secs):.0f}" if steps and secs else "– | –"
        lines.append(
            f"| {task} | {family} | {len(rs)}/{of} | {trained}/{of} | {n_probed}/{of} | {n_meas}/{of} | {med} | {acc} |"
        )
    return lines
