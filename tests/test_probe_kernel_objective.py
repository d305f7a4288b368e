"""The kernel's folded evaluation (science.probes.kernel_objective.KernelObjective) against the torch
objective it replaces (science.probes.solver._objective, with the gradient mapped back to the
whitened coordinates as the solver maps it): the same loss, gradient and convergence quantity
within float rounding — with a whitening map, with INLP's projection, with a feature at the noise
floor — and the solver picks it exactly where the kernel applies."""

from __future__ import annotations

import math

import pytest
import torch

import science.probes.solver as solver
from science.probes.design import Design, projected, standardise
from science.probes.kernel_objective import KernelObjective
from tests.compiled_kernels import require_probe_kernel


@pytest.fixture(autouse=True)
def _kernel() -> None:
    require_probe_kernel()  # must build where a compiler is, and in CI


def _design(n: int, d: int, K: int, *, projection: bool, dead_feature: bool) -> tuple[Design, torch.Tensor]:
    g = torch.Generator().manual_seed(n + d + K)
    y = torch.randint(0, K, (n,), generator=g)
    X = torch.randn(n, d, generator=g) @ (torch.randn(d, d, generator=g) * 0.4) + torch.randn(K, d, generator=g)[y]
    if dead_feature:
        X[:, 1] = 3.0  # constant: std is inf, the feature is not read
    design = standardise(X.float())
    assert math.isinf(float(design.std[1])) == dead_feature
    if projection:  # INLP's view: two directions projected out
        q = torch.linalg.qr(torch.randn(d, 2, dtype=torch.float64, generator=g)).Q
        P = torch.eye(d, dtype=torch.float64) - q @ q.T
        design = projected(design, P, design.mean @ P, P @ design.cov @ P)
    return design, y


def _torch_scaled(design: Design, y: torch.Tensor, K: int, M: torch.Tensor, lam: float, F: float, th: torch.Tensor):
    Y = torch.nn.functional.one_hot(y, K).double()
    loss, g_std, g_b, _ = solver._objective(design, Y, M, lam)(th)
    grad = torch.cat([(g_std @ M.T).reshape(-1), g_b]) * F
    return float(loss) * F, grad, max(float(g_std.abs().max()), float(g_b.abs().max()))


@pytest.mark.parametrize(
    ("n", "d", "K", "projection", "dead_feature"),
    [(3000, 24, 2, False, False), (2500, 40, 3, True, False), (4100, 17, 6, True, False), (1000, 8, 8, False, True)],
)
def test_folded_evaluation_equals_the_torch_objective(n, d, K, projection, dead_feature) -> None:
    design, y = _design(n, d, K, projection=projection, dead_feature=dead_feature)
    lam, F = 1.0 / n, 1e4
    M = solver.whitening(design.cov, design.std, lam)
    fused = KernelObjective(design, y, K, M, lam, F)
    for seed in range(3):
        th = torch.randn(K * d + K, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 0.3
        loss, grad, gmax = fused(th)
        ref_loss, ref_grad, ref_gmax = _torch_scaled(design, y, K, M, lam, F, th)
        assert loss == pytest.approx(ref_loss, rel=1e-6)
        assert torch.allclose(grad, ref_grad, rtol=1e-4, atol=1e-5 * float(ref_grad.abs().max()))
        assert gmax == pytest.approx(ref_gmax, rel=1e-4)
        again = fused(th)  # the buffers it reuses are zeroed: the same numbers a second time
        assert again[0] == loss and torch.equal(again[1], grad) and again[2] == gmax


def test_the_solver_uses_it_where_the_kernel_applies() -> None:
    design, y = _design(2000, 12, 3, projection=False, dead_feature=False)
    M = torch.eye(12, dtype=torch.float64)
    assert isinstance(solver._scaled_objective(design, y, 3, M, 1e-3, 1e4), KernelObjective)
    float64 = standardise(torch.randn(2000, 12, dtype=torch.float64))  # the kernel takes float32 rows only
    assert not isinstance(solver._scaled_objective(float64, y, 3, M, 1e-3, 1e4), KernelObjective)
