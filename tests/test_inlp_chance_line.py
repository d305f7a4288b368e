"""INLP's chance line (docs/SCIENCE.md#inlp-chance-line): the best constant guess on the held-out
rows plus the larger of 1 pp and a one-sided 1 % binomial margin, never under a coin flip; a fit
stops at the first round on or under it."""

from __future__ import annotations

import math

import pytest
import torch

from science.edit_methods import INLP_CHANCE_TOL, Inlp, inlp_chance_line


def _labels(counts: list[int]) -> torch.Tensor:
    return torch.cat([torch.full((n,), c, dtype=torch.long) for c, n in enumerate(counts)])


def test_run_64s_held_out_shares_give_a_line_above_a_coin_flip():
    # run 64's layer-2 fit set: 4,000 held-out tokens, shares 0.48875 / 0.51125, the training
    # majority the smaller one; version 1's line was 0.48875 + 0.01 = 0.49875, under a coin flip
    y_dev = _labels([1955, 2045])
    margin = 2.326 * math.sqrt(0.51125 * 0.48875 / 4000)  # 0.018385…
    assert inlp_chance_line(y_dev, 2) == pytest.approx(0.51125 + margin, abs=1e-12)
    assert inlp_chance_line(y_dev, 2) == pytest.approx(0.52963, abs=1e-5)


def test_the_line_keeps_its_least_margin_on_many_rows():
    y_dev = _labels([300_000, 700_000])  # noise margin 0.107 pp, under the 1 pp floor
    assert inlp_chance_line(y_dev, 2) == pytest.approx(0.7 + INLP_CHANCE_TOL, abs=1e-12)
    assert inlp_chance_line(y_dev, 2, chance_tol=0.05) == pytest.approx(0.75, abs=1e-12)


def test_the_line_counts_classes_absent_from_the_held_out_rows():
    y_dev = _labels([0, 0, 60, 40])  # classes 0 and 1 absent: the best guess is class 2's 0.6
    assert inlp_chance_line(y_dev, 4) == pytest.approx(0.6 + 2.326 * math.sqrt(0.6 * 0.4 / 100), abs=1e-12)


def test_no_held_out_row_is_refused():
    with pytest.raises(ValueError, match="held-out row"):
        inlp_chance_line(torch.zeros(0, dtype=torch.long), 2)


def test_a_fit_stops_at_the_first_round_on_its_line_and_records_it():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (3000,), generator=g)
    X = torch.randn(3000, 12, generator=g)
    X[:, :2] += 1.5 * torch.nn.functional.one_hot(y, 3)[:, :2].float()  # the labels along two directions
    edit = Inlp().fit(X, y, 3, seed=4)
    line = edit.info["chance_line"]
    perm = torch.randperm(3000, generator=torch.Generator().manual_seed(4))
    assert line == pytest.approx(inlp_chance_line(y[perm[:600]], 3), abs=1e-12)  # its own held-out 20 %
    accs = [r["dev_accuracy"] for r in edit.info["rounds"]]
    assert edit.info["reached_chance"] and accs[-1] <= line
    assert all(a > line for a in accs[:-1])
    assert 2 <= edit.rank_removed < 12


def test_labels_with_nothing_to_read_stop_at_the_first_round():
    # balanced labels independent of the rows: the first probe reads chance, whichever class the
    # training rows hold more of; version 1's line (the held-out share of the training majority
    # + 1 pp) lay under a coin flip whenever that class was the held-out minority
    stopped, under_a_coin_flip = 0, 0
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        X, y = torch.randn(2000, 16, generator=g), torch.randint(0, 2, (2000,), generator=g)
        edit = Inlp().fit(X, y, 2, seed=seed)
        assert edit.info["chance_line"] >= 0.5 + INLP_CHANCE_TOL
        under_a_coin_flip += edit.info["dev_majority"] + INLP_CHANCE_TOL < 0.5
        stopped += edit.rank_removed == 0
    assert under_a_coin_flip >= 3  # the case the line was moved for occurs among these seeds
    assert stopped >= 18  # a one-sided 1 % test a round: a first probe rarely reads past it by chance
