"""Claims: synthetic result sets built to support and to contradict each claim, and empty data."""

from __future__ import annotations

import json
import random

import pytest

from backend.claims_text import present_claims
from science.claims import CONTRADICTED, NOT_ENOUGH, SUPPORTED
from science.claims import evaluate_claims as evaluate_data

FAMILIES = ("transformer", "lstm", "gru", "mamba", "mamba2")
LATE = [0.50, 0.52, 0.53, 0.55, 0.99]
GRADUAL = [0.50, 0.62, 0.75, 0.87, 0.99]
EARLY = [0.55, 0.97, 0.98, 0.98, 0.98]


def evaluate_claims(*args, **kwargs):
    """The claims as ``GET /api/claims`` serves them: the science's verdicts and numbers, in words."""
    return present_claims(evaluate_data(*args, **kwargs))


class World:
    """Builds API-shaped rows: runs, probes, interventions, patching. Runs are trained (held-out
    accuracy 0.995 ≥ 0.99) unless ``heldout_acc`` says otherwise."""

    def __init__(self) -> None:
        self.runs, self.probes, self.interventions, self.patching = [], [], [], []
        self.rng = random.Random(0)

    def run(self, task, family, seed, curve, baseline=0.5, behaviour=None, pretrained=None, heldout_acc=0.995):
        rid = len(self.runs) + 1
        self.runs.append(
            {
                "id": rid,
                "task": task,
                "family": family,
                "seed": seed,
                "n_layers": len(curve) - 1,
                "pretrained": pretrained,
                "behaviour": behaviour or {},
                "heldout_acc": heldout_acc,
                "early_stop_acc": 0.99,
            }
        )
        for i, acc in enumerate(curve):
            noisy = min(1.0, acc + self.rng.uniform(-0.004, 0.004))
            self.probes.append(
                {"run_id": rid, "layer": i - 1, "eval_length": 40, "accuracy": noisy, "majority_baseline": baseline}
            )
            self.probes.append(
                {"run_id": rid, "layer": i - 1, "eval_length": 80, "accuracy": 0.5, "majority_baseline": baseline}
            )
        return rid

    def intervention(
        self,
        rid,
        method,
        layer,
        delta_pp,
        significant,
        eval_length=40,
        refit_acc=0.5,
        refit_majority=0.5,
        drop_rel_chance=None,
    ):
        self.interventions.append(
            {
                "run_id": rid,
                "method": method,
                "layer": layer,
                "eval_length": eval_length,
                "delta_pp": delta_pp,
                "p_value": 0.001 if significant else 0.4,
                "p_holm": 0.004 if significant else 0.8,
                "significant": significant,
                "refit_acc": refit_acc,
                "refit_majority": refit_majority,
                "drop_rel_chance": drop_rel_chance,
            }
        )

    def claims(self):
        out = evaluate_claims(self.runs, self.probes, self.interventions, self.patching)
        json.dumps(out)  # JSON-serialisable, as served
        return {c["id"]: c for c in out}


def _chance(curve, chance):
    """Rescale a binary-task curve (chance 0.5) to a task with another chance level."""
    return [chance + (a - 0.5) / 0.5 * (1 - chance) for a in curve]


def _behaviour(acc_by_length):
    return {str(L): {"token_acc": a, "last_acc": a, "n": 256} for L, a in acc_by_length.items()}


