"""A claim's section of docs/RESULTS.md (``backend.report``) beside its verdict: which floor
decided it, the descriptive paragraph of a "not enough data" claim, and its numbers flattened
into Markdown bullets (``{mean, lo, hi, n}`` dicts as intervals). Plain data in, lines out."""

from __future__ import annotations

from typing import Any

from backend.claims_text.common import f2

__all__ = ["MAX_LIST", "numbers_lines", "floor_lines", "trained_cells_paragraph"]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


MAX_LIST = 30


def _inline(entry: dict[str, Any], prefix: str = "") -> str:
    """One list entry of a claim's numbers on one line: scalars, intervals, nested dicts."""
    parts = []
    for key, v in entry.items():
        if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
            if v["mean"] is not None:
                ci = f" [{_fmt(v['lo'])}, {_fmt(v['hi'])}]" if v.get("lo") is not None else ""
                parts.append(f"{prefix}{key} {_fmt(v['mean'])}{ci}")
        elif isinstance(v, dict):
            inner = _inline(v, f"{prefix}{key}.")
            if inner:
                parts.append(inner)
        elif v is not None and not isinstance(v, list):
            parts.append(f"{prefix}{key} {_fmt(v)}")
    return "; ".join(parts)


def numbers_lines(numbers: dict[str, Any], prefix: str = "") -> list[str]:
    """Flatten a claim's numbers into Markdown bullets; ``{mean, lo, hi, n}`` dicts as intervals."""
    out: list[str] = []
    for key, v in numbers.items():
        name = f"{prefix}{key}"
        if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
            n = f", n = {v['n']}" if v.get("n") is not None else ""
            if v["mean"] is None:
                out.append(f"- {name}: no value{n}")
            else:
                ci = f" [95% CI {_fmt(v['lo'])}, {_fmt(v['hi'])}]" if v.get("lo") is not None else ""
                out.append(f"- {name}: {_fmt(v['mean'])}{ci}{n}")
        elif isinstance(v, dict):
            out.extend(numbers_lines(v, f"{name}."))
        elif isinstance(v, list):
            if v and all(isinstance(x, dict) for x in v):
                out.append(f"- {name}:")
                out.extend(f"  - {_inline(x)}" for x in v[:MAX_LIST])
                if len(v) > MAX_LIST:
                    out.append(f"  - … {len(v) - MAX_LIST} more (the dashboard's claims page lists them all)")
            else:
                out.append(f"- {name}: {', '.join(_fmt(x) for x in v) or '–'}")
        elif v is not None:
            out.append(f"- {name}: {_fmt(v)}")
    return out


# claims whose measurements no control of docs/SCIENCE.md#controls or #random-removal reads against
NO_CONTROL = {
    5: "Conv1D removal is no projection, so it has no rank-matched random removal; the claim reads no probe",
    6: "behaviour (token accuracy by eval length) reads no probe and no edit",
}


def _group_counts(groups: dict[str, Any]) -> str:
    return "; ".join(
        f"{'from scratch' if name == 'scratch' else name} {g.get('decoupled')}/{g.get('n')} decoupled"
        for name, g in groups.items()
    )


def without_controls_line(claim: dict[str, Any]) -> str | None:
    """Claim 4: its verdict beside the same rule without the rank-matched random removal, without
    the removal rule, and without both (``numbers.without_controls``), each with its counts."""
    n = claim.get("numbers") or {}
    readings, groups = n.get("without_controls"), n.get("groups") or {}
    if not readings:
        return None
    parts = []
    for name, r in readings.items():
        same = "the same" if r["verdict"] == claim["verdict"] else "**changed**"
        parts.append(f"{r.get('label', name)}: {r['verdict']} ({_group_counts(r['groups'])}; {same})")
    return (
        f"**With and without controls**: decided on drops beyond rank-matched random removal, counting "
        f"only edits that removed the variable: {claim['verdict']} ({_group_counts(groups)}); " + "; ".join(parts) + "."
    )


