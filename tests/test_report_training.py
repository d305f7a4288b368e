"""docs/RESULTS.md's bundle summary and training section: counts read from the data (trained,
measured), the preset's seeds as denominator with never-started cells, the training budget used,
and the descriptive paragraph beside a "not enough data" claim. Plain data in, text out."""

from __future__ import annotations

import pytest

from backend.report import _markdown
from backend.report_claims import trained_cells_paragraph
from backend.report_training import budget_lines, preset_of


def _run(rid, task, family, seed, acc, *, seconds=75.0, stopped=False, max_seconds=75.0):
    return {
        "id": rid,
        "task": task,
        "family": family,
        "seed": seed,
        "heldout_acc": acc,
        "early_stop_acc": 0.99,
        "steps": 500,
        "train_seconds": seconds,
        "stopped_early": stopped,
        "pretrained": None,
        "status": "complete",
        "train_config": {"max_seconds": max_seconds, "max_steps": 10_000},
    }


RUNS = [
    _run(1, "parity", "lstm", 0, 1.0, seconds=30, stopped=True),
    _run(2, "parity", "lstm", 1, 1.0, seconds=31, stopped=True),
    _run(3, "parity", "transformer", 0, 0.47),
]
MANIFEST = {"suite": "paper", "devices": ["cpu on box"], "tables": {}, "created_at": "now"}


def _text(claims=()):
    return _markdown(MANIFEST, RUNS, {1, 3}, list(claims), "figures", "figures turned off", "b.zip", {1, 2, 3})


def test_preset_of_reads_the_paper_preset():
    p = preset_of("paper")
    assert len(p["families"]) == 5 and len(p["tasks"]) == 4 and len(p["seeds"]) == 3
    # 60 runs + the stacked RNNs on parity and S3 (12), each with its random-init control
    assert p["runs"] == 60 + 12 and p["controls"] == 72 and p["max_seconds"] == 14_400.0 and p["max_steps"] == 3_000
    old = preset_of("paper-75s")
    assert old["runs"] == 60 and old["max_seconds"] == 75.0 and old["max_steps"] == 10_000
    assert preset_of("my-own-suite") is None


def test_trained_and_measured_are_counted_separately():
    text = _text()
    assert "- runs: 3 stored of the preset's 72 (69 never started); 2 trained" in text
    assert "2 measured (probe, intervention and patching results all stored), of which 1 trained" in text
    assert "complete" not in text.split("## Training")[0]


def test_training_table_uses_the_preset_seeds_and_lists_cells_never_started():
    text = _text()
    assert "| parity | lstm | 2/3 | 2/3 | 2/3 | 1/3 |" in text
    assert "| parity | transformer | 1/3 | 0/3 | 1/3 | 1/3 |" in text
    assert "| dyck | mamba | 0/3, never started |" in text and "| code_depth | gru | 0/3, never started |" in text
    assert text.count("never started |") == 20 - 2


def test_budget_used_is_stated_next_to_the_preset():
    lines = budget_lines(RUNS, preset_of("paper"))
    assert lines[0].startswith("Training budget used: at most 75 s / 10,000 steps per run")
    assert "the preset allows 14400 s / 3,000 steps by default, more for some cells" in lines[0]
    assert "(the runs were given a different budget" in lines[0]
    assert lines[1] == (
        "1 of 3 stored runs were stopped by that budget (stop reason budget, or no early stop where a run "
        "records no reason; a run that had plateaued counts as plateau, at its last step too): 1 ended below "
        "the criterion (untrained), 0 reached it by the end (trained)."
    )
    # a run that ran to the budget yet ends above the criterion is trained, as the claims read it
    late = budget_lines([*RUNS, _run(4, "dyck", "mamba", 0, 0.993)], preset_of("paper"))
    assert (
        late[1].startswith("2 of 4 stored runs were stopped by that budget")
        and "1 ended below" in late[1]
        and "1 reached it by the end (trained)" in late[1]
    )
    same = budget_lines([_run(1, "parity", "lstm", 0, 1.0)], preset_of("paper-75s"))  # 75 s / 10,000: its preset
    assert "different budget" not in same[0]
    mixed = budget_lines([*RUNS, _run(4, "s3", "gru", 0, 1.0, max_seconds=240.0)], None)
    assert "75 s / 10,000 steps (3 runs)" in mixed[0] and "240 s / 10,000 steps (1 runs)" in mixed[0]