def supporting_world() -> World:
    w = World()
    lengths = (40, 60, 80, 100, 120)
    beh = {
        "lstm": dict.fromkeys(lengths, 1.0),
        "gru": dict.fromkeys(lengths, 0.999),
        "mamba2": dict.fromkeys(lengths, 0.85),
        "transformer": dict.fromkeys(lengths, 0.6),
    }
    for seed in (0, 1, 2):
        for fam in FAMILIES:
            for task in ("parity", "s3"):
                curve = GRADUAL if fam == "transformer" else LATE
                b = beh.get(fam)
                if fam == "mamba":
                    b = (
                        {40: 0.97, 60: 0.85, 80: 0.75, 100: 0.70, 120: 0.66}
                        if task == "parity"
                        else dict.fromkeys(lengths, 0.85)
                    )
                if task == "s3":
                    curve = _chance(curve, 1 / 6)
                rid = w.run(task, fam, seed, curve, 0.5 if task == "parity" else 1 / 6, _behaviour(b))
                if fam in ("mamba", "mamba2"):
                    drop = (0.5 if task == "s3" else 0.25) + 0.01 * seed
                    w.intervention(
                        rid,
                        "conv1d_removal",
                        -2,
                        -12.6 if task == "s3" else -6.8,
                        True,
                        refit_acc=None,
                        refit_majority=None,
                        drop_rel_chance=drop,
                    )
                # readable at the last layer, and also needed there: coupled
                for layer in range(-1, 4):
                    w.intervention(rid, "leace", layer, -60.0 if layer == 3 else -1.0, layer == 3)
            curve = EARLY if fam == "transformer" else GRADUAL
            rid = w.run("dyck", fam, seed, curve, 0.4)
            if fam in ("mamba", "mamba2"):
                w.intervention(
                    rid,
                    "conv1d_removal",
                    -2,
                    -0.3,
                    False,
                    refit_acc=None,
                    refit_majority=None,
                    drop_rel_chance=(-0.02, 0.0, 0.02)[seed],
                )
    # code_depth (claim 4 reads every family × task from scratch): readable and needed at the last layer
    for seed in (0, 1, 2):
        for fam in FAMILIES:
            rid = w.run("code_depth", fam, seed, _chance(LATE, 1 / 11), 1 / 11)
            for layer in range(-1, 4):
                w.intervention(
                    rid,
                    "leace",
                    layer,
                    -60.0 if layer == 3 else -1.0,
                    layer == 3,
                    refit_acc=1 / 11,
                    refit_majority=1 / 11,
                )
    # pretrained models on Dyck: best probe at 7, ablating 6 costs 81 %, 7 barely matters
    for i, name in enumerate(("EleutherAI/pythia-160m", "EleutherAI/pythia-410m", "gpt2")):
        curve = [0.4] + [0.5 + 0.04 * j for j in range(12)]
        curve[8] = 1.0
        rid = w.run("dyck", "transformer", 0, curve, 0.4, pretrained=name)
        for layer in range(-1, 12):
            w.intervention(
                rid,
                "leace",
                layer,
                -81.0 if layer == 6 else (-2.0 if layer == 7 else -1.0),
                layer == 6,
                refit_acc=0.41,
                refit_majority=0.4,
            )
        w.patching.append(
            {
                "run_id": rid,
                "site": "state",
                "layer": 11,
                "position": 20,
                "eval_length": 40,
                "recovery": 0.96 + 0.01 * i,
            }
        )
        w.patching.append(
            {"run_id": rid, "site": "resid_post", "layer": 11, "position": 20, "eval_length": 40, "recovery": 0.0}
        )
    return w


def contradicting_world() -> World:
    w = World()
    lengths = (40, 60, 80, 100, 120)
    for seed in (0, 1, 2):
        for fam in FAMILIES:
            for task in ("parity", "s3"):
                curve = LATE if fam == "transformer" else GRADUAL
                if task == "s3":  # s3 shaped like dyck below
                    curve = GRADUAL if fam == "transformer" else EARLY
                beh = {
                    "lstm": {40: 1.0, 60: 0.8, 80: 0.7, 100: 0.6, 120: 0.6},
                    "gru": dict.fromkeys(lengths, 0.7),
                    "mamba": dict.fromkeys(lengths, 0.9),
                    "mamba2": dict.fromkeys(lengths, 0.9),
                    "transformer": dict.fromkeys(lengths, 0.95),
                }[fam]
                rid = w.run(task, fam, seed, curve, 0.5, _behaviour(beh))
                if fam in ("mamba", "mamba2"):
                    w.intervention(
                        rid,
                        "conv1d_removal",
                        -2,
                        -2.0 if task == "s3" else -9.0,
                        task == "parity",
                        drop_rel_chance=(0.05 if task == "s3" else 0.3) + 0.01 * seed,
                    )
                best = max(range(5), key=lambda i: curve[i]) - 1
                for layer in range(-1, 4):
                    w.intervention(rid, "leace", layer, -50.0 if layer == best else -3.0, layer == best)
            curve = GRADUAL if fam == "transformer" else EARLY
            rid = w.run("dyck", fam, seed, curve, 0.4)
            if fam in ("mamba", "mamba2"):
                w.intervention(rid, "conv1d_removal", -2, -20.0, True, drop_rel_chance=0.4 + 0.01 * seed)
            best = max(range(5), key=lambda i: curve[i]) - 1
            for layer in range(-1, 4):  # coupled everywhere: the most readable layer is the necessary one
                w.intervention(
                    rid,
                    "leace",
                    layer,
                    -50.0 if layer == best else -3.0,
                    layer == best,
                    refit_majority=0.4,
                    refit_acc=0.4,
                )
            rid = w.run("code_depth", fam, seed, LATE, 0.4)  # claim 4 reads every family × task
            for layer in range(-1, 4):
                w.intervention(
                    rid, "leace", layer, -50.0 if layer == 3 else -3.0, layer == 3, refit_majority=0.4, refit_acc=0.4
                )
    return w


def test_empty_data_gives_not_enough_data_everywhere():
    out = evaluate_claims([], [], [], [])
    assert [c["id"] for c in out] == [1, 2, 3, 4, 5, 6]
    assert all(c["verdict"] == NOT_ENOUGH for c in out)
    assert all(c["title"] and c["detail"] and c["views"] for c in out)
    assert all(c["verdict"] == NOT_ENOUGH for c in evaluate_claims())


