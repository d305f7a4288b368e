"""The probe's and INLP's fast paths give the numbers of the paths they replaced: the two-class
log-sum-exp written out (``science.probes.solver._row_logsumexp``) against
``torch.logsumexp``, and the from-scratch INLP reference's rows split and centred once
(``science.inlp._SplitRows``) against projecting the whole X each round and splitting it after
(the code before, commit 7f0ee46). The incremental INLP against the reference:
``tests/test_inlp_incremental.py``."""

from __future__ import annotations

import math

import pytest
import torch

from science import inlp
from science.edit_methods import Inlp
from science.probes import fit_probe, solver


def _torch_logsumexp(logits: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(logits, 1, keepdim=True)


def test_two_class_logsumexp_is_torchs_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    scale = torch.logspace(-3, 3, 4000, dtype=torch.float64).unsqueeze(1)
    L = torch.randn(4000, 2, generator=g, dtype=torch.float64) * scale
    L[::7, 1] = L[::7, 0]  # ties
    L[::11, 0] = -math.inf
    L[::13] = -math.inf  # both classes impossible
    L[::17, 1] = math.inf
    ours, ref = solver._row_logsumexp(L), _torch_logsumexp(L)
    assert torch.equal(ours.isnan(), ref.isnan())
    assert torch.equal(ours.nan_to_num(), ref.nan_to_num())


def test_more_classes_use_torchs_logsumexp():
    L = torch.randn(50, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.equal(solver._row_logsumexp(L), _torch_logsumexp(L))


def _states(n: int, d: int, c: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Correlated Gaussian states with class means along many directions: X [n, d], y [n]."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    mix = torch.randn(d, d, generator=g) * torch.logspace(0, -1.5, d)
    means = torch.randn(c, d, generator=g) * torch.logspace(-0.3, -1.5, d)
    return ((torch.randn(n, d, generator=g) + means[y]) @ mix.T + 0.5).to(dtype), y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_two_class_probe_equals_the_torch_logsumexp_fit(monkeypatch, dtype):
    X, y = _states(3000, 24, 2, dtype)
    fast = fit_probe(X, y, 2)
    monkeypatch.setattr(solver, "_row_logsumexp", _torch_logsumexp)
    ref = fit_probe(X, y, 2)
    assert fast.n_iter == ref.n_iter > 0 and fast.n_evals == ref.n_evals and fast.converged == ref.converged
    assert torch.equal(fast.W, ref.W) and torch.equal(fast.b, ref.b) and fast.grad_max == ref.grad_max


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