def test_per_cell_budgets_are_the_presets_and_a_plateau_is_not_a_budget_stop():
    """The paper preset gives some cells more steps (cell_train): runs given exactly their cell's
    budget are not "a different budget than the preset's"; a run stopped at a plateau ended
    without the early stop but did not run to its budget (found by an independent recomputation)."""

    def paper_run(rid, task, family, steps, reason, acc, seconds=14_400.0):
        return {
            **_run(rid, task, family, 0, acc, stopped=reason == "trained"),
            "train_config": {"max_seconds": seconds, "max_steps": steps},
            "stop_reason": reason,
        }

    runs = [  # revision 2's cells: longer budgets with a 48 h safety cap
        paper_run(1, "s3", "transformer", 40_000, "budget", 0.37, seconds=172_800.0),
        paper_run(2, "parity", "mamba2", 8_000, "plateau", 0.985, seconds=172_800.0),
        paper_run(3, "parity", "lstm", 3_000, "trained", 1.0),
    ]
    lines = budget_lines(runs, preset_of("paper"))
    assert "more for some cells" in lines[0] and "different budget" not in lines[0]
    assert lines[1].startswith("1 of 3 stored runs were stopped by that budget") and "1 ended below" in lines[1]
    wrong = budget_lines([paper_run(4, "parity", "lstm", 6_000, "trained", 1.0)], preset_of("paper"))
    assert "(the runs were given a different budget than the preset's)" in wrong[0]


def test_not_enough_data_claim_gets_a_descriptive_paragraph_not_numbers():
    cells = [
        {
            "task": "parity",
            "family": "lstm",
            "n": 3,
            "profile_class": "early",
            "expected": "late",
            "late_concentration": {"mean": -0.0001, "lo": -0.001, "hi": 0.002, "n": 3},
        },
        {
            "task": "dyck",
            "family": "mamba2",
            "n": 1,
            "profile_class": "early",
            "late_concentration": {"mean": 0.03, "lo": None, "hi": None, "n": 1},
        },
    ]
    claim = {
        "id": 1,
        "title": "t",
        "verdict": "not enough data",
        "detail": "short.",
        "numbers": {"trained_cells": cells, "alpha": 0.05},
    }
    text = _text([claim])
    para = next(line for line in text.splitlines() if line.startswith("**What the trained cells show**"))
    assert "not a verdict" in para
    assert "lstm × parity: class early (the claim expects late), late concentration 0.00 [0.00, 0.00], n = 3" in para
    assert "mamba2 × dyck: class early, late concentration 0.03 (one seed: no interval), n = 1" in para
    assert "trained_cells" not in text and "- alpha: 0.05" in text
    assert "no cell this claim reads" in trained_cells_paragraph([])[0]


def test_each_note_of_a_partial_study_is_its_own_line():
    manifest = {
        **MANIFEST,
        "partial": {
            "runs_measured": 2,
            "preset_runs": 60,
            "runs_remaining": 58,
            "why": "one GPU lease",
            "notes": ["resumed on a CPU.", "and again"],
        },
    }
    text = _markdown(manifest, RUNS, {1, 3}, [], "figures", "figures turned off", "b.zip", {1, 2, 3})
    assert (
        "- partial: 2 of the preset's 60 runs measured, 58 remain; the notes of its exports:\n"
        "  - one GPU lease\n  - resumed on a CPU.\n  - and again\n" in text
    )
    bare = {**manifest, "partial": {k: v for k, v in manifest["partial"].items() if k not in ("why", "notes")}}
    text = _markdown(bare, RUNS, {1, 3}, [], "figures", "figures turned off", "b.zip", {1, 2, 3})
    assert "- partial: 2 of the preset's 60 runs measured, 58 remain.\n" in text  # no notes: no dangling colon
    assert "the notes of its exports" not in text


def test_claim_5_with_no_trained_cell_names_the_conv1d_removal():
    from backend.report_claims import trained_cells_paragraph

    assert "a Conv1D removal of every layer" in trained_cells_paragraph([], conv1d=True)[0]
    assert "a probe curve" in trained_cells_paragraph([])[0]