def test_supporting_world_supports_every_claim():
    c = supporting_world().claims()
    for cid in range(1, 7):
        assert c[cid]["verdict"] == SUPPORTED, (cid, c[cid]["detail"])
    cells = c[1]["numbers"]["cells"]
    assert len(cells) == 10 and all(x["matches"] for x in cells)
    lc = next(x for x in cells if x["family"] == "lstm" and x["task"] == "parity")["late_concentration"]
    assert lc["lo"] < lc["mean"] < lc["hi"] and lc["n"] == 3
    tests = c[1]["numbers"]["test_late_concentration_other_gt_transformer"]
    assert set(tests) == {"parity", "s3"} and all(t["p_holm"] < 0.05 and t["p_holm"] >= t["p"] for t in tests.values())
    assert c[1]["numbers"]["holm_family_size"] == 3  # parity, s3 (claim 1) and dyck (claim 2)
    assert c[2]["numbers"]["test_auc_transformer_gt_other"]["dyck"]["p_holm"] < 0.05
    assert all(f["closer_to_parity"] for f in c[3]["numbers"]["families"])
    n4 = c[4]["numbers"]
    assert n4["groups"]["pretrained"]["verdict"] == SUPPORTED and n4["decoupled_share_pretrained"] == 1.0
    assert n4["decoupled_share_scratch"] == 0.0  # coupled: readable and needed at the last layer
    assert n4["groups"]["pretrained"]["lo"] > 0.10  # Wilson lower end for 3/3
    assert n4["state_patching"]["pretrained"]["mean"] == pytest.approx(0.97)  # state site only, resid_post ignored
    t5 = c[5]["numbers"]["tasks"]
    assert t5["s3"]["drop_rel_chance"]["mean"] == pytest.approx(0.51) and t5["s3"]["n_runs"] == 6
    assert c[5]["numbers"]["conditions"]["dyck drop not significant"] is True
    assert c[6]["numbers"]["sub_claims"]["mamba accuracy falls with length on parity"] is True
    assert c[6]["numbers"]["lengths_used"] == [40, 60, 80, 100, 120] and "40, 60, 80, 100, 120" in c[6]["detail"]
    assert any(v.startswith("/reversal?task=") for v in c[1]["views"])


def test_contradicting_world_contradicts_every_claim():
    c = contradicting_world().claims()
    for cid in range(1, 7):
        assert c[cid]["verdict"] == CONTRADICTED, (cid, c[cid]["detail"])
    assert "Mismatches" in c[1]["detail"]
    assert c[5]["numbers"]["conditions"]["dyck drop not significant"] is False
    assert c[4]["numbers"]["groups"]["scratch"]["hi"] < 0.10  # 0 of 45, Wilson upper end


def test_partial_data_transformer_only_is_not_enough():
    w = World()
    w.run("parity", "transformer", 0, GRADUAL)
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH and c[3]["verdict"] == NOT_ENOUGH


# -- claims 1–2: the contrast ---------------------------------------------------------------------
def _identical_world(curve_prefix, curve_dyck, seeds=(0, 1, 2)) -> World:
    w = World()
    for seed in seeds:
        for fam in FAMILIES:
            for task in ("parity", "s3"):
                w.run(task, fam, seed, curve_prefix)
            w.run("dyck", fam, seed, curve_dyck, 0.4)
    return w


def test_all_families_identical_contradicts_claims_1_and_2():
    """8/10 cells late used to support claim 1 with no contrast at all."""
    c = _identical_world(LATE, GRADUAL).claims()
    assert c[1]["verdict"] == CONTRADICTED and c[2]["verdict"] == CONTRADICTED
    for t in c[1]["numbers"]["test_late_concentration_other_gt_transformer"].values():
        assert t["p_holm"] >= 0.05
    c = _identical_world(EARLY, EARLY).claims()
    assert c[1]["verdict"] == CONTRADICTED and c[2]["verdict"] == CONTRADICTED


def test_class_right_but_statistic_not_different_is_mixed_not_a_verdict():
    """The transformer's class differs, yet per-seed late concentration overlaps: no support, and
    no contradiction either (the classes are as claimed): mixed evidence, not enough data."""
    w = World()
    # seed-mean curves: layer 2 at 0.74 (late concentration 0.51: late) for the others, 0.76
    # (0.47: gradual) for the transformer; the seeds themselves overlap (0.39 .. 0.59 in both)
    others = (0.72, 0.80, 0.70)
    transformer = (0.80, 0.70, 0.78)
    for seed in (0, 1, 2):
        for fam in FAMILIES:
            at2 = (transformer if fam == "transformer" else others)[seed]
            for task in ("parity", "s3"):
                w.run(task, fam, seed, [0.50, 0.60, 0.70, at2, 0.99])
    c = w.claims()
    assert all(x["matches"] for x in c[1]["numbers"]["cells"])
    assert c[1]["verdict"] == NOT_ENOUGH, c[1]["detail"]
    assert c[1]["numbers"]["per_task"]["parity"] == {
        "class_condition": True,
        "statistic_condition": False,
        "verdict": NOT_ENOUGH,
    }
    assert "mixed: the class condition holds" in c[1]["detail"]


