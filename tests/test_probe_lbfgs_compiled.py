"""The compiled L-BFGS fit (``csrc/probe_lbfgs.h``, ``KernelObjective.minimise``) makes the Python
loop's iterates bit for bit: the same weights, intercepts, iterations, evaluations, convergence
flag and final gradient as ``minimise(python_loop=True)`` (the flat L-BFGS of
``science.probes.lbfgs`` around the same evaluation) — converging, at its iteration budget,
stalled, preconditioned or not (unwhitened problems make the line search bracket and zoom), with
INLP's projection, a warm start and a feature at the noise floor — and a whole INLP fit is the
same; the op refuses arguments it does not take."""

from __future__ import annotations

import functools

import pytest
import torch

import science.probes.linear as linear
from science.interventions import fit_edit
from science.probes import onepass, standardised
from science.probes.design import projected
from science.probes.kernel_objective import KernelObjective
from science.probes.solver import minimise, whitening
from tests.compiled_kernels import require_probe_kernel
from tests.probe_states import correlated_states


@pytest.fixture(autouse=True)
def _kernel() -> None:
    require_probe_kernel()  # must build where a compiler is, and in CI


def _both(design, y, c, *, whiten=True, **kw):
    lam = (2.0 if c == 2 else 1.0) / design.n
    counts = torch.bincount(y, minlength=c)
    M = whitening(design.cov, design.std, lam) if whiten else torch.eye(design.cov.shape[0], dtype=torch.float64)
    fits = [minimise(design, y, counts, lam, M, history_size=10, python_loop=python, **kw) for python in (True, False)]
    return fits


def _assert_same(ref, new) -> None:
    assert torch.equal(new.W, ref.W) and torch.equal(new.b, ref.b)
    assert (new.n_iter, new.n_evals, new.converged, new.grad_max) == (
        ref.n_iter,
        ref.n_evals,
        ref.converged,
        ref.grad_max,
    )


@pytest.mark.parametrize(
    ("c", "tol", "max_iter", "whiten"),
    [
        (2, 1e-4, 500, True),
        (4, 1e-4, 500, True),
        (2, 1e-8, 500, True),
        (4, 1e-9, 40, True),  # the iteration budget ends it
        (3, 1e-4, 3, True),
        (4, 1e-4, 0, True),  # no iteration: one evaluation at the start
        (6, 1e-5, 500, True),
        (8, 1e-5, 500, True),
        (2, 1e-13, 500, True),  # below what float rounding reaches: the stall tests end it
        (3, 1e-6, 300, False),  # unwhitened: ill-conditioned, the line search brackets and zooms
        (5, 1e-7, 300, False),
    ],
)
def test_compiled_fit_makes_the_python_loops_iterates(c, tol, max_iter, whiten) -> None:
    X, y = correlated_states(3000, 24, c, seed=c)
    ref, new = _both(standardised(X), y, c, whiten=whiten, tol=tol, max_iter=max_iter)
    _assert_same(ref, new)
    if max_iter >= 500 and tol >= 1e-5:
        assert new.converged and new.n_iter > 1  # the cases meant to converge do (float32 rows: not much below 1e-5)


@pytest.mark.parametrize(("c", "seed"), [(3, 103), (2, 104), (6, 107)])
def test_the_line_search_rounds_as_python_does(c, seed) -> None:
    """Unwhitened fits whose line search interpolates often (found by search): a loop that divided
    plainly where Python computes ``number / tensor`` as ``reciprocal(tensor) · number`` made other
    iterates on 103 and 107, one that took libm's square root instead of torch's on 104."""
    X, y = correlated_states(1500, 12, c, seed=seed)
    ref, new = _both(standardised(X), y, c, whiten=False, tol=1e-6, max_iter=200)
    _assert_same(ref, new)


def test_projection_warm_start_and_dead_feature() -> None:
    X, y = correlated_states(2500, 20, 3, seed=11)
    X[:, 4] = 2.0  # a feature at the noise floor (infinite std: never read)
    design = standardised(X)
    g = torch.Generator().manual_seed(3)
    q = torch.linalg.qr(torch.randn(20, 3, dtype=torch.float64, generator=g)).Q
    P = torch.eye(20, dtype=torch.float64) - q @ q.T
    seen = projected(design, P, design.mean @ P, P @ design.cov @ P)  # INLP's view after a round
    cold, _ = _both(seen, y, 3, tol=1e-3, max_iter=500)
    ref, new = _both(seen, y, 3, tol=1e-5, max_iter=500, init=(cold.W, cold.b))
    _assert_same(ref, new)
    assert new.converged


def test_a_whole_inlp_fit_is_the_same(monkeypatch) -> None:
    X, y = correlated_states(3000, 16, 3, seed=7)
    edits = []
    for python in (True, False):
        monkeypatch.setattr(linear, "minimise", functools.partial(minimise, python_loop=python))
        edits.append(fit_edit("inlp", X, y, 3, seed=0))
    ref, new = edits
    assert new.rank_removed == ref.rank_removed > 0
    assert torch.equal(new.left, ref.left) and torch.equal(new.right, ref.right)
    assert new.info == ref.info


def test_the_solver_runs_the_compiled_fit_where_the_kernel_applies(monkeypatch) -> None:
    calls = []
    real = KernelObjective.minimise

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KernelObjective, "minimise", counted)
    X, y = correlated_states(1000, 8, 2, seed=2)
    _both(standardised(X), y, 2, tol=1e-4, max_iter=100)  # python_loop=True, then the default
    assert calls == [1]


def _op_args(design, y, K):
    D = design.Xt.shape[0]
    M = torch.eye(D, dtype=torch.float64)
    obj = KernelObjective(design, y, K, M, 1e-3, 1.0)
    theta = torch.zeros(K * D + K, dtype=torch.float64)
    return [obj.Xt, obj.y, float(obj.n), obj.n, obj.maps, None, None, obj.inv_std, obj.MT, 1e-3, 1.0, theta]


def test_the_op_refuses_what_it_does_not_take() -> None:
    X, y = correlated_states(500, 6, 3, seed=1)
    design = standardised(X)
    fit = onepass.lbfgs_fit_op()
    tail = [1e-4, 50, 10, 1e-14, 1]
    args = _op_args(design, y, 3)
    theta = args[-1].clone()
    th, n_iter, n_evals, stopped, gmax = fit(*args, *tail)
    assert n_evals >= 1 and th.shape == theta.shape and torch.equal(args[-1], theta)  # the start is not modified
    bad_labels = y.clone()
    bad_labels[7] = 3
    with pytest.raises(RuntimeError, match="labels in 0..2, got 3 at 7"):
        fit(*args[:1], bad_labels, *args[2:], *tail)
    with pytest.raises(RuntimeError, match="theta0 must be"):
        fit(*args[:-1], torch.zeros(5, dtype=torch.float64), *tail)
    with pytest.raises(RuntimeError, match="P and grad_map go together"):
        fit(*args[:5], torch.eye(6, dtype=torch.float64), *args[6:], *tail)
    with pytest.raises(RuntimeError, match="history_size"):
        fit(*args, 1e-4, 50, 0, 1e-14, 1)
