"""The task contract (science/tasks/base.py) of every registered task: the built-ins, the plugins'
(entry points) and any other registered one, parametrized from the registry, so a new task is
checked without being named here. Its rule is tested on its own (tests/test_tasks_formal.py)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from layerscope_core.registry import BUILTIN_TASKS, STUDY_TASKS, task_specs
from science.tasks import Task, early_positions, get_task

REGISTERED = [spec.name for spec in task_specs()]  # read at collection: plugins included
LENGTH, N = 24, 40


def check_generate(task: Task, name: str) -> None:
    """Seeded and pure: the same arguments give equal tensors, another seed other tokens; tokens and
    labels are LongTensors [n, L] in range and are the task's rule (``labels_for``)."""
    a = task.generate(length=LENGTH, n=N, seed=3)
    b = task.generate(length=LENGTH, n=N, seed=3)
    c = task.generate(length=LENGTH, n=N, seed=4)
    assert task.name == name
    assert len(task.class_names) == task.n_classes and json.loads(json.dumps(task.params)) == task.params
    assert a.tokens.shape == a.labels.shape == (N, LENGTH)
    assert a.tokens.dtype == a.labels.dtype == torch.long
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.tokens, c.tokens)
    assert int(a.tokens.min()) >= 0 and int(a.tokens.max()) < task.vocab_size
    assert int(a.labels.min()) >= 0 and int(a.labels.max()) < task.n_classes
    assert np.array_equal(task.labels_for(a.tokens.numpy()), a.labels.numpy())


def check_corruption_pairs(task: Task) -> None:
    """Exactly one token differs per pair, at ``pos``, among the early positions; the final labels
    differ; the same seed gives the same pairs (docs/SCIENCE.md#corruption)."""
    clean, corrupted, pos = task.corruption_pairs(length=LENGTH, n=N, seed=1)
    assert clean.tokens.shape == corrupted.tokens.shape == (N, LENGTH)
    assert pos.shape == (N,) and pos.dtype == torch.long
    differs = clean.tokens != corrupted.tokens
    assert differs.sum(dim=1).eq(1).all() and torch.equal(differs.long().argmax(dim=1), pos)
    assert int(pos.max()) < early_positions(LENGTH)
    assert (clean.labels[:, -1] != corrupted.labels[:, -1]).all()
    assert int(corrupted.labels.max()) < task.n_classes and int(corrupted.tokens.max()) < task.vocab_size
    again = task.corruption_pairs(length=LENGTH, n=N, seed=1)
    assert torch.equal(again[0].tokens, clean.tokens) and torch.equal(again[1].tokens, corrupted.tokens)
    assert torch.equal(again[2], pos)


def check_no_global_rng(task: Task) -> None:
    """``generate`` and ``corruption_pairs`` neither read nor move torch's, numpy's or Python's
    global RNG: the states after equal the states before, and another global seed changes nothing."""
    outputs = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        np.random.seed(global_seed)
        random.seed(global_seed)
        before = (torch.get_rng_state(), np.random.get_state(), random.getstate())
        data = task.generate(10, 5, 1)
        clean, corrupted, pos = task.corruption_pairs(10, 5, 1)
        t, n, p = torch.get_rng_state(), np.random.get_state(), random.getstate()
        assert torch.equal(t, before[0]) and p == before[2]
        assert n[0] == before[1][0] and np.array_equal(n[1], before[1][1]) and n[2:] == before[1][2:]
        outputs.append((data.tokens, data.labels, clean.tokens, corrupted.tokens, pos))
    assert all(torch.equal(x, y) for x, y in zip(*outputs))


def assert_task_contract(task: Task, name: str) -> None:
    """Every check above, for one task built under registry name ``name``."""
    check_generate(task, name)
    check_corruption_pairs(task)
    check_no_global_rng(task)


def test_the_registry_lists_the_built_ins_first_and_the_study_uses_built_ins():
    assert REGISTERED[: len(BUILTIN_TASKS)] == list(BUILTIN_TASKS)
    assert set(STUDY_TASKS) <= set(BUILTIN_TASKS)


@pytest.mark.parametrize("name", REGISTERED)
def test_generate_is_seeded_pure_and_in_range(name):
    check_generate(get_task(name), name)


@pytest.mark.parametrize("name", REGISTERED)
def test_corruption_pairs_change_one_early_token_and_the_final_label(name):
    check_corruption_pairs(get_task(name))


@pytest.mark.parametrize("name", REGISTERED)
def test_no_global_rng_is_read_or_moved(name):
    check_no_global_rng(get_task(name))
