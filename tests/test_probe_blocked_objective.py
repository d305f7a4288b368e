"""The probe's objective on rows over the CPU's cache (science.probes.solver._blocked_objective): a
block of columns at a time, the same loss and gradient as the two-product evaluation within
float rounding, the same fitted probe within the solver's tolerance, an INLP projection read
through it as the unblocked objective reads it; rows at the study's size are not blocked, so
their numbers keep their bits."""

from __future__ import annotations

import pytest
import torch

import science.probes.solver as solver
from science.probes.design import projected, standardise
from science.probes.linear import fit_probe

K = 3


def _rows(n: int = 6000, d: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, K, (n,), generator=g)
    X = torch.randn(n, d, generator=g) @ (torch.randn(d, d, generator=g) * 0.3)
    X += torch.randn(K, d, generator=g)[y] * 0.5 + 2.0
    return X.float(), y


def _evaluate(design, y, M, lam, th):
    return solver._objective(design, torch.nn.functional.one_hot(y, K).double(), M, lam)(th)


@pytest.mark.parametrize("with_projection", [False, True])
def test_blocked_objective_equals_the_two_product_one(monkeypatch, with_projection) -> None:
    X, y = _rows()
    design = standardise(X)
    D = X.shape[1]
    if with_projection:  # INLP's view of the rows: one direction projected out
        q = torch.nn.functional.normalize(torch.randn(D, 1, dtype=torch.float64), dim=0)
        P = torch.eye(D, dtype=torch.float64) - q @ q.T
        design = projected(design, P, design.mean @ P, P @ design.cov @ P)
    M, lam = torch.eye(D, dtype=torch.float64), 1e-3
    th = torch.randn(K * D + K, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.1
    whole = _evaluate(design, y, M, lam, th)
    monkeypatch.setattr(solver, "BLOCK_BYTES", 4 * D * 700)  # 700-column blocks: 9 of them, a ragged last
    blocked = solver._blocked_objective(design, y, K, M, lam)(th)
    for a, b in zip(whole, blocked, strict=True):
        # float32 products summed over 6,000 rows in two orders (the one-pass kernel's, or MKL's by
        # block): an entry's rounding is relative to the sum's scale, not to the entry
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * float(a.abs().max())), (a, b)
    assert not torch.equal(whole[1], blocked[1]) or not torch.equal(whole[0], blocked[0])  # another sum order


def test_a_blocked_fit_gives_the_same_probe(monkeypatch) -> None:
    X, y = _rows(seed=2)
    X = X.double()  # float64 rows and a tight tolerance: both reach the one minimiser, not two stopping points
    whole = fit_probe(X, y, K, tol=1e-7)
    monkeypatch.setattr(solver, "BLOCK_ABOVE_BYTES", 0)
    monkeypatch.setattr(solver, "BLOCK_BYTES", 8 * X.shape[1] * 512)
    blocked = fit_probe(X, y, K, tol=1e-7)
    assert whole.converged and blocked.converged
    assert torch.allclose(blocked.W, whole.W, rtol=1e-4, atol=1e-4)
    assert (blocked.predict(X) == whole.predict(X)).float().mean() > 0.999


def test_the_study_sized_rows_are_not_blocked() -> None:
    # the paper preset's largest fit: 2,000 sequences × 40 tokens × 160 features (float32, 51 MB)
    n, d = 2000 * 40, 160
    assert n * d * 4 <= solver.BLOCK_ABOVE_BYTES
    assert not solver._in_blocks(standardise(torch.randn(n, d)))
    assert solver._in_blocks(standardise(torch.randn(2 * n, d)))  # 102 MB: read a block at a time
