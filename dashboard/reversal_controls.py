"""/reversal's issue-20 additions: the control-adjusted class and class stability in the CSV,
and the caption saying which suite, length and floor the matrix shows."""

from __future__ import annotations

from typing import Any

from dashboard.theme import length_label


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def control_csv_columns(profile: dict[str, Any]) -> dict[str, Any]:
    """``control_class`` (against the seeds' random-init controls; empty without them),
    ``control_class_votes``, and the class stability ``stable`` / ``stability_agree`` / ``stability_of``."""
    ac, st = _dict(profile.get("against_control")), _dict(profile.get("stability"))
    votes = _dict(ac.get("class_votes"))
    return {
        "control_class": ac.get("profile_class"),
        "control_class_votes": ", ".join(f"{v} {k}" for k, v in votes.items()) or None,
        "stable": st.get("stable"),
        "stability_agree": st.get("agree"),
        "stability_of": st.get("of"),
    }


def _length(state: dict[str, Any]) -> str:
    length = state.get("length")
    return (
        length_label(length) if isinstance(length, int) and not isinstance(length, bool) else "eval length not chosen"
    )


def matrix_caption(profiles: list[dict[str, Any]], state: dict[str, Any]) -> str:
    """``Suite paper · L=40 (in-distribution) · 3 seeds per cell · trained runs only · class of the
    seed-mean curve against the majority rate; 12 of 15 cells also against their controls``."""
    suites = sorted({str(p["suite"]) for p in profiles if p.get("suite")})
    ns = sorted({int(p["n"]) for p in profiles if isinstance(p.get("n"), int)})
    seeds = (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}–{ns[-1]}") if ns else "?"
    n_ctrl = sum(bool((p.get("against_control") or {}).get("profile_class")) for p in profiles)
    bits = [f"Suite {', '.join(suites) or state.get('suite') or '–'}", _length(state), f"{seeds} seeds per cell"]
    if state.get("trained"):
        bits.append("trained runs only")
    floor = (
        f"{n_ctrl} of {len(profiles)} cells also against their random-init controls"
        if n_ctrl
        else "no random-init controls stored"
    )
    return " · ".join(bits) + "\nclass of the seed-mean curve against the majority rate; " + floor


def s3_caption(curves: list[dict[str, Any]], state: dict[str, Any]) -> str:
    """What the S3 figure measures and on which curves."""
    suites = sorted({str(r["suite"]) for r in curves if r.get("suite")})
    return " · ".join(
        [
            f"Suite {', '.join(suites) or state.get('suite') or '–'}",
            _length(state),
            "RMS distance between S3's seed-mean normalised layer curve and Parity's / Dyck's, per family "
            "(against the majority rate)",
        ]
        + (["trained runs only"] if state.get("trained") else [])
    )
