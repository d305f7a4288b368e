"""The probe's flat L-BFGS (``science.probes.lbfgs.lbfgs``) makes the iterates of
``torch.optim.LBFGS`` bit for bit: the probe fitted both ways (``minimise(reference=True)`` runs
torch's optimiser) has the same weights, intercepts, iteration count, convergence flag and final
gradient, whether it converges, stops at its iteration budget or stalls; and it makes one
evaluation fewer per torch ``step`` (torch evaluates the point each step starts from again)."""

from __future__ import annotations

import pytest
import torch

from science.probes import standardised
from science.probes.lbfgs import Stop, lbfgs
from science.probes.solver import minimise, whitening
from tests.probe_states import correlated_states


@pytest.fixture(autouse=True)
def _torch_objective(monkeypatch):
    monkeypatch.setenv("LAYERSCOPE_PROBE_KERNEL", "torch")


def _fit(X: torch.Tensor, y: torch.Tensor, c: int, reference: bool, **kw):
    d = standardised(X)
    lam = (2.0 if c == 2 else 1.0) / X.shape[0]
    counts = torch.bincount(y, minlength=c)
    return minimise(d, y, counts, lam, whitening(d.cov, d.std, lam), reference=reference, history_size=10, **kw)


@pytest.mark.parametrize(
    ("c", "tol", "max_iter"),
    [(2, 1e-4, 500), (4, 1e-4, 500), (2, 1e-8, 500), (4, 1e-9, 40), (3, 1e-4, 3), (4, 1e-4, 0)],
)
def test_flat_lbfgs_makes_torch_lbfgs_iterates(c, tol, max_iter):
    X, y = correlated_states(3000, 24, c, seed=c)
    ref = _fit(X, y, c, True, tol=tol, max_iter=max_iter)
    new = _fit(X, y, c, False, tol=tol, max_iter=max_iter)
    assert torch.equal(new.W, ref.W) and torch.equal(new.b, ref.b)
    assert (new.n_iter, new.converged, new.grad_max) == (ref.n_iter, ref.converged, ref.grad_max)
    assert new.n_evals <= ref.n_evals
    if max_iter >= 500 and tol >= 1e-4:
        assert new.converged and new.n_iter > 1  # the cases meant to converge do, after some iterations


def test_warm_start_same_iterates():
    X, y = correlated_states(2000, 16, 3, seed=5)
    cold = _fit(X, y, 3, False, tol=1e-3, max_iter=500)
    ref = _fit(X, y, 3, True, tol=1e-6, max_iter=500, init=(cold.W, cold.b))
    new = _fit(X, y, 3, False, tol=1e-6, max_iter=500, init=(cold.W, cold.b))
    assert torch.equal(new.W, ref.W) and new.n_iter == ref.n_iter


def test_stop_ends_the_run_at_the_point_evaluated():
    """A function that raises Stop ends the run there, at the trial point of the line search."""
    A = torch.diag(torch.linspace(1.0, 50.0, 8, dtype=torch.float64))
    seen: list[torch.Tensor] = []

    def f(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        seen.append(x.clone())
        g = A @ x - 1.0
        if float(g.abs().max()) <= 1e-3:
            raise Stop
        return float(0.5 * x @ A @ x - x.sum()), g

    run = lbfgs(f, torch.zeros(8, dtype=torch.float64), max_iter=100, history_size=5)
    assert run.stopped and run.n_evals == len(seen)
    assert torch.equal(run.x, seen[-1])
    assert float((A @ run.x - 1.0).abs().max()) <= 1e-3