def test_classes_and_statistic_both_against_the_claim_contradict_it():
    """Dyck as this reproduction measured it: every family readable early, the Transformer no
    earlier than the others (its AUC lowest): both conditions fail → contradicted."""
    w = World()
    for seed in (0, 1, 2):
        for fam in FAMILIES:
            tf = fam == "transformer"
            for task in ("parity", "s3"):
                w.run(task, fam, seed, GRADUAL if tf else LATE)
            w.run(
                "dyck",
                fam,
                seed,
                [0.73, 0.92 + 0.005 * seed, 0.96, 0.99, 0.99]
                if tf
                else [0.73, 0.98 + 0.004 * seed, 0.99, 0.995, 0.998],
                0.45,
            )
    c = w.claims()
    assert c[2]["numbers"]["per_task"]["dyck"] == {
        "class_condition": False,
        "statistic_condition": False,
        "verdict": CONTRADICTED,
    }
    test = c[2]["numbers"]["test_auc_transformer_gt_other"]["dyck"]
    assert test["p_holm"] > 0.5 and test["p_opposite"] < 0.05  # the seeds point the other way
    assert "opposite direction: p = " in c[2]["detail"]
    assert c[2]["verdict"] == CONTRADICTED, c[2]["detail"]


def _strings(x, path=""):
    """Every string value in a JSON-like tree, with where it is."""
    if isinstance(x, dict):
        return [s for k, v in x.items() for s in _strings(v, f"{path}.{k}")]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v, path)]
    return [(path, x)] if isinstance(x, str) else []


def test_the_science_returns_data_and_the_presentation_writes_the_words():
    """science.claims gives verdicts, numbers and the case a verdict came from; the sentences, the
    titles and the links to the dashboard are backend.claims_text's (what the API serves)."""
    import copy

    w = supporting_world()
    victim = next(r for r in w.runs if r["task"] == "parity" and r["family"] == "transformer" and r["seed"] == 2)
    victim["heldout_acc"] = 0.273
    data = evaluate_data(w.runs, w.probes, w.interventions, w.patching)
    assert all(list(c) == ["id", "verdict", "numbers", "why"] and c["why"]["case"] for c in data)
    short = data[0]["numbers"]["cells_short_of_seeds"]
    assert {"task": "parity", "family": "transformer", "kind": "short", "k": 2, "of": 3} in [
        {k: r[k] for k in ("task", "family", "kind", "k", "of") if k in r} for r in short
    ]
    # no sentence in the numbers: the strings left are labels, names and the untrained reasons
    prose = [(p, v) for c in data for p, v in _strings(c["numbers"]) if len(v) > 40 and not p.endswith(".reason")]
    assert prose == []
    kept = copy.deepcopy(data)
    shown = present_claims(data)
    assert data == kept  # the presentation copies
    assert all(list(c) == ["id", "title", "verdict", "numbers", "detail", "views"] for c in shown)
    assert "transformer × parity: 2 of 3 trained seeds (1 untrained run(s) left out)" in shown[0]["detail"]
    assert shown[0]["numbers"]["cells_short_of_seeds"][0].startswith("transformer × parity: 2 of 3")


# -- seeds ------------------------------------------------------------------------------------------
def test_one_seed_is_not_enough_data_and_names_the_cells():
    w = World()
    w.run("parity", "transformer", 0, GRADUAL)
    w.run("parity", "lstm", 0, LATE)
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH
    assert "transformer × parity: 1 of 3 trained seeds" in c[1]["detail"]
    assert "lstm × parity: 1 of 3 trained seeds" in c[1]["numbers"]["cells_short_of_seeds"]


def test_untrained_seed_counts_against_the_cell_and_is_listed():
    w = supporting_world()
    victim = next(r for r in w.runs if r["task"] == "parity" and r["family"] == "transformer" and r["seed"] == 2)
    victim["heldout_acc"] = 0.273
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH
    assert "transformer × parity: 2 of 3 trained seeds (1 untrained run(s) left out)" in c[1]["detail"]
    left = c[1]["numbers"]["runs_left_out"]
    assert [r["run_id"] for r in left] == [victim["id"]] and "0.273 < 0.99" in left[0]["reason"]
    assert c[2]["verdict"] == SUPPORTED  # dyck cells untouched


