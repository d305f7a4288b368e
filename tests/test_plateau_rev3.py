"""Revision 3 of the plateau rule (docs/SCIENCE.md#plateau, science/plateau.py): replayed on the ten
learning curves revision 2 stopped in the shipped study, on hand-made curves, and in the training loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.bundle import read_bundle
from science import plateau
from science.plateau import plateau_revision, plateaued_v3, read_window, stop_slope, window_steps

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper-steps.layerscope.zip"


@pytest.fixture(scope="module")
def stopped_runs() -> list[dict]:
    """The from-scratch runs of the shipped study that revision 2 stopped as ``plateau``."""
    _, tables = read_bundle(BUNDLE)
    return [r for r in tables["runs"] if r.get("control") is None and r.get("stop_reason") == "plateau"]


def _fires(run: dict) -> list[int]:
    """The evaluation steps at which revision 3 would have stopped ``run``, replayed on its stored curve
    up to the step revision 2 stopped it."""
    curve, tc = run["loss_curve"], run["train_config"]
    return [
        p["step"]
        for i, p in enumerate(curve)
        if p.get("heldout_token_acc") is not None
        and plateaued_v3(curve[: i + 1], max_steps=tc["max_steps"], train_length=tc["train_length"])
    ]


def test_the_ten_stored_curves_are_the_ones_revision_2_stopped(stopped_runs):
    cells = sorted((r["family"], r["task"], r["seed"]) for r in stopped_runs)
    assert cells == sorted(
        [("mamba2", "parity", 1)] + [(f, "s3", s) for f in ("transformer", "mamba", "mamba2") for s in (0, 1, 2)]
    )
    assert {plateau_revision(r["train_config"]) for r in stopped_runs} == {2}


def test_revision_3_stops_none_of_the_nine_rising_runs(stopped_runs):
    rising = [r for r in stopped_runs if r["task"] == "s3"]
    assert len(rising) == 9
    for r in rising:
        assert _fires(r) == [], (r["family"], r["seed"])
        s = stop_slope(r)
        # still rising where revision 2 stopped it: the slope's lower 95% end above 0.5 pp per 1,000 steps
        assert s is not None and s["lo_pp"] > 0.5 and s["loss_fall"] > 0.05, (r["family"], r["seed"], s)


def test_mamba2_parity_seed_1_is_not_stopped_either(stopped_runs):
    """Flat-looking in accuracy over its last 1,000 steps, but over revision 3's 2,000-step window
    (10% of 8,000 is less) the slope's upper 95% end is 0.35 pp per 1,000 steps, above 0.2, and its
    training loss fell 38%: revision 3 lets it train on."""
    (r,) = [r for r in stopped_runs if r["task"] == "parity"]
    assert r["steps"] == 4_800 and window_steps(r["train_config"]["max_steps"]) == 2_000
    assert _fires(r) == []
    s = stop_slope(r)
    assert s["full"] and s["window_steps"] == 2_000
    assert 0.2 < s["hi_pp"] < 0.4 and 0.1 < s["slope_pp"] < 0.3
    assert s["loss_fall"] > 0.3
    assert s["budget_share"] == pytest.approx(0.6)


def _curve(accs_by_step, loss_by_step, length=None):
    out = []
    for step in range(1, len(loss_by_step) + 1):
        p = {"step": step, "loss": loss_by_step[step - 1], "heldout_token_acc": accs_by_step.get(step)}
        if length is not None:
            p["length"] = length
        out.append(p)
    return out


def test_flat_accuracy_and_flat_loss_stop_after_the_full_window_only():
    n = 3_000
    accs = {s: 0.80 + (0.001 if (s // 50) % 2 else -0.001) for s in range(50, n + 1, 50)}
    curve = _curve(accs, [0.5] * n)
    assert plateaued_v3(curve[:1_950], max_steps=10_000, train_length=40) is None  # the window is not full yet
    w = plateaued_v3(curve[:2_000], max_steps=10_000, train_length=40)
    assert w is not None and w.full and w.window_steps == 2_000 and abs(w.slope_pp) < 0.1
    # 10% of a 40,000-step budget is 4,000 steps: not full at 3,000
    assert plateaued_v3(curve, max_steps=40_000, train_length=40) is None


def test_flat_accuracy_with_a_falling_loss_keeps_training():
    n = 2_000
    accs = {s: 0.80 for s in range(50, n + 1, 50)}
    falling = [0.5 * (1 - 0.02 * s / n) for s in range(1, n + 1)]  # 2% over the window
    w = read_window(_curve(accs, falling), max_steps=5_000, train_length=40)
    assert w is not None and w.full and w.hi_pp < plateau.MAX_SLOPE_PP
    assert w.loss_fall == pytest.approx(0.02, rel=0.01) and not w.flat()


def test_a_slope_whose_interval_reaches_0_2_pp_keeps_training():
    n = 2_000
    accs = {s: 0.80 + 3e-6 * s for s in range(50, n + 1, 50)}  # +0.3 pp per 1,000 steps
    w = read_window(_curve(accs, [0.5] * n), max_steps=5_000, train_length=40)
    assert w.slope_pp == pytest.approx(0.3) and not w.flat()


def test_the_window_stays_inside_one_curriculum_stage():
    accs = {s: 0.80 for s in range(50, 3_001, 50)}
    curve = _curve(accs, [0.5] * 3_000)
    for p in curve[:1_500]:
        p["length"] = 8
    for p in curve[1_500:]:
        p["length"] = 12
    w = read_window(curve, max_steps=5_000, train_length=40)
    assert w.length == 12 and w.window_steps == 1_500 and not w.full and not w.flat()


def test_plateau_revision_of_a_train_config():
    assert plateau_revision({"plateau_revision": 3, "plateau_evals": 20}) == 3
    assert plateau_revision({"plateau_evals": 20, "plateau_gap_share": 0.2}) == 2
    assert plateau_revision({"plateau_evals": 20}) == 1
    assert plateau_revision({}) is None and plateau_revision(None) is None


def test_training_with_revision_3_stops_a_model_that_cannot_learn():
    """A model that ignores its input, sure of one class and barely moving (lr 1e-5), is flat in
    accuracy and loss: revision 3 stops it as ``plateau`` once a full window shows both, not before.
    (Left at an even split, its argmax flips between the classes and the slope's interval stays
    wide: revision 3 then lets it run to its budget.)"""
    import torch
    from torch import nn

    from science.tasks import get_task
    from science.training import TrainConfig, train_model

    class Constant(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.tensor([5.0, 0.0]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # [batch, seq] → [batch, seq, 2]
            return self.bias.expand(x.shape[0], x.shape[1], 2)

    task = get_task("parity")
    cfg = TrainConfig(
        train_length=8,
        batch_size=8,
        max_steps=2_600,
        eval_every=50,
        n_eval_sequences=32,
        curriculum_start=None,
        warmup_steps=0,
        lr_schedule="constant",
        lr=1e-5,
        plateau_revision=3,
    )
    res = train_model(Constant(), task, cfg, seed=0)
    assert res.stop_reason == "plateau"
    assert 2_000 <= res.steps < 2_600  # never before its 2,000-step window is full


def test_the_claims_print_each_stopped_runs_slope_and_budget_share(stopped_runs):
    """docs/SCIENCE.md#plateau: beside a run stopped before the criterion, its slope at the stop and
    the share of its budget it used."""
    from backend.claims_text.common import stopped_run_text
    from science.claims.common import stopped_run

    (r,) = [r for r in stopped_runs if r["task"] == "parity"]
    text = stopped_run_text(stopped_run(r))
    assert text == (
        "seed 1 at step 4,800 of 8,000 (60% of its budget), held-out slope +0.25 pp per 1,000 steps "
        "(95% CI +0.16 to +0.35, last 2,000 steps)"
    )
