"""A position-table refusal says what can be changed: a setting's length for a generated task, the
rows themselves for a file task (its length is its longest row's, not a setting)."""

from __future__ import annotations

from types import SimpleNamespace

from models_store.positions import FILE_ROWS, position_problem
from worker.position_checks import run_lengths


def test_a_generated_task_is_told_to_shorten_the_setting():
    params = SimpleNamespace(task="parity", train_length=40, measure=None)
    assert run_lengths(params) == {"train_length": 40}
    why = position_problem(16, run_lengths(params), True, "model config 'gpt2-short'")
    assert why is not None and why.endswith("needs 41: use a shorter train_length or a model with a longer table")


def test_a_file_task_is_told_to_crop_its_rows():
    params = SimpleNamespace(task="my_file_task", train_length=20, measure=SimpleNamespace(eval_lengths=[20]))
    assert run_lengths(params) == {FILE_ROWS: 20}
    why = position_problem(16, run_lengths(params), False, "model config 'gpt2-short'")
    assert why is not None and "(the task file's longest row 20) needs 20" in why
    assert why.endswith("crop the task file's rows to 16 tokens or a model with a longer table")
    assert "train_length" not in why