def test_budget_stopped_runs_are_named_as_needing_more_steps():
    """A cell whose untrained runs ran out of their step budget while still improving reads "not
    enough data" as before (docs/SCIENCE.md#plateau), and says so: more steps would decide."""
    w = supporting_world()
    cell = [r for r in w.runs if r["task"] == "parity" and r["family"] == "transformer"]
    for r, best in zip(cell, (0.36, 0.38, 0.37)):
        r.update(heldout_acc=best, stop_reason="budget", best_heldout_acc=best, train_config={"max_steps": 6000})
    cell[0]["stop_reason"] = "trained"  # an untrained run without the budget reason is not counted
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH
    assert (
        "transformer × parity: 0 of 3 trained seeds (3 untrained run(s) left out: 2 stopped by the "
        "6,000-step budget while still improving, best held-out accuracy 0.370–0.380, not enough data: more steps "
        "would decide; seed 1 at step"
    ) in c[1]["detail"]
    shorts = evaluate_data(w.runs, w.probes, w.interventions, w.patching)[0]["numbers"]["cells_short_of_seeds"]
    row = next(r for r in shorts if (r["task"], r["family"]) == ("parity", "transformer"))
    assert (row["budget_stopped"], row["budget"], row["budget_best"]) == (2, 6000, [0.37, 0.38])


def test_runs_without_heldout_accuracy_are_not_read():
    w = supporting_world()
    for run in w.runs:
        run["heldout_acc"] = None
    claims = evaluate_claims(w.runs, w.probes, w.interventions, w.patching)
    for claim in claims:
        assert claim["verdict"] == NOT_ENOUGH, claim["id"]
        assert claim["numbers"]["runs_excluded_undertrained"] > 0


# -- claim 4: a necessity test ----------------------------------------------------------------------
def _pretrained_world(n, decoupled, refit_acc=0.41):
    w = World()
    for i in range(n):
        curve = [0.4] + [0.5 + 0.04 * j for j in range(12)]
        curve[8] = 1.0
        rid = w.run("dyck", "transformer", 0, curve, 0.4, pretrained=f"model-{i}")
        for layer in range(-1, 12):
            worst = 6 if i < decoupled else 7
            # the edit at layer 6 is fitted at refit_acc; the best layer's edit (7) always removes it
            w.intervention(
                rid,
                "leace",
                layer,
                -81.0 if layer == worst else -1.0,
                layer == worst,
                refit_acc=refit_acc if layer == 6 else 0.41,
                refit_majority=0.4,
            )
    return w


def test_claim_4_planted_positive_negative_and_too_small():
    assert _pretrained_world(4, 4).claims()[4]["verdict"] == SUPPORTED
    neg = _pretrained_world(40, 0).claims()[4]
    assert neg["verdict"] == CONTRADICTED and neg["numbers"]["groups"]["pretrained"]["hi"] < 0.10
    small = _pretrained_world(2, 2).claims()[4]
    assert small["verdict"] == NOT_ENOUGH and "2 of 3 evaluable pretrained runs" in small["detail"]
    # one decoupled run among 10: the Wilson interval straddles 10 %: not a verdict either way
    assert _pretrained_world(10, 1).claims()[4]["verdict"] == NOT_ENOUGH


def test_claim_4_edit_that_leaves_the_variable_readable_is_not_damage():
    # layer 6's edit costs 81 pp but its refit probe still reads the variable (0.9 vs 0.4)
    c = _pretrained_world(4, 4, refit_acc=0.9).claims()[4]
    assert c["verdict"] != SUPPORTED
    runs = c["numbers"]["runs"]
    assert all(6 in r["not_removed_layers"] and not r["meaningfully_decoupled"] for r in runs)


def test_claim_4_is_also_read_without_its_controls():
    """Beside the verdict, the same rule with the drops read raw and with every edit counted:
    a damage that random removal of the same rank also causes, or an edit that left the variable
    readable, decides only the reading without that control."""
    # layer 6's edit costs 81 pp, and removing as many random directions there costs 80 pp
    w = _pretrained_world(40, 40)
    for row in w.interventions:
        row["random_delta_pp"] = -80.0 if row["layer"] == 6 else -0.5
    c = w.claims()[4]
    wc = c["numbers"]["without_controls"]
    assert c["verdict"] == CONTRADICTED and c["numbers"]["groups"]["pretrained"]["decoupled"] == 0
    assert wc["raw drops"]["verdict"] == SUPPORTED and wc["raw drops"]["groups"]["pretrained"]["decoupled"] == 40
    assert wc["no removal rule"]["verdict"] == CONTRADICTED and wc["neither"]["verdict"] == SUPPORTED
    # layer 6's edit leaves the variable readable: only the reading without the removal rule counts it
    readable = _pretrained_world(40, 40, refit_acc=0.9).claims()[4]
    wr = readable["numbers"]["without_controls"]
    assert readable["verdict"] != SUPPORTED and readable["numbers"]["groups"]["pretrained"]["not_removed"] == 0
    assert wr["no removal rule"]["verdict"] == SUPPORTED and wr["raw drops"]["verdict"] == readable["verdict"]
    assert wr["no removal rule"]["groups"]["pretrained"]["n"] == 40
    # each reading is named in words by the presentation, not by the science
    assert wc["raw drops"]["label"] == "drops read raw (not beyond random removal)"
    data = evaluate_data(w.runs, w.probes, w.interventions, w.patching)
    assert all("label" not in r for r in data[3]["numbers"]["without_controls"].values())


