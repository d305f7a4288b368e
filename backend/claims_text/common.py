"""The sentences every claim shares: cell names, cells short of seeds or not learned, the runs
left out, and the ``numbers`` entries that the science gives as rows and the API serves as text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def f2(x: float) -> str:
    """Two decimals, no negative zero."""
    return f"{x:.2f}".replace("-0.00", "0.00")


def cell_name(row: Mapping[str, Any]) -> str:
    """``family × task`` of a row with both."""
    return f"{row['family']} × {row['task']}"


def not_learned_text(row: Mapping[str, Any]) -> str:
    """A cell not learned within its budget (``science.claims.common.not_learned_cell``): every
    seed plateaued below the criterion, or some trained and the rest plateaued."""
    best = row.get("best")
    trained = int(row.get("trained") or 0)
    n = row["plateaued"] + trained
    who = "this architecture" if not trained else "every seed of this architecture"
    seeds = (
        f"{row['plateaued']} of {n} seeds plateaued" + _where_stopped(row) + (f", {trained} trained" if trained else "")
    )
    return (
        f"{cell_name(row)}: not learned by {who} at this size within {row['budget']:,} steps ({seeds}"
        + (f"; best held-out accuracy {best[0]:.3f}–{best[1]:.3f}" if best else "")
        + stopped_runs_text(row.get("stopped_runs"))
        + ")"
    )


def stopped_run_text(run: Mapping[str, Any]) -> str:
    """``seed 0 at step 11,900 of 20,000 (60% of its budget), held-out slope +1.11 pp per 1,000 steps
    (95% CI 0.98 to 1.23, last 2,000 steps)`` (a row of ``science.claims.common.stopped_run``)."""
    share = run.get("budget_share")
    text = f"seed {run['seed']} at step {run['steps']:,} of {run['max_steps']:,}" + (
        f" ({100 * share:.0f}% of its budget)" if share is not None else ""
    )
    slope = run.get("slope")
    if slope is None:
        return text + ", no learning curve stored"
    lo, hi = slope.get("lo_pp"), slope.get("hi_pp")
    ci = f"95% CI {lo:+.2f} to {hi:+.2f}, " if lo is not None and hi is not None else ""  # None: < 3 evaluations
    return text + (
        f", held-out slope {slope['slope_pp']:+.2f} pp per 1,000 steps ({ci}last {slope['window_steps']:,} steps)"
    )


def stopped_runs_text(runs: Sequence[Mapping[str, Any]] | None) -> str:
    """``; seed 0 at step …; seed 1 at step …`` for a cell's stopped runs, else ""."""
    return "".join("; " + stopped_run_text(r) for r in runs or [])


def _where_stopped(row: Mapping[str, Any]) -> str:
    """`` at step 4,700–6,200, at the L 12 curriculum stage`` (rows from before these fields: "")."""
    stopped, stages = row.get("stopped"), row.get("stages") or []
    if not stopped:
        return ""
    at = f" at step {stopped[0]:,}" if stopped[0] == stopped[1] else f" at steps {stopped[0]:,}–{stopped[1]:,}"
    if stages:
        at += ", " + stages_text(stages)
    return at


def stages_text(stages: Sequence[int]) -> str:
    """``at the L 12 curriculum stage`` / ``at the L 28/L 32 curriculum stages``."""
    return "at the " + "/".join(f"L {n}" for n in stages) + " curriculum stage" + ("s" if len(stages) > 1 else "")


def shortfall_text(row: Mapping[str, Any]) -> str:
    """One cell short of seeds (a row of ``science.claims.common.Data.shortfalls``)."""
    kind = row["kind"]
    if kind == "duplicated":
        return (
            f"{cell_name(row)}: more than one run for seed(s) {', '.join(map(str, row['seeds']))} (runs made "
            "with other settings in the same suite; one suite holds one run per seed — run other settings "
            "under another name)"
        )
    if kind == "none stored":
        return f"{cell_name(row)}: 0 of {row['of']} trained seeds (no runs trained from scratch stored)"
    if kind == "not learned":
        return not_learned_text(row)
    if kind == "short":
        need = f" with {row['need']}" if row.get("need") else ""
        untrained = (
            f" ({row['untrained']} untrained run(s) left out{_budget_text(row)})" if row.get("untrained") else ""
        )
        return f"{cell_name(row)}: {row['k']} of {row['of']} trained seeds{need}{untrained}"
    raise ValueError(f"unknown shortfall kind {kind!r}")


def _budget_text(row: Mapping[str, Any]) -> str:
    """``: k stopped while still improving (by the N-step budget / by plateau rule revision 2) …,
    not enough data: more steps would decide; seed …`` for a shortfall row whose untrained runs
    include runs more steps could still decide (docs/SCIENCE.md#plateau), else ""."""
    n_budget, n_old = row.get("budget_stopped") or 0, row.get("old_plateau") or 0
    if not n_budget and not n_old:
        return ""
    by = [f"{n_budget} stopped by the {row['budget']:,}-step budget while still improving"] if n_budget else []
    if n_old:
        revisions = sorted({r["revision"] for r in row.get("stopped_runs") or [] if r.get("stop_reason") == "plateau"})
        by.append(
            f"{n_old} stopped by plateau rule revision {'/'.join(map(str, revisions)) or '1–2'} "
            "(since revised: it stopped runs still rising)"
        )
    best = row.get("budget_best")
    acc = (f"{best[0]:.3f}" if best[0] == best[1] else f"{best[0]:.3f}–{best[1]:.3f}") if best else None
    return (
        ": "
        + ", ".join(by)
        + (f", best held-out accuracy {acc}" if acc else "")
        + ", not enough data: more steps would decide"
        + stopped_runs_text(row.get("stopped_runs"))
    )


