"""The detail of claim 4 (``science.claims.necessity``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.claims_text.common import f2, group_why_text, with_untestable
from science.claims.common import DECOUPLING_METHODS, EVAL_LENGTH

STATE_PATCH_NOTE = (
    "Why the last block can read ~0 in stacked recurrent models: patching one block's state leaves "
    "the blocks below it corrupted, and their outputs carry the corrupted information back into the "
    "patched block at every later position. Descriptive, not part of the verdict."
)


def _group_part(name: str, g: Mapping[str, Any]) -> str:
    iv = "" if g["share"] is None else f" = {g['share']:.0%} [95% Wilson {g['lo']:.0%}, {g['hi']:.0%}]"
    return (
        f"{'from scratch' if name == 'scratch' else 'pretrained'}: {g['decoupled']}/{g['n']} decoupled{iv}, "
        f"{g['not_removed']} run(s) whose edit left the variable readable (not removed) → {g['verdict']}"
        + (f" ({group_why_text(g['why'])})" if g.get("why") else "")
    )


def _interval(v: Mapping[str, Any]) -> str:
    return f2(v["mean"]) + (f" [{f2(v['lo'])}, {f2(v['hi'])}]" if v.get("lo") is not None else "")


def necessity_detail(claim: Mapping[str, Any]) -> str:
    return with_untestable(_necessity_detail(claim), claim["numbers"])


def _necessity_detail(claim: Mapping[str, Any]) -> str:
    n = claim["numbers"]
    if claim["why"]["case"] == "no data":
        return f"needs trained runs with probe curves and {'/'.join(DECOUPLING_METHODS)} edits at L={EVAL_LENGTH}"
    patch = n["state_patching"]
    patch_txt = (
        "no state patching stored"
        if patch is None
        else "; ".join(f"{k}: {_interval(v)} (n={v['n']})" for k, v in patch.items() if isinstance(v, dict))
    )
    tol = f"{n['refit_tolerance'] * 100:g} pp above the majority rate"
    line = "its removal line (the best constant guess + the larger of 2 pp and the sampling noise)"
    counts = {
        "stored": f"at or under {line}",
        "mixed": f"at or under {line}, or on measurement version 1 rows at most {tol}",
    }.get(n.get("removal_lines", "majority"), f"at most {tol}")
    detail = (
        f"An edit counts only where its refit probe reads {counts}; a group supports the claim when the "
        "Wilson interval of its decoupled share is above "
        f"{n['decoupled_share_min']:.0%}. "
        + "; ".join(_group_part(name, g) for name, g in n["groups"].items())
        + f". State patching at the last block, mid-position: {patch_txt}."
    )
    by_layer = n.get("state_patching_best_layer")
    if by_layer:
        detail += (
            " Layer whose state patch at the middle position recovers most: "
            + "; ".join(
                f"{b['family']} layer {b['best_layer']} ({f2(b['best_recovery']['mean'])}, "
                f"n={b['best_recovery']['n']}; best layer per run: {', '.join(map(str, b['best_layer_per_run']))})"
                for b in by_layer
            )
            + ". "
            + STATE_PATCH_NOTE
        )
    return detail