def test_claim_4_without_state_patching_says_so():
    c = _pretrained_world(4, 4).claims()[4]
    assert c["numbers"]["state_patching"] == "no state patching stored"
    assert "no state patching stored" in c["detail"]


# -- claim 5: drops relative to chance --------------------------------------------------------------
def _conv_world(drops: dict[str, float], seeds=(0, 1, 2)) -> World:
    w = World()
    for seed in seeds:
        for fam in ("mamba", "mamba2"):
            for task, d in drops.items():
                rid = w.run(task, fam, seed, LATE)
                w.intervention(rid, "conv1d_removal", -2, -d * 40, True, drop_rel_chance=d + 0.01 * seed)
    return w


def test_claim_5_planted_positive_negative_and_too_small():
    assert _conv_world({"s3": 0.5, "parity": 0.2, "dyck": -0.01}).claims()[5]["verdict"] == SUPPORTED
    neg = _conv_world({"s3": 0.1, "parity": 0.3, "dyck": 0.3}).claims()[5]
    assert neg["verdict"] == CONTRADICTED
    assert neg["numbers"]["conditions"]["s3 drop > parity drop"] is False
    small = _conv_world({"s3": 0.5, "parity": 0.2}, seeds=(0,)).claims()[5]
    assert small["verdict"] == NOT_ENOUGH and "mamba × s3: 1 of 3 trained seeds" in small["detail"]


# -- claim 3 and claim 6: too-small cases -----------------------------------------------------------
def test_claims_2_3_and_6_too_small():
    w = World()
    for fam in FAMILIES:
        for task in ("parity", "s3", "dyck"):
            w.run(task, fam, 0, LATE, behaviour=_behaviour({40: 1.0, 60: 1.0}))
    c = w.claims()
    assert c[2]["verdict"] == NOT_ENOUGH and "transformer × dyck: 1 of 3 trained seeds" in c[2]["detail"]
    assert c[3]["verdict"] == NOT_ENOUGH and "1 of 3 trained seeds" in c[3]["detail"]
    assert c[6]["verdict"] == NOT_ENOUGH and "gru × parity: 1 of 3 trained seeds" in c[6]["detail"]


# -- every expected cell, stored or not -------------------------------------------------------------
def _without(w: World, pick) -> World:
    keep = [r for r in w.runs if not pick(r)]
    ids = {r["id"] for r in keep}
    w.runs = keep
    w.probes = [p for p in w.probes if p["run_id"] in ids]
    w.interventions = [r for r in w.interventions if r["run_id"] in ids]
    w.patching = [p for p in w.patching if p["run_id"] in ids]
    return w


@pytest.mark.parametrize("family", ["mamba", "transformer", "lstm"])
def test_a_whole_family_missing_is_never_supported(family):
    """With every run of one family gone (and no pretrained runs), no claim may be supported and
    each names that family's cells as stored nowhere."""
    w = _without(supporting_world(), lambda r: r["family"] == family or r["pretrained"])
    c = w.claims()
    for cid in (1, 2, 3, 4, 6):  # claim 5 is about the SSMs only
        assert c[cid]["verdict"] != SUPPORTED, (cid, c[cid]["detail"])
    for cid, task in ((1, "parity"), (2, "dyck"), (3, "s3"), (4, "code_depth"), (6, "s3")):
        assert (
            f"{family} × {task}: 0 of 3 trained seeds (no runs trained from scratch stored)"
            in c[cid]["numbers"]["cells_short_of_seeds"]
        )
        assert c[cid]["verdict"] == NOT_ENOUGH
    if family != "mamba":
        assert c[5]["verdict"] == SUPPORTED  # a family the claim is not about does not count
    else:
        assert c[5]["verdict"] == NOT_ENOUGH
        assert "mamba × dyck: 0 of 3 trained seeds (no runs trained from scratch stored)" in c[5]["detail"]


def test_a_task_missing_for_one_family_is_named():
    """mamba × dyck with zero runs used to go unmentioned (claims 2 and 5)."""
    w = _without(supporting_world(), lambda r: r["family"] == "mamba" and r["task"] == "dyck")
    c = w.claims()
    assert c[1]["verdict"] == SUPPORTED  # parity and s3 are complete
    for cid in (2, 3, 5):
        assert c[cid]["verdict"] == NOT_ENOUGH
        assert "mamba × dyck: 0 of 3 trained seeds (no runs trained from scratch stored)" in c[cid]["detail"]


