"""benchmarks/bench_steps_to_criterion.py: the recipes it compares and its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_stc", ROOT / "benchmarks" / "bench_steps_to_criterion.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args():
    import argparse

    return argparse.Namespace(
        max_steps=30,
        max_seconds=None,
        criterion=0.99,
        eval_every=10,
        n_eval=32,
        train_length=10,
        param_target=5000,
        n_layers=1,
        lr=None,
    )


def test_today_is_the_old_recipe_and_new_is_the_default(bench):
    ns = _args()
    ns.d_model = 32  # a transformer is built at validation: no width of its grid has 5,000 parameters ±10%
    today = bench.cell_params("transformer", "parity", 0, "today", ns)
    new = bench.cell_params("transformer", "parity", 0, "new", ns)
    assert (
        today.lr,
        today.warmup_steps,
        today.lr_schedule,
        today.grad_clip,
        today.curriculum_start,
        today.start_token,
    ) == (1e-3, 0, "constant", None, None, False)
    assert new.start_token is True and new.grad_clip is not None and new.lr_schedule == "cosine"
    assert today.measure is None and new.measure is None  # train only


def test_a_cell_and_the_table(bench, tmp_path):
    ns = _args()
    row = bench.run_cell(bench.cell_params("gru", "parity", 0, "new", ns).model_dump(mode="json"), "cpu")
    assert row["steps"] <= 30 and row["best_acc"] is not None
    assert (row["steps_to_criterion"] is None) == (not row["reached"])
    fake = [
        dict(row, family="lstm", reached=True, steps=20, steps_to_criterion=20, seconds_to_criterion=3.0),
        dict(row, family="gru", reached=False, steps=30, best_acc=0.61),
    ]
    meta = {
        "criterion": 0.99,
        "train_length": 10,
        "recipe": "new",
        "seeds": [0],
        "max_steps": 30,
        "device": "cpu",
        "jobs": 1,
    }
    table = bench.markdown(fake, meta)
    assert "| parity | lstm | 20 | 3 |" in table
    assert "| parity | gru | not reached (cap 30) | – | 0.610 |" in table
