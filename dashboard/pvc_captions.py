"""What /probe-vs-causal's figures show, in words: the run and suite behind
the heatmap, the suite, length and edit behind the cross-run summary."""

from __future__ import annotations

from typing import Any

from dashboard.theme import family_label, method_label, task_label


def heatmap_prefix(run: dict[str, Any]) -> str:
    """``Run #7 · suite paper · LSTM × Dyck, seed 0 · d_model 64 · config 1a2b3c4d5e``."""
    bits = [
        f"Run #{run['id']}",
        f"suite {run.get('suite') or '–'}",
        f"{family_label(run['family'])} × {task_label(run['task'])}, seed {run.get('seed')}",
    ]
    if run.get("d_model"):
        bits.append(f"d_model {run['d_model']}")
    if run.get("config_hash"):
        bits.append(f"config {str(run['config_hash'])[:10]}")
    if run.get("control"):
        bits.append("random-init control")
    return " · ".join(bits)


def summary_caption(state: dict[str, Any], *, n_runs: int, beyond: int, n_edits: int, not_learned: int = 0) -> str:
    """The summary's suite filter, length, edit and how many edit rows are read beyond random
    removal (claim 4's reading, docs/SCIENCE.md#random-removal); ``not_learned``: the trained runs
    of cells not learned left out, as claim 4 leaves them out (docs/SCIENCE.md#plateau)."""
    edit = (
        "claim 4's edit (LEACE → INLP → project-out)"
        if state.get("method") in (None, "auto")
        else method_label(state["method"])
    )
    scope = ", ".join(
        x
        for x in (
            task_label(state["task"]) if state.get("task") else "",
            family_label(state["family"]) if state.get("family") else "",
            f"seed {state['seed']}" if state.get("seed") is not None else "",
        )
        if x
    )
    head = f"{n_runs} runs{' (' + scope + ')' if scope else ''} · L={state.get('length')} · edit: {edit}" + (
        " · trained runs only" if state.get("trained") else ""
    )
    if not_learned:
        head += f" · {not_learned} run(s) of cells not learned left out, as /claims does"
    tail = (
        f"{beyond} of {n_edits} edit rows read beyond rank-matched random removal"
        if beyond
        else "drops raw: no random-removal control stored"
    )
    return f"{head}\n{tail}"