def test_claim_4_reports_the_best_state_patching_layer_per_family():
    """Stacked LSTM: patching layer 0's state recovers everything, the last block ~0."""
    w = supporting_world()
    for r in [r for r in w.runs if r["family"] == "lstm" and r["task"] == "parity"]:
        for layer, rec in ((0, 0.99), (1, 0.02), (2, 0.01), (3, 0.0)):
            w.patching.append(
                {
                    "run_id": r["id"],
                    "site": "state",
                    "layer": layer,
                    "position": 20,
                    "eval_length": 40,
                    "recovery": rec + 0.001 * r["seed"],
                }
            )
    c = w.claims()[4]
    best = {b["family"]: b for b in c["numbers"]["state_patching_best_layer"]}
    best["lstm"] = best["lstm × parity"]
    assert best["lstm"]["best_layer"] == 0 and best["lstm"]["best_recovery"]["mean"] == pytest.approx(0.991)
    assert best["lstm"]["best_recovery"]["n"] == 3 and best["lstm"]["last_layer"] == 3
    assert best["lstm"]["last_recovery"]["mean"] == pytest.approx(0.001)
    assert best["lstm"]["best_layer_per_run"] == [0, 0, 0]
    assert (
        "lstm × parity layer 0 (0.99, n=3; best layer per run: 0, 0, 0)" in c["detail"]
        and "blocks below it corrupted" in c["detail"]
    )
    assert c["verdict"] == SUPPORTED  # descriptive only: the verdict is the pretrained group's


def test_not_enough_data_claims_describe_their_trained_cells():
    """Three trained LSTM seeds readable at layer 0 (class early) while other cells are short: the
    claim is not enough data, yet says what the trained cells show."""
    w = World()
    for seed in (0, 1, 2):
        w.run("parity", "lstm", seed, EARLY)
    w.run("parity", "transformer", 0, GRADUAL)
    w.run("parity", "gru", 0, LATE, heldout_acc=0.5)  # untrained: not described
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH
    cells = {(x["task"], x["family"]): x for x in c[1]["numbers"]["trained_cells"]}
    assert set(cells) == {("parity", "lstm"), ("parity", "transformer")}
    lstm = cells[("parity", "lstm")]
    assert lstm["profile_class"] == "early" and lstm["expected"] == "late" and lstm["n"] == 3
    assert lstm["late_concentration"]["n"] == 3 and lstm["late_concentration"]["mean"] < 0.1
    assert cells[("parity", "transformer")]["n"] == 1
    assert "trained_cells" not in supporting_world().claims()[1]["numbers"]  # only beside "not enough data"


def test_claim6_accuracy_intervals_stay_within_0_and_1():
    from science.claims import _ci

    ci = _ci([0.997, 0.984, 1.0], "accuracy")
    assert 0.0 <= ci["lo"] <= ci["mean"] <= ci["hi"] <= 1.0
    assert _ci([0.997, 0.984, 1.0])["hi"] > 1.0  # unbounded quantities are not clipped


def test_two_runs_of_one_seed_in_a_cell_give_no_verdict():
    """A suite resumed with other training settings holds two runs per seed: counting both would
    double the seeds and pool two recipes, so the claims that read that cell say not enough data."""
    w = supporting_world()
    rid = w.run("parity", "lstm", 0, LATE)  # seed 0 again, same depth: another recipe
    assert w.runs[rid - 1]["seed"] == 0
    c = w.claims()
    for cid in (1, 3, 6):
        assert c[cid]["verdict"] == NOT_ENOUGH, (cid, c[cid]["detail"])
        assert "lstm × parity: more than one run for seed(s) 0" in c[cid]["detail"]
    scratch = c[4]["numbers"]["groups"]["scratch"]  # claim 4 stands on its pretrained group alone
    assert scratch["verdict"] == NOT_ENOUGH and "more than one run for seed(s) 0" in scratch["why"]
    assert c[2]["verdict"] == SUPPORTED  # dyck only: the duplicated cell is not read


def test_claim_5_short_of_seeds_describes_the_conv1d_drops_not_the_probe_curves():
    w = World()
    for seed in (0, 1):  # two seeds: short of the three a verdict needs
        rid = w.run("s3", "mamba", seed, LATE)
        w.intervention(rid, "conv1d_removal", -2, -10.0, True, drop_rel_chance=0.4 + 0.1 * seed)
    c = w.claims()[5]
    assert c["verdict"] == NOT_ENOUGH
    (cell,) = c["numbers"]["trained_cells"]
    assert (cell["task"], cell["family"], cell["n"]) == ("s3", "mamba", 2)
    assert cell["drop_rel_chance"]["mean"] == pytest.approx(0.45) and "profile_class" not in cell


