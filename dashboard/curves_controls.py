"""Data behind /curves' issue-20 lines: each family's random-init control curve, the probe
accuracy per token type, and the caption that says what the figure shows. Pure functions of
the API client and the page state (no layout), so tests drive them with a fake client."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dashboard.api_client import ApiClient
from dashboard.figures.curve_extras import type_accuracy_rows
from dashboard.theme import length_label

# the tasks whose probe rows store ``type_accuracy`` (docs/SCIENCE.md#token-types)
TYPED_TASKS = ("dyck", "code_depth")


def control_curve_rows(api: ApiClient, state: dict, keep: Callable[[list[dict], dict], list[dict]]) -> list[dict]:
    """``/api/curves?controls=only`` for the page's suite and length, filtered by ``keep`` (the
    page's own task/family/length filter). Controls are never trained, so no ``trained=``."""
    lengths = state["lengths"]
    rows = api.curves(suite=state["suite"], eval_length=lengths[0] if len(lengths) == 1 else None, controls="only")
    return keep([r for r in rows if r.get("control")], state)


def token_type_rows(probes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-type points from the exported probe rows of the runs behind the curves."""
    return type_accuracy_rows([p for p in probes if p.get("task") in TYPED_TASKS])


def curves_caption(rows: Sequence[dict], state: dict, *, n_control_points: int, types_shown: bool) -> str:
    """``Suite paper · L=40 (in-distribution) · mean over 3 seeds per family (95% t-interval) · …``:
    the suite, lengths, seeds and probe behind the figure, and what the dashed and per-type lines
    are. The classes read the all-token accuracy (docs/SCIENCE.md#token-types)."""
    suites = sorted({str(r.get("suite")) for r in rows if r.get("suite")})
    lengths = sorted({int(r["eval_length"]) for r in rows})
    ns = sorted({int(r["n"]) for r in rows if isinstance(r.get("n"), int)})
    seeds = (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}–{ns[-1]}") if ns else "?"
    head = [
        f"Suite {', '.join(suites) or state.get('suite') or '–'}",
        ", ".join(length_label(L) for L in lengths) or "no length",
        f"mean over {seeds} seeds per family (95% t-interval, clipped to 0–100%)",
    ]
    probe = ["linear probe per layer on frozen states, test accuracy on all tokens (the profile classes use it)"]
    if state.get("trained"):
        probe.append("trained runs only")
    lines = []
    if n_control_points:
        lines.append("dashed: the same architecture and seeds at initialisation (untrained, probed only)")
    if types_shown:
        lines.append("thin lines: accuracy on one token type (Dyck open/close, code_depth bracket/other)")
    return "\n".join(" · ".join(x) for x in (head, probe, lines) if x)


def _suite(rows: Sequence[dict], state: dict) -> str:
    suites = sorted({str(r.get("suite")) for r in rows if r.get("suite")})
    return f"Suite {', '.join(suites) or state.get('suite') or '–'}"


def position_caption(rows: Sequence[dict], state: dict, layer_label: str) -> str:
    """The per-position view: suite, lengths, layer, what a point is."""
    lengths = sorted({int(r["eval_length"]) for r in rows})
    return " · ".join(
        [
            _suite(rows, state),
            ", ".join(length_label(L) for L in lengths) or "no length",
            f"probe at the {layer_label}",
            "accuracy at each position t, mean over seeds (95% t-interval, clipped to 0–100%)",
        ]
        + (["trained runs only"] if state.get("trained") else [])
    )


def behaviour_caption(runs: Sequence[dict], state: dict) -> str:
    """The behaviour-by-length view: suite, runs, what a point is (controls never in it)."""
    return " · ".join(
        [
            _suite(runs, state),
            f"{len(runs)} runs (random-init controls not included)",
            "token accuracy of the model itself at each eval length (trained at L=40), mean over seeds "
            "(95% t-interval, clipped to 0–100%)",
        ]
        + (["trained runs only"] if state.get("trained") else [])
    )
