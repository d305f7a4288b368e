"""Parity, S3 and Dyck generators against independent plain-Python references (the contract every
task keeps, determinism, no global RNG, labels in range, is tests/test_task_contract.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from layerscope_core.registry import STUDY_TASKS
from science.tasks import TaskData, get_task

# ---------------------------------------------------------------- brute-force references
# Written from the definitions in docs/SCIENCE.md#tasks with lists and loops, sharing no code with science.tasks.

S3_ORDER = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


def ref_parity(bits):
    out, acc = [], 0
    for b in bits:
        acc ^= b
        out.append(acc)
    return out


def ref_s3(tokens):
    s = (0, 1, 2)
    out = []
    for tok in tokens:
        x = S3_ORDER[tok]
        s = (x[s[0]], x[s[1]], x[s[2]])  # s_t = x_t ∘ s_{t-1}: i -> x(s(i))
        out.append(S3_ORDER.index(s))
    return out


def ref_dyck(tokens, k, m):
    """(valid, depths, tops) with a plain list as the stack; tops use k for empty."""
    stack, depths, tops = [], [], []
    for tok in tokens:
        if tok < k:
            stack.append(tok)
            if len(stack) > m:
                return False, None, None
        else:
            if not stack or stack[-1] != tok - k:
                return False, None, None
            stack.pop()
        depths.append(len(stack))
        tops.append(stack[-1] if stack else k)
    return True, depths, tops


def one_diff(a, b):
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


# ---------------------------------------------------------------- registry and params
def test_registry_and_metadata():
    assert STUDY_TASKS == ("parity", "s3", "dyck", "code_depth")  # the study's; a new task is not one
    p = get_task("parity")
    assert (p.vocab_size, p.n_classes, p.class_names, p.params) == (2, 2, ("0", "1"), {})
    s = get_task("s3")
    assert s.vocab_size == s.n_classes == 6
    assert s.class_names == ("012", "021", "102", "120", "201", "210")
    d = get_task("dyck")
    assert d.params == {"k": 2, "m": 10, "target": "top"}
    assert (d.vocab_size, d.n_classes, d.class_names) == (4, 3, ("type0", "type1", "empty"))
    d = get_task("dyck", k=3, m=5, target="depth")
    assert (d.vocab_size, d.n_classes, d.class_names[-1]) == (6, 6, "5")
    json.dumps(d.params)


@pytest.mark.parametrize(
    "name, params, word",
    [
        ("nope", {}, "nope"),
        ("dyck", {"k": 0}, "'k'"),
        ("dyck", {"m": "3"}, "'m'"),
        ("dyck", {"k": True}, "'k'"),
        ("dyck", {"target": "width"}, "'target'"),
        ("dyck", {"kk": 2}, "kk"),
        ("parity", {"m": 2}, "'m'"),
    ],
)
def test_bad_task_or_param_raises_naming_it(name, params, word):
    with pytest.raises(ValueError, match=word):
        get_task(name, **params)


@pytest.mark.parametrize(
    "kwargs, word", [({"length": 0}, "length"), ({"n": 0}, "'n'"), ({"seed": -1}, "seed"), ({"split": "val"}, "split")]
)
def test_bad_generate_args_raise(kwargs, word):
    args = {"length": 8, "n": 4, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=word):
        get_task("parity").generate(**args)


def test_taskdata_validates_shapes():
    with pytest.raises(ValueError):
        TaskData(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError):
        TaskData(torch.zeros(2, 3), torch.zeros(2, 3))


# ---------------------------------------------------------------- generators vs references
def test_parity_matches_reference():
    data = get_task("parity").generate(length=33, n=64, seed=0)
    for toks, labs in zip(data.tokens.tolist(), data.labels.tolist()):
        assert labs == ref_parity(toks)
    assert get_task("parity").labels_for(np.array([[1, 1, 0, 1]])).tolist() == [[1, 0, 0, 1]]


def test_s3_matches_reference_and_order_matters():
    task = get_task("s3")
    data = task.generate(length=30, n=64, seed=0)
    for toks, labs in zip(data.tokens.tolist(), data.labels.tolist()):
        assert labs == ref_s3(toks)
    # a = (0,2,1) (swap 1,2), b = (1,0,2) (swap 0,1); worked by hand:
    # x = [a, b]: s_2 = b∘a = (1,2,0) → 3;   x = [b, a]: s_2 = a∘b = (2,0,1) → 4.
    ab = task.labels_for(np.array([[1, 2], [2, 1]]))
    assert ab.tolist() == [[1, 3], [2, 4]]
    # tokens are uniform over all 6 elements
    counts = np.bincount(task.generate(40, 300, 1).tokens.flatten().numpy(), minlength=6) / 12000
    assert np.all(np.abs(counts - 1 / 6) < 0.02)


def test_dyck_fixed_cases_depth_m_and_empty():
    top = get_task("dyck", k=2, m=3, target="top")
    depth = get_task("dyck", k=2, m=3, target="depth")
    toks = np.array([[0, 1, 0, 2, 3, 2, 1]])  # ( [ ( ) ] ) [   — reaches m = 3, returns to empty
    assert depth.labels_for(toks).tolist() == [[1, 2, 3, 2, 1, 0, 1]]
    assert top.labels_for(toks).tolist() == [[0, 1, 0, 1, 0, 2, 1]]
    for bad in ([[2]], [[0, 3]], [[0, 0, 0, 0]]):  # close on empty, wrong type, depth > m
        with pytest.raises(ValueError):
            top.labels_for(np.array(bad))


@pytest.mark.parametrize("k, m", [(2, 10), (3, 3), (1, 2)])
def test_dyck_matches_reference_and_walk_rules(k, m):
    task_top = get_task("dyck", k=k, m=m, target="top")
    task_depth = get_task("dyck", k=k, m=m, target="depth")
    data = task_top.generate(length=40, n=200, seed=5)
    data_d = task_depth.generate(length=40, n=200, seed=5)
    assert torch.equal(data.tokens, data_d.tokens)
    reached_m = returned_empty = False
    opens_mid = steps_mid = 0
    for toks, tops, depths in zip(data.tokens.tolist(), data.labels.tolist(), data_d.labels.tolist()):
        valid, ref_depths, ref_tops = ref_dyck(toks, k, m)
        assert valid and tops == ref_tops and depths == ref_depths
        before = [0] + ref_depths[:-1]
        for d, tok in zip(before, toks):
            if d == 0:
                assert tok < k  # at depth 0 open
            elif d == m:
                assert tok >= k  # at depth m close
            else:
                steps_mid += 1
                opens_mid += tok < k
        reached_m |= m in ref_depths
        returned_empty |= any(d == 0 for d in ref_depths[1:])
    assert reached_m and returned_empty
    assert abs(opens_mid / steps_mid - 0.5) < 0.03  # open with probability 1/2 in between


# ---------------------------------------------------------------- corruption pairs
def check_pairs(task, length, n, seed, reference):
    clean, corrupted, pos = task.corruption_pairs(length=length, n=n, seed=seed)
    assert clean.tokens.shape == corrupted.tokens.shape == (n, length) and pos.shape == (n,)
    assert pos.dtype == torch.long
    early = max(2, length // 4)
    for i in range(n):
        a, b = clean.tokens[i].tolist(), corrupted.tokens[i].tolist()
        assert one_diff(a, b) == [int(pos[i])]
        assert int(pos[i]) < early
        assert clean.labels[i].tolist() == reference(a)
        assert corrupted.labels[i].tolist() == reference(b)
        assert clean.labels[i, -1] != corrupted.labels[i, -1]
    again = task.corruption_pairs(length=length, n=n, seed=seed)
    assert torch.equal(again[1].tokens, corrupted.tokens) and torch.equal(again[2], pos)
    other = task.corruption_pairs(length=length, n=n, seed=seed + 1)
    assert not torch.equal(other[0].tokens, clean.tokens)
    return clean, corrupted, pos


@pytest.mark.parametrize("length", [5, 40])
def test_parity_and_s3_corruption_pairs(length):
    check_pairs(get_task("parity"), length, 40, 0, ref_parity)
    clean, _, _ = check_pairs(get_task("s3"), length, 40, 0, ref_s3)
    assert torch.equal(clean.tokens, get_task("s3").generate(length, 40, 0).tokens)


def dyck_ref_labels(k, m, target):
    def ref(toks):
        valid, depths, tops = ref_dyck(toks, k, m)
        assert valid, "corrupted sequence is not a valid Dyck input"
        return tops if target == "top" else depths

    return ref


@pytest.mark.parametrize("length", [2, 9, 40, 120])
def test_dyck_top_corruption_changes_the_final_top_opener(length):
    task = get_task("dyck", k=2, m=10, target="top")
    clean, corrupted, pos = check_pairs(task, length, 30, 0, dyck_ref_labels(2, 10, "top"))
    for i in range(30):
        toks = clean.tokens[i].tolist()
        p = int(pos[i])
        assert toks[p] < 2  # an opening bracket ...
        _, depths, _ = ref_dyck(toks, 2, 10)
        assert min(depths[p:]) == depths[p] == depths[-1]  # ... never closed, the final top


@pytest.mark.parametrize("length", [2, 40, 120])
def test_dyck_depth_corruption_adds_two_levels(length):
    task = get_task("dyck", k=2, m=10, target="depth")
    clean, corrupted, pos = check_pairs(task, length, 30, 1, dyck_ref_labels(2, 10, "depth"))
    for i in range(30):
        p = int(pos[i])
        diff = (corrupted.labels[i] - clean.labels[i]).tolist()
        assert diff == [0] * p + [2] * (length - p)


def test_dyck_corruption_impossible_settings_raise():
    with pytest.raises(ValueError, match="'k'"):
        get_task("dyck", k=1, target="top").corruption_pairs(10, 4, 0)
    with pytest.raises(ValueError, match="'m'"):
        get_task("dyck", m=1, target="depth").corruption_pairs(10, 4, 0)