def test_a_claim_short_of_seeds_says_when_its_complete_cells_already_rule_it_out():
    """The bundled study: LSTM and GRU readable early on parity and S3 (3 seeds each), the other
    cells untrained. Claim 1 cannot be supported whatever those cells show."""
    w = World()
    for seed in (0, 1, 2):
        for fam in ("lstm", "gru"):
            for task in ("parity", "s3"):
                w.run(task, fam, seed, EARLY)
    c = w.claims()[1]
    assert c["verdict"] == NOT_ENOUGH
    assert "Whatever the missing cells show, it cannot be supported" in c["detail"]
    (parity, s3) = c["numbers"]["cannot_be_supported"]
    assert parity.startswith("on parity gru is early, lstm is early where late is expected: at most 2 of 4")
    w2 = World()  # one early LSTM cell alone does not rule it out: 3 of 4 can still match
    for seed in (0, 1, 2):
        w2.run("parity", "lstm", seed, EARLY)
    assert "cannot_be_supported" not in w2.claims()[1]["numbers"]


def test_a_cell_not_learned_neither_counts_in_nor_holds_back_claims_4_to_6():
    """docs/SCIENCE.md#plateau, fixed before the runs: claims 4–6 read trained runs only; a cell not
    learned (every seed at a plateau under revision 3 of the rule) adds nothing to them and is named
    as untestable — it does not make them wait for seeds that more steps cannot give. Stopped by
    revision 2 (the paper-steps study's Transformer × S3, still rising), the same cell holds them
    back: more steps would decide."""
    w = supporting_world()
    for r in w.runs:
        if (r["task"], r["family"]) == ("s3", "transformer"):
            r.update(
                heldout_acc=0.36,
                best_heldout_acc=0.36,
                stop_reason="plateau",
                steps=5000,
                train_config={"max_steps": 40000, "plateau_evals": 20, "plateau_gap_share": 0.2},
            )
    c = w.claims()
    assert c[6]["verdict"] == NOT_ENOUGH and "stopped by plateau rule revision 2" in c[6]["detail"]
    assert (
        "from scratch: 0/42 decoupled = 0% [95% Wilson 0%, 8%], 0 run(s) whose edit left the variable readable (not removed) → not enough data"
        in c[4]["detail"]
    )  # the pretrained group decides
    assert not c[4]["numbers"].get("untestable") and not c[6]["numbers"].get("untestable")
    for r in w.runs:
        if (r["task"], r["family"]) == ("s3", "transformer"):
            r["train_config"] = {**r["train_config"], "plateau_revision": 3}
    c = w.claims()
    for cid in (4, 5, 6):
        assert c[cid]["verdict"] == SUPPORTED, (cid, c[cid]["detail"])
    for cid in (4, 6):  # claim 5 reads the SSMs only
        (named,) = c[cid]["numbers"]["untestable"]  # served as text, as claims 1–3 serve theirs
        assert named.startswith("transformer × s3: not learned")
        assert "Untestable here: transformer × s3: not learned by this architecture" in c[cid]["detail"]
    assert "recurrent > ssm > transformer on s3" not in c[6]["numbers"]["sub_claims"]  # no Transformer to order
    assert "recurrent > ssm > transformer on parity" in c[6]["numbers"]["sub_claims"]


def test_claim4_state_patching_reads_the_runs_its_verdict_reads():
    """The state-patching line beside claim 4 read every trained run (n = 44 in paper-steps) while the
    verdict left out the trained seeds of a cell not learned by every seed (n = 42). Both now read
    ``science.claims.necessity.counted_runs``."""
    w = supporting_world()
    for r in w.runs:
        if not r.get("pretrained"):
            w.patching.append(
                {
                    "run_id": r["id"],
                    "site": "state",
                    "layer": r["n_layers"] - 1,
                    "position": 20,
                    "eval_length": 40,
                    "recovery": 0.5,
                }
            )
    cell = sorted((r for r in w.runs if (r["task"], r["family"]) == ("s3", "mamba2")), key=lambda r: r["seed"])
    for r in cell[1:]:  # seeds 1, 2 plateaued under revision 3; seed 0 trained: not learned by every seed
        r.update(
            heldout_acc=0.9,
            best_heldout_acc=0.9,
            stop_reason="plateau",
            train_config={"max_steps": 25000, "plateau_revision": 3},
        )
    n4 = w.claims()[4]["numbers"]
    verdict_runs = {row["run_id"] for row in n4["runs"] if not row["pretrained"]}
    assert cell[0]["id"] not in verdict_runs
    assert set(n4["state_patching"]["scratch"]["runs"]) == {
        r["id"] for r in w.runs if not r.get("pretrained") and r not in cell
    }
    assert n4["state_patching"]["scratch"]["n"] == len(n4["state_patching"]["scratch"]["runs"])
    assert not any(row["family"] == "mamba2 × s3" for row in n4.get("state_patching_best_layer", []))
