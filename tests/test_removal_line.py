"""The removal line (measurement version 2, docs/SCIENCE.md#removal-line): an edit removed the
variable when a probe refit on its edited states reads no more than the best constant guess on the
refit's held-out tokens plus the larger of 2 pp and their one-sided 1 % binomial margin. The line
is stored with the row; claim 4 reads it, and a version 1 row without one keeps its old reading
(majority + 2 pp)."""

from __future__ import annotations

import math

import pytest
import torch

import science.measure as measure
from science.claims.necessity import edit_removed
from science.probes import probe_layers
from science.probes.layerwise import _best_guess, _majority_rate
from science.stats import chance_line
from tests.test_fit_accumulate import _interventions


def test_chance_line_by_hand():
    # 400 tokens at a coin flip: 2.326 · √(0.25 / 400) = 5.815 pp, above the 2 pp floor
    assert chance_line(0.5, 400, 0.02) == pytest.approx(0.5 + 2.326 * 0.025)
    # 10,000 tokens: 2.326 · 0.5 / 100 = 1.163 pp, under the floor: the floor holds
    assert chance_line(0.5, 10_000, 0.02) == pytest.approx(0.52)
    assert chance_line(0.9, 900, 0.0) == pytest.approx(0.9 + 2.326 * math.sqrt(0.09 / 900))
    with pytest.raises(ValueError, match="at least one"):
        chance_line(0.5, 0, 0.02)
    with pytest.raises(ValueError, match="0..1"):
        chance_line(1.5, 10, 0.02)


def test_the_best_guess_is_the_test_tokens_largest_class_not_the_training_majority():
    # training sequences 0-1 mostly class 0, held-out sequences 2-3 mostly class 1 (-1: unlabelled)
    labels = torch.tensor([[0, 0, 0, 1, -1], [0, 0, 0, 1, -1], [1, 1, 1, 0, 0], [1, 1, 1, 0, -1]])
    tr, te = torch.tensor([0, 1]), torch.tensor([2, 3])
    assert _majority_rate(labels, tr, te, 2) == pytest.approx(3 / 9)  # v1's baseline: under a coin flip
    assert _best_guess(labels, te, 2) == (pytest.approx(6 / 9), 9)


def test_the_refit_report_carries_what_its_line_reads():
    g = torch.Generator().manual_seed(0)
    n, L, D = 60, 10, 4
    labels = (torch.rand(n, L, generator=g) < 0.3).long()
    report = probe_layers({0: torch.randn(n, L, D, generator=g)}, labels, 2, seed=0)[0]
    assert report.n_test_tokens == report.n_test * L  # every token labelled
    assert report.best_guess is not None and report.best_guess >= report.majority_baseline
    line = measure.removal_line(report)
    assert line == pytest.approx(chance_line(report.best_guess, report.n_test_tokens, measure.REMOVAL_TOL))
    assert line > report.best_guess + measure.REMOVAL_TOL  # 120 tokens: the noise margin is the larger


def test_claim_4_reads_the_rows_own_line_and_version_1_rows_their_old_one():
    v2 = {"refit_acc": 0.53, "refit_majority": 0.50, "refit_line": 0.558}
    assert edit_removed(v2)  # 3 pp over the majority, within the noise of 400 tokens
    assert not edit_removed({**v2, "refit_acc": 0.56})
    v1 = {"refit_acc": 0.53, "refit_majority": 0.50}  # no line: majority + 2 pp
    assert not edit_removed(v1)
    assert edit_removed({**v1, "refit_acc": 0.519})
    assert not edit_removed({"refit_acc": None, "refit_majority": 0.5, "refit_line": 0.52})


def test_a_refit_at_or_under_its_line_keeps_the_base_fit_set_and_stores_the_line(monkeypatch):
    iv = _interventions()
    lines: list[float] = []
    real = measure.removal_line

    def recorded(report):
        lines.append(real(report))
        return 2.0  # above any accuracy: every edit removed the variable

    monkeypatch.setattr(measure, "removal_line", recorded)
    fitted = iv.fit_edits(["leace"])
    assert {size for size in fitted.fit_sizes.values()} == {iv.n_fit}  # never doubled
    assert [line for _acc, _maj, line in fitted.refits.values()] == [2.0, 2.0]
    # the real line lies at least 2 pp over the refit's majority baseline (its best guess is ≥ it)
    for (_acc, maj, _line), real_line in zip(fitted.refits.values(), lines, strict=True):
        assert real_line >= maj + measure.REMOVAL_TOL - 1e-12


def test_claim_4_says_which_removal_test_its_edits_read():
    from backend.claims_text.necessity import _necessity_detail
    from science.claims.necessity import _removal_lines

    v1 = {"refit_acc": 0.5, "refit_majority": 0.5}
    v2 = {**v1, "refit_line": 0.52}
    assert _removal_lines([v1, {"refit_acc": None}]) == "majority"
    assert _removal_lines([v2]) == "stored"
    assert _removal_lines([v1, v2]) == "mixed"
    claim = {
        "why": {"case": "evaluated"},
        "numbers": {"refit_tolerance": 0.02, "decoupled_share_min": 0.1, "groups": {}, "state_patching": None},
    }
    assert "reads at most 2 pp above the majority rate;" in _necessity_detail(claim)  # a version 1 study's words
    claim["numbers"]["removal_lines"] = "stored"
    assert "reads at or under its removal line" in _necessity_detail(claim)
    claim["numbers"]["removal_lines"] = "mixed"
    text = _necessity_detail(claim)
    assert "removal line" in text and "on measurement version 1 rows at most 2 pp above the majority rate" in text