def test_rebuilt_runs_show_what_they_recorded_next_to_what_the_rebuild_gave():
    from backend.report_training import rebuilt_lines

    rebuilt = {
        **_run(4, "dyck", "transformer", 0, 0.9905, seconds=300.0, stopped=True),
        "made_on": "cpu on box",
        "made_with": {
            "git_commit": "abc",
            "rebuilt_from": {
                "made_on": "cuda (NVIDIA H200) on vm",
                "steps": 700,
                "train_seconds": 26.0,
                "heldout_acc": 0.9912,
                "stopped_early": True,
            },
        },
    }
    assert rebuilt_lines(RUNS) == []  # nothing rebuilt: no section
    lines = rebuilt_lines([*RUNS, rebuilt])
    assert lines[0].startswith("1 run(s) came without weights and had them rebuilt")
    assert (
        "| dyck | transformer | 0 | cuda (NVIDIA H200) on vm | 2019 | 700 → 500 | 26 → 300 on cpu on box | "
        "0.9912 (trained) → 0.9905 (trained) |"
    ) in lines
    text = _markdown(MANIFEST, [*RUNS, rebuilt], {1, 3}, [], "figures", "figures turned off", "b.zip", {1, 2, 3})
    assert "had them rebuilt here" in text.split("## Training")[1]


def test_the_header_names_the_command_as_it_was_given():
    """It said `-o docs/RESULTS.md` whatever the output was."""
    text = _markdown(
        MANIFEST, RUNS, {1, 3}, [], "figures", "figures turned off", "examples/x.zip", {1, 2, 3}, output_name="out/R.md"
    )
    assert "Generated by `layerscope report examples/x.zip -o out/R.md`" in text


def test_claims_read_against_controls_say_both_verdicts_and_fragility():
    from backend.report_claims import floor_lines

    claim = {
        "id": 2,
        "verdict": "supported",
        "numbers": {
            "floor": "random-init control",
            "majority_floor": {"verdict": "contradicted", "detail": "d", "cells": []},
            "fragile": True,
            "fragile_cells": ["transformer × dyck: early under 60 of 81 threshold settings"],
        },
    }
    text = "\n".join(floor_lines(claim))
    assert "against the random-init controls" in text and "**changed** from contradicted" in text
    assert "Fragile" in text and "60 of 81" in text
    plain = "\n".join(floor_lines({"id": 1, "verdict": "supported", "numbers": {"floor": "majority rate"}}))
    assert "no random-init controls are stored" in plain
    assert floor_lines({"id": 5, "verdict": "supported", "numbers": {}})[0].startswith(
        "**With and without controls**: no control applies: Conv1D removal is no projection"
    )
    assert floor_lines({"id": 3, "verdict": "supported", "numbers": {}}) == []


def test_claim_4_is_reported_beside_its_readings_without_controls():
    from backend.report_claims import floor_lines

    def group(k, n):
        return {"scratch": {"decoupled": k, "n": n, "not_removed": 0, "verdict": "x"}}

    claim = {
        "id": 4,
        "verdict": "contradicted",
        "numbers": {
            "groups": group(0, 42),
            "without_controls": {
                "raw drops": {
                    "label": "drops read raw (not beyond random removal)",
                    "verdict": "contradicted",
                    "groups": group(0, 42),
                },
                "no removal rule": {
                    "label": "every edit counted, removed or not",
                    "verdict": "not enough data",
                    "groups": group(1, 51),
                },
            },
        },
    }
    text = floor_lines(claim)[0]
    assert "counting only edits that removed the variable: contradicted (from scratch 0/42 decoupled)" in text
    assert "drops read raw (not beyond random removal): contradicted (from scratch 0/42 decoupled; the same)" in text
    assert "every edit counted, removed or not: not enough data (from scratch 1/51 decoupled; **changed**)" in text