def short_detail(numbers: Mapping[str, Any]) -> str:
    """The detail of a claim left without a verdict by cells short of seeds."""
    rows = numbers["cells_short_of_seeds"]
    return f"needs ≥ {numbers['min_seeds']} trained seeds in every cell: " + "; ".join(map(shortfall_text, rows))


def untestable_note(numbers: Mapping[str, Any]) -> str:
    """`` Untestable here: …`` for the cells not learned a claim leaves out, else ""."""
    rows = numbers.get("untestable")
    return (" Untestable here: " + "; ".join(map(not_learned_text, rows)) + ".") if rows else ""


def with_untestable(detail: str, numbers: Mapping[str, Any]) -> str:
    """``detail`` then, where a claim left cells not learned out, its `` Untestable here: …`` note
    (a sentence of its own)."""
    note = untestable_note(numbers)
    if not note:
        return detail
    return (detail if detail.rstrip().endswith(".") else detail.rstrip() + ".") + note


def with_left_out(detail: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """``detail`` ending with the untrained runs the claim left out (the first three named)."""
    if not rows:
        return detail
    if not detail.rstrip().endswith("."):
        detail = detail.rstrip() + "."
    shown = "; ".join(
        f"{r['family']} × {r['task']} seed {r['seed']}"
        + (f" (fine-tuned from {r['pretrained']})" if r.get("pretrained") else "")
        + f": {r['reason']}"
        for r in rows[:3]
    )
    more = f"; and {len(rows) - 3} more" if len(rows) > 3 else ""
    return f"{detail} Left out {len(rows)} untrained run(s): {shown}{more}."


def fragile_text(row: Mapping[str, Any]) -> str:
    return f"{cell_name(row)}: {row['profile_class']} under {row['agree']} of {row['of']} threshold settings"


def ruled_out_text(row: Mapping[str, Any]) -> str:
    """A task on which claim 1 or 2 cannot be supported whatever its missing cells show."""
    if "transformer" in row:
        return f"on {row['task']} the transformer is {row['transformer']}, not {row['expected']}"
    wrong = ", ".join(f"{w['family']} is {w['class']}" for w in row["wrong"])
    return (
        f"on {row['task']} {wrong} where {row['expected']} is expected: at most {row['can_match']} of "
        f"{row['of']} other families can match (≥ {row['needed']:.0%} needed)"
    )


def group_why_text(why: Mapping[str, Any]) -> str:
    """Why a group of claim 4 cannot decide."""
    if "short" in why:
        return "cells short of seeds: " + "; ".join(map(shortfall_text, why["short"]))
    return f"{why['evaluable']} of {why['of']} evaluable pretrained runs"


# claim 4's readings without its controls (science.claims.necessity.WITHOUT_CONTROLS), in words
WITHOUT_CONTROLS_LABELS = {
    "raw drops": "drops read raw (not beyond random removal)",
    "no removal rule": "every edit counted, removed or not",
    "neither": "neither control",
}


# numbers key → how each of its rows reads
ROW_TEXT: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "cells_short_of_seeds": shortfall_text,
    "untestable": not_learned_text,
    "cannot_be_supported": ruled_out_text,
    "fragile_cells": fragile_text,
    "cells_without_controls": cell_name,
}


def text_numbers(numbers: Mapping[str, Any], explain: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    """A claim's ``numbers`` as the API serves them, keys in the same order: the rows of
    :data:`ROW_TEXT` as sentences, claim 4's group reasons, its readings without controls (a
    ``label`` each) and missing state patching in words, and
    ``majority_floor`` / ``stacked_rnns`` with the ``detail`` of their claim (``explain``) in the
    place of the claim."""
    out: dict[str, Any] = {}
    for key, v in numbers.items():
        if key in ROW_TEXT and isinstance(v, list):
            out[key] = [ROW_TEXT[key](r) for r in v]
        elif key in ("majority_floor", "stacked_rnns") and isinstance(v, Mapping):
            out[key] = {("detail" if k == "claim" else k): (explain(x) if k == "claim" else x) for k, x in v.items()}
        elif key == "groups" and isinstance(v, Mapping):
            out[key] = {
                name: {k: (group_why_text(x) if k == "why" else x) for k, x in g.items()} for name, g in v.items()
            }
        elif key == "without_controls" and isinstance(v, Mapping):
            out[key] = {name: {"label": WITHOUT_CONTROLS_LABELS.get(name, name), **r} for name, r in v.items()}
        elif key == "state_patching" and v is None:
            out[key] = "no state patching stored"
        else:
            out[key] = v
    return out