def floor_lines(claim: dict[str, Any]) -> list[str]:
    """Which floor decided the verdict of claims 1–3, the verdict against the other one beside
    it (and whether it changed), and the fragile classes it reads (docs/SCIENCE.md#controls);
    for claim 4, its verdict beside the readings without its controls."""
    n = claim.get("numbers") or {}
    out = []
    if (line := without_controls_line(claim)) is not None:
        out.append(line)
    if claim.get("id") in NO_CONTROL:
        out.append(f"**With and without controls**: no control applies: {NO_CONTROL[claim['id']]}.")
    alt = n.get("majority_floor")
    if alt:
        changed = "the same verdict" if alt["verdict"] == claim["verdict"] else f"**changed** from {alt['verdict']}"
        out.append(
            f"**With and without controls**: decided against the random-init controls (each cell's learned "
            f"gain over its seeds' untrained twins): {claim['verdict']}; against the majority rate alone: "
            f"{alt['verdict']} — {changed}."
        )
    elif n.get("floor") == "majority rate":
        out.append("**Floor**: the majority rate (no random-init controls are stored for this suite).")
    if n.get("stacked_rnns"):
        st = n["stacked_rnns"]
        out.append(
            f"**With the stacked LSTM/GRU** (`lstm_stack`, `gru_stack`: no residual stream, as "
            f"`nn.LSTM(num_layers=4)` stacks; docs/SCIENCE.md#stacked-rnns): {st['verdict']}. {st['detail']}"
        )
    if n.get("fragile"):
        out.append(
            "**Fragile**: " + "; ".join(n.get("fragile_cells") or []) + " (of the 81 threshold settings "
            "within the documented margins; docs/SCIENCE.md#class-stability)."
        )
    return [*out, ""] if out else []


def _iv(v: dict[str, Any]) -> str:
    if v.get("mean") is None:
        return "no value"
    ci = f" [{f2(v['lo'])}, {f2(v['hi'])}]" if v.get("lo") is not None else " (one seed: no interval)"
    return f"{f2(v['mean'])}{ci}, n = {v['n']}"


def trained_cells_paragraph(cells: list[dict[str, Any]], *, conv1d: bool = False) -> list[str]:
    """'What the trained cells show' for a "not enough data" claim: descriptive, not a verdict
    (``conv1d``: claim 5, whose cells are read through the Conv1D removal)."""
    if not cells:
        what = "a Conv1D removal of every layer" if conv1d else "a probe curve"
        return [
            "**What the trained cells show** (descriptive, not a verdict): no cell this claim reads has a "
            f"trained run with {what} at L = 40.",
            "",
        ]
    from dashboard.figures.common import class_with_split  # the class with its per-seed split

    if conv1d:  # claim 5: the Conv1D removal, not the probe curve
        return [
            "**What the trained cells show** (descriptive, not a verdict: too few trained seeds for the rule "
            "above to decide; the share of the gain over chance lost when Conv1D is removed from every layer, "
            "with its 95% t-interval over the n trained runs that have it): "
            + "; ".join(f"{c['family']} × {c['task']}: {_iv(c['drop_rel_chance'])}" for c in cells)
            + ".",
            "",
        ]
    parts = [
        f"{c['family']} × {c['task']}: class {class_with_split(c['profile_class'], c.get('class_votes'))}"
        + (f" (the claim expects {c['expected']})" if c.get("expected") else "")
        + f", late concentration {_iv(c['late_concentration'])}"
        for c in cells
    ]
    return [
        "**What the trained cells show** (descriptive, not a verdict: too few trained seeds for the rule "
        "above to decide; the profile class of the seed-mean probe curve at L = 40, and the late concentration "
        "with its 95% t-interval over the n trained seeds): " + "; ".join(parts) + ".",
        "",
    ]