def test_stop_reasons_and_cells_not_learned_are_listed():
    from backend.report_training import stop_reason_lines

    rev3 = {"plateau_revision": 3}
    runs = [
        {**_run(i, "s3", "mamba", i, 0.6), "stop_reason": "plateau", "best_heldout_acc": 0.61, "best_step": 2000}
        for i in range(3)
    ]
    for r in runs:
        r["train_config"] = {**(r.get("train_config") or {}), **rev3}
    runs += [
        {**_run(9, "parity", "lstm", 0, 1.0), "stop_reason": "trained"},
        {**_run(10, "parity", "lstm", 0, 0.5), "control": "init"},
    ]
    runs += [
        {**_run(20 + i, "s3", "transformer", i, 0.4), "stop_reason": "budget", "best_heldout_acc": 0.4, "best_step": 6}
        for i in range(3)
    ]
    text = "\n".join(stop_reason_lines(runs))
    mixed = [  # one seed trained, two plateaued below the criterion
        {**_run(30, "parity", "mamba2", 0, 0.995), "stop_reason": "trained"},
        *[
            {**_run(31 + i, "parity", "mamba2", 1 + i, 0.985), "stop_reason": "plateau", "best_heldout_acc": 0.986}
            for i in range(2)
        ],
    ]
    for r in mixed:  # revision 2 stopped runs still rising: more steps would decide, not "not learned"
        r["train_config"] = {**(r.get("train_config") or {}), "plateau_evals": 20, "plateau_gap_share": 0.2}
    rev2_text = "\n".join(stop_reason_lines(mixed))
    assert "not learned" not in rev2_text
    assert (
        "mamba2 × parity: not enough data: more steps would decide (2 stopped by plateau rule revision 2" in rev2_text
    )
    assert "seed 1 at step 500 of 10,000 (5% of its budget)" in rev2_text
    for r in mixed:
        r["train_config"] = {**r["train_config"], **rev3}
    mixed_text = "\n".join(stop_reason_lines(mixed))
    assert "mamba2 × parity: not learned by every seed of this architecture" in mixed_text
    assert "1 trained, the others plateaued" in mixed_text
    assert "budget 3, plateau 3, trained 1" in text
    assert "mamba × s3: not learned by this architecture at this size within 10,000 steps" in text
    assert "transformer × s3: not enough data: more steps would decide (3 stopped by the step budget" in text
    assert "mamba × s3: not enough" not in text
    assert "1 random-init control run(s)" in text
    assert stop_reason_lines([_run(1, "parity", "lstm", 0, 1.0)]) == []  # made before stop reasons were recorded


def test_the_bundle_section_says_when_its_rows_mix_measurement_versions():
    one = {"probe_results": {2: 10}, "intervention_results": {2: 4}, "patching_results": {}}
    text = _markdown(MANIFEST, RUNS, {1, 3}, [], "figures", "off", "b.zip", {1, 2, 3}, versions=one)
    assert "- measurement version: 2 (every result row)" in text and "mixed" not in text.split("## Training")[0]
    mixed = {"probe_results": {1: 6, 2: 4}, "intervention_results": {2: 4}, "patching_results": {}}
    text = _markdown(MANIFEST, RUNS, {1, 3}, [], "figures", "off", "b.zip", {1, 2, 3}, versions=mixed)
    line = next(x for x in text.splitlines() if "measurement versions mixed" in x)
    assert "probe_results version 1: 6, version 2: 4" in line and "#measurement-versions" in line


def test_the_report_counts_the_cells_a_filtered_suite_asked_for():
    """A bundle of ``suite --preset smoke --family mamba --family mamba2 --task parity`` carries its
    suite job's params; the report's cells are those two, not the preset's 15 ("13 never started")."""
    from backend.report_training import preset_of
    from worker.job_params import SuiteParams

    params = SuiteParams(preset="smoke", name="fam", families=["mamba", "mamba2"], tasks=["parity"])
    asked = preset_of("fam", [], params.model_dump(mode="json"))
    assert asked is not None and (asked["families"], asked["tasks"], asked["runs"]) == (
        ["mamba", "mamba2"],
        ["parity"],
        2,
    )
    whole = preset_of("smoke", [])
    assert whole is not None and whole["runs"] == 15 and len(whole["families"]) == 5


@pytest.mark.parametrize("bad", [["smoke"], "smoke", 3, {"preset": "smoke", "seeds": "zero"}])
def test_a_bundles_suite_params_that_are_no_suite_are_ignored(bad):
    from backend.report_training import preset_of

    got = preset_of("smoke", [], bad)
    assert got is not None and got["runs"] == 15  # the preset's cells, as without them
