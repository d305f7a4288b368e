"""benchmarks/leace_fit_draws.py's measurement on a tiny model: LEACE fitted on one fit set, a probe
refit on the edited states of an eval set, read against the removal line (docs/SCIENCE.md#removal-line)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from models_store import ModelConfig, build_model
from science.tasks import get_task

_spec = importlib.util.spec_from_file_location(
    "leace_fit_draws", Path(__file__).resolve().parents[1] / "benchmarks" / "leace_fit_draws.py"
)
leace_fit_draws = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(leace_fit_draws)


def test_one_draw_reads_the_refit_over_its_majority_and_its_line() -> None:
    from science.captured import capture

    task = get_task("parity")
    cfg = ModelConfig(family="gru", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=16)
    model = build_model(cfg, seed=0).eval()
    eval_data = task.generate(12, 60, 1, split="test")
    states = capture(model, eval_data, "cpu", layers=[1], preds=False).states
    fit = task.generate(12, 80, 2, split="test")
    got = leace_fit_draws.refit_over_majority(model, task, eval_data, states, 1, fit, split_seed=3)
    assert got["over_pp"] == pytest.approx(100 * (got["refit"] - got["majority"]))
    # 12 held-out sequences × 12 tokens: the binomial margin (≥ 2.326 · 0.5/12 = 9.7 pp) sets the line
    assert got["line"] >= got["majority"] + 0.09
    assert 0.0 <= got["refit"] <= 1.0
