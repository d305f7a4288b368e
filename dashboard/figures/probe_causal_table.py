"""Probe versus causal, the data: the tidy table behind a run's heatmap (and its CSV), the
layers it marks (the best probe layer and its near-best ties; each edit's most damaging layer),
and the settings its rows must share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dashboard.figures.captions import MEASUREMENT_VERSION_SETTING
from dashboard.figures.causal_controls import MethodTraits, not_selective, rank_share
from dashboard.figures.common import finite
from dashboard.theme import layer_name
from science.claims import DECOUPLING_METHODS, beyond_random, edit_removed
from science.profiles import NEAR_BEST_TOL

# the settings that must agree for one heatmap to compare its cells
PROBE_SETTINGS = (
    ("config_hash", "probe configuration"),
    ("n_train", "probe training sequences"),
    ("n_test", "probe test sequences"),
)
EDIT_SETTINGS = (
    ("config_hash", "edit configuration"),
    ("n_sequences", "edit evaluation sequences"),
    ("n_fit_sequences", "edit fit sequences"),
)
# across runs, counts and the measurement version: a follow-up job's config_hash includes its run id
EDIT_SETTINGS_ACROSS_RUNS = (*EDIT_SETTINGS[1:], MEASUREMENT_VERSION_SETTING)


def probe_causal_table(
    probes: Sequence[dict],
    interventions: Sequence[dict],
    *,
    method_traits: MethodTraits,
    eval_length: int | None = None,
    d_model: int | None = None,
) -> list[dict[str, Any]]:
    """Tidy rows ``{layer, layer_name, measure, kind, value, unit, p_holm, significant}``:
    the data behind the heatmap (and its CSV). A drop's ``value`` is read beyond its rank-matched
    random removal where stored, mean ablation's raw (``science.claims.beyond_random``: ``delta_pp − random_delta_pp``;
    ``delta_raw_pp``, ``random_delta_pp/lo/hi``, ``random_draws`` kept beside it); ``rank_share``
    = ``rank_removed / d_model`` and ``not_selective`` (a rank chosen by the fit, as INLP's, over
    half the width) when known; claim 4's methods (``DECOUPLING_METHODS``) say whether the edit
    removed the variable. ``method_traits``: ``GET /api/meta``'s (how each method's rows read)."""
    rows: list[dict[str, Any]] = []
    for p in probes:
        if eval_length is not None and int(p["eval_length"]) != int(eval_length):
            continue
        rows.append(
            {
                "layer": int(p["layer"]),
                "layer_name": layer_name(int(p["layer"])),
                "measure": "probe",
                "kind": "accuracy",
                "value": p["accuracy"],
                "unit": "accuracy",
                "baseline": p.get("majority_baseline"),
                "p_holm": None,
                "significant": None,
            }
        )
    for r in interventions:
        if eval_length is not None and int(r["eval_length"]) != int(eval_length):
            continue
        m = r["method"]
        common = {
            "layer": int(r["layer"]),
            "layer_name": layer_name(int(r["layer"])),
            "p_holm": r.get("p_holm"),
            "significant": r.get("significant"),
        }
        # mean ablation removes the whole width: its stored random removal is mean ablation
        # itself (one draw of D directions), so it reads raw, as the ceiling
        raw = method_traits.get(m, {}).get("random_control_is_itself", False)
        br = r if raw else beyond_random(r)
        rows.append(
            {
                **common,
                "measure": f"drop:{m}",
                "kind": "drop",
                "value": br["delta_pp"],
                "unit": "pp",
                "baseline": None,
                "delta_raw_pp": r.get("delta_pp"),
                "beyond_random": br.get("delta_raw_pp") is not None,
                **{
                    k: r.get(k)
                    for k in ("random_delta_pp", "random_delta_lo", "random_delta_hi", "random_draws", "rank_removed")
                },
                "rank_share": rank_share(r, d_model),
                "not_selective": not_selective(r, d_model, method_traits),
            }
        )
        if (
            m in DECOUPLING_METHODS
            and finite(r.get("refit_acc"))
            and (finite(r.get("refit_line")) or finite(r.get("refit_majority")))
        ):
            rows[-1]["removed"] = edit_removed(r)  # claim 4: a drop counts only where the edit removed it
        if m != "conv1d_removal" and finite(r.get("refit_acc")):
            rows.append(
                {
                    **common,
                    "measure": f"refit:{m}",
                    "kind": "accuracy",
                    "value": r["refit_acc"],
                    "unit": "accuracy",
                    "baseline": r.get("refit_majority"),
                    "p_holm": None,
                    "significant": None,
                }
            )
    return rows


def best_probe_layer(probes: Sequence[dict], eval_length: int | None = None) -> int | None:
    ps = [p for p in probes if eval_length is None or int(p["eval_length"]) == int(eval_length)]
    ps = [p for p in ps if int(p["layer"]) >= -1 and finite(p.get("accuracy"))]
    if not ps:
        return None
    best = max(p["accuracy"] for p in ps)
    # ties → the earliest layer reaching the best accuracy
    return min(int(p["layer"]) for p in ps if p["accuracy"] >= best - 1e-12)


def near_best_probe_layers(probes: Sequence[dict], eval_length: int | None = None) -> list[int]:
    """Layers whose probe accuracy is within ``science.profiles.NEAR_BEST_TOL`` of the best (claim 4's
    near-best rule): more than one = a tie, the argmax decided by noise."""
    ps = [
        p
        for p in probes
        if (eval_length is None or int(p["eval_length"]) == int(eval_length))
        and int(p["layer"]) >= -1
        and finite(p.get("accuracy"))
    ]
    if not ps:
        return []
    top = max(float(p["accuracy"]) for p in ps)
    # as science.profiles.near_best_layers, which needs a gap-free curve (a run's heatmap may have gaps)
    return sorted(int(p["layer"]) for p in ps if float(p["accuracy"]) >= top - NEAR_BEST_TOL - 1e-12)


def most_damaging_layer(interventions: Sequence[dict], method: str, eval_length: int | None = None) -> int | None:
    """The layer where ``method`` costs most, among real drops (Δ < 0) that are significant after
    Holm (or whose significance is not stored); None when no drop qualifies: a "+0.0 n.s." cell
    is never called the most damaging."""
    rs = [
        r
        for r in interventions
        if r["method"] == method
        and int(r["layer"]) >= -1
        and (eval_length is None or int(r["eval_length"]) == int(eval_length))
        and finite(r.get("delta_pp"))
        and r["delta_pp"] < 0
        and r.get("significant") is not False
    ]
    if not rs:
        return None
    return int(min(rs, key=lambda r: (r["delta_pp"], r["layer"]))["layer"])
