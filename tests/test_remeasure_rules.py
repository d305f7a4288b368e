"""checks/remeasure_agreement.py's reading of edit rows between measurement versions
(docs/SCIENCE.md#row-kinds), on small hand-made row sets: a refit both sides place at chance is
compared by that class, not by its digits; an edit row's kind (removed or not by its refit, an
INLP selective or not) is a verdict of its own; significance is compared between rows of one kind;
an INLP row is held to the two exact implementations."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from science.measurement_version import TOLERANCES

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remeasure_agreement", ROOT / "checks" / "remeasure_agreement.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["remeasure_agreement"] = check  # its dataclass looks its module up
_spec.loader.exec_module(check)


def _edit(refit: float, *, method: str = "leace", rank: int = 1, sig: bool = False, L: int = 40) -> dict[str, Any]:
    return {
        "eval_length": L,
        "method": method,
        "layer": 1,
        "rank_removed": rank,
        "refit_acc": refit,
        "refit_majority": 0.50,
        "significant": sig,
        "delta_pp": -40.0 if sig else 0.0,
    }


def _tables(*edits: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"probe_results": [], "patching_results": [], "intervention_results": list(edits)}


def _compare(old: list, new: list, ref: list | tuple = (), width: int | None = None) -> tuple[dict, list[str]]:
    lines, changed = check.compare(_tables(*old), _tables(*new), ref, width)
    return {x.table: x for x in lines}, changed


def test_refits_both_at_chance_are_compared_by_that_class_not_by_their_digits():
    # 0.43 and 0.515 against a majority of 0.50: both removed (≤ majority + 2 pp), 8.5 pp apart
    lines, changed = _compare([_edit(0.43)], [_edit(0.515)])
    assert lines["refits"].value == 0.0 and lines["refits"].ok and changed == []


def test_refits_above_chance_keep_their_digits():
    lines, changed = _compare([_edit(0.70)], [_edit(0.75)])
    assert abs(lines["refits"].value - 5.0) < 1e-9 and not lines["refits"].ok
    assert changed == []  # both not removed, significance the same
    lines, _ = _compare([_edit(0.70)], [_edit(0.70 + (TOLERANCES["refit_accuracy_pp"] - 0.1) / 100)])
    assert lines["refits"].ok


def test_a_refit_at_chance_on_one_side_only_changes_the_rows_kind():
    lines, changed = _compare([_edit(0.49)], [_edit(0.54)])  # removed → not removed (+4 pp)
    assert abs(lines["refits"].value - 5.0) < 1e-9 and not lines["refits"].ok
    assert len(changed) == 1 and "kind removed" in changed[0] and "→ not removed" in changed[0]
    text, ok = check.report(
        {
            "run_old": {"id": 1, "name": "r", "family": "lstm", "task": "parity", "seed": 0, "steps": 1},
            "run_new": {"steps": 1},
            "versions": [1],
            "old": _tables(_edit(0.49)),
            "new": _tables(_edit(0.54)),
        }
    )
    assert not ok and "CHANGED" in text[-2] and "kind removed" in text[-2]


def test_significance_is_compared_between_rows_of_one_kind_and_a_kind_change_is_said_instead():
    _, changed = _compare([_edit(0.50, sig=False)], [_edit(0.505, sig=True)])  # both removed
    assert changed == ["leace at layer 1, L=40: significant False → True"]
    # not removed (v1's own refit reads +20 pp) against removed: the kind changed; its significance
    # is not read the same on the two sides, so the one line is the kind's
    _, changed = _compare([_edit(0.70, sig=False)], [_edit(0.50, sig=True)])
    assert len(changed) == 1 and changed[0].startswith("leace at layer 1, L=40: kind not removed")


def test_an_inlp_over_half_the_width_is_a_kind_of_its_own():
    old, new = _edit(0.50, method="inlp", rank=79), _edit(0.50, method="inlp", rank=81)
    lines, changed = _compare([old], [new], width=160)
    assert lines["interventions"].ok  # 2 of 81 apart: within the rank's tolerance
    assert len(changed) == 1 and "rank 81 of 160, not selective" in changed[0]
    assert _compare([old], [new])[1] == []  # without the width no row is flagged


def test_an_inlp_rows_kind_and_verdict_are_held_to_the_two_exact_implementations():
    old = _edit(0.47, method="inlp", rank=155, L=120)  # removed
    new = _edit(0.586, method="inlp", rank=155, L=120)  # not removed: today's incremental rounds
    ref = _edit(0.502, method="inlp", rank=155, L=120)  # removed: the reference rounds on the same rows
    lines, changed = _compare([old], [new])
    assert changed and not lines["refits"].ok
    lines, changed = _compare([old], [new], [ref])
    assert changed == [] and lines["refits"].value == 0.0  # v1's kind and refit class are the reference's
    # version 1 stopped at chance; today's and the reference both went on to the whole width
    old = _edit(0.512, method="inlp", rank=123, sig=False)
    new = ref = _edit(0.50, method="inlp", rank=160, sig=True)
    lines, changed = _compare([old], [new], [ref], width=160)
    assert changed == ["inlp at layer 1, L=40: significant False → True (rank 123 → 160)"]
    assert not lines["interventions"].ok
    said = check.whole_width([old], [new], [ref], 160)
    assert len(said) == 1 and "stopped at rank 123" in said[0]
    assert check.whole_width([old], [new], [_edit(0.50, method="inlp", rank=150)], 160) == []


def test_a_version_2_row_is_read_against_its_own_removal_line() -> None:
    v1 = {"method": "leace", "refit_acc": 0.53, "refit_majority": 0.50}
    v2 = {**v1, "refit_line": 0.558}  # 3 pp over the majority: within 400 tokens' noise
    assert check._removal(v1) == "not removed" and check._removal(v2) == "removed"
    assert check._over(v1) == "refit +3.0 pp over majority"
    assert check._over(v2) == "refit +3.0 pp over majority (its removal line +5.8)"
