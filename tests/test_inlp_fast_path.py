"""INLP's fast paths give the numbers of the paths they replaced: the from-scratch INLP
reference's rows split and centred once
(``science.inlp._SplitRows``) against projecting the whole X each round and splitting it after
(the code before, commit 7f0ee46). The incremental INLP against the reference:
``tests/test_inlp_incremental.py``."""

from __future__ import annotations

import pytest
import torch

from science import inlp
from science.edit_methods import Inlp


def _states(n: int, d: int, c: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Correlated Gaussian states with class means along many directions: X [n, d], y [n]."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    mix = torch.randn(d, d, generator=g) * torch.logspace(0, -1.5, d)
    means = torch.randn(c, d, generator=g) * torch.logspace(-0.3, -1.5, d)
    return ((torch.randn(n, d, generator=g) + means[y]) @ mix.T + 0.5).to(dtype), y


class _WholeX:
    """The INLP rounds as they were: all of X projected each round, then split."""

    def __init__(self, X: torch.Tensor, mu: torch.Tensor, tr_idx: torch.Tensor, dev_idx: torch.Tensor) -> None:
        self.X, self.mu, self.idx = X, mu, (tr_idx, dev_idx)

    def edited(self, Q: torch.Tensor) -> list[torch.Tensor]:
        X = self.X
        Xe = X if Q.shape[1] == 0 else X - ((X - self.mu) @ Q.to(X.dtype)) @ Q.T.to(X.dtype)
        return [Xe[i] for i in self.idx]


@pytest.mark.parametrize(("c", "kw"), [(2, {}), (4, {}), (2, {"max_rounds": 3}), (4, {"chance_tol": 0.1})])
def test_inlp_equals_projecting_the_whole_x_each_round(monkeypatch, c, kw):
    X, y = _states(1500, 12, c, torch.float64, seed=c)
    reference = Inlp(from_scratch=True)
    fast = reference.fit(X, y, c, seed=2, **kw)
    monkeypatch.setattr(inlp, "_SplitRows", _WholeX)
    ref = reference.fit(X, y, c, seed=2, **kw)
    assert fast.info["n_rounds"] >= 1
    assert fast.info == ref.info  # rounds, held-out accuracies, convergence flags, stop
    assert fast.rank_removed == ref.rank_removed
    assert torch.allclose(fast.left, ref.left, rtol=0, atol=1e-12)
    assert torch.equal(fast.center, ref.center)


def test_split_rows_without_directions_are_the_rows_themselves():
    X, _ = _states(100, 6, 2, torch.float32)
    tr, dev = torch.arange(20, 100), torch.arange(20)
    parts = inlp._SplitRows(X, X.mean(0), tr, dev)
    out = parts.edited(torch.zeros(6, 0, dtype=torch.float64))
    assert torch.equal(out[0], X[tr]) and torch.equal(out[1], X[dev])
    Q = torch.linalg.qr(torch.randn(6, 2, dtype=torch.float64)).Q
    edited = parts.edited(Q)
    assert edited[0].dtype == torch.float32
    # the removed span holds the mean's component only
    along = (edited[0].double() - X.mean(0).double()) @ Q
    assert float(along.abs().max()) < 1e-5
