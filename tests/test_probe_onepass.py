"""The compiled one-pass probe objective (science.probes.onepass, measurement version 3) against a
float64 evaluation and against the torch objective it replaces (version 2's two products): loss,
gradient and intercept gradient agree to float rounding, as close to float64 as the torch path
is; strided column slices are read in place; a ragged last block, one feature, 2–8 classes; a
bad call raises before anything is added; more classes or another dtype take the torch path."""

from __future__ import annotations

import pytest
import torch

from science.probes import onepass
from science.probes.solver import _Sums
from tests.compiled_kernels import require_probe_kernel


@pytest.fixture(autouse=True)
def _kernel():
    require_probe_kernel()


def _problem(D: int, N: int, K: int, pad: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(D, N + pad, generator=g)
    return (
        X[:, :N],
        torch.randn(K, D, generator=g) * 0.2,
        torch.randn(K, dtype=torch.float64, generator=g),
        torch.randint(0, K, (N,), generator=g),
    )


def _kernel_sums(Xt, V, b, y, n):
    K, D = V.shape
    out = (
        torch.zeros((), dtype=torch.float64),
        torch.zeros(K, D, dtype=torch.float64),
        torch.zeros(K, dtype=torch.float64),
    )
    onepass.add_sums(Xt, V, b, y, n, *out)
    return out


def _float64_sums(Xt, V, b, y, n):
    logp = torch.log_softmax(V.double() @ Xt.double() + b[:, None], 0)
    R = logp.exp()
    R[y, torch.arange(y.numel())] -= 1.0
    R /= n
    return logp.gather(0, y[None]).sum(), R @ Xt.double().T, R.sum(1)


def _rel(a, ref):
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


@pytest.mark.parametrize(
    ("D", "N", "K", "pad"),
    [
        (160, 4000, 2, 0),
        (160, 4000, 6, 0),
        (37, 1001, 3, 5),
        (768, 700, 6, 0),
        (5, 7, 8, 3),
        (1, 100, 2, 0),
        (64, 63, 4, 0),
        (96, 2500, 5, 17),
        (24, 3000, 7, 1),
    ],
)
def test_kernel_sums_equal_float64_within_rounding(D, N, K, pad):
    Xt, V, b, y = _problem(D, N, K, pad, seed=D + N + K)
    got = _kernel_sums(Xt, V, b, y, N)
    ref = _float64_sums(Xt, V, b, y, N)
    torch_path = _Sums(K, D)
    torch_path.add(V, b, Xt, y, N, kernel=False)
    for a, r, t in zip(got, ref, (torch_path.picked, torch_path.G, torch_path.g_b), strict=True):
        # as close to float64 as the torch objective is (a float32 product's rounding), or closer
        assert _rel(a, r) <= max(5 * _rel(t, r), 1e-7), (_rel(a, r), _rel(t, r))


def test_kernel_is_deterministic_and_adds():
    Xt, V, b, y = _problem(160, 3000, 6, 0, seed=3)
    once = _kernel_sums(Xt, V, b, y, 3000)
    again = _kernel_sums(Xt.clone(), V, b, y, 3000)
    assert all(torch.equal(a, c) for a, c in zip(once, again, strict=True))
    twice = list(once)
    twice = [t.clone() for t in twice]
    onepass.add_sums(Xt, V, b, y, 3000, *twice)  # adds into what it is given
    assert all(torch.allclose(t, 2 * a) for t, a in zip(twice, once, strict=True))


def test_bad_calls_raise_before_adding():
    Xt, V, b, y = _problem(16, 50, 3, 0, seed=1)
    picked, G, gb = (
        torch.zeros((), dtype=torch.float64),
        torch.zeros(3, 16, dtype=torch.float64),
        torch.zeros(3, dtype=torch.float64),
    )
    bad_labels = y.clone()
    bad_labels[7] = 3
    with pytest.raises(RuntimeError, match="labels in 0..2"):
        onepass.add_sums(Xt, V, b, bad_labels, 50, picked, G, gb)
    with pytest.raises(RuntimeError, match="V must have shape"):
        onepass.add_sums(Xt, V[:, :8], b, y, 50, picked, G, gb)
    with pytest.raises(RuntimeError, match="b must be Double"):
        onepass.add_sums(Xt, V, b.float(), y, 50, picked, G, gb)
    with pytest.raises(RuntimeError, match="K must be 2..8"):
        onepass.add_sums(
            Xt,
            torch.zeros(9, 16),
            torch.zeros(9, dtype=torch.float64),
            y,
            50,
            picked,
            torch.zeros(9, 16, dtype=torch.float64),
            torch.zeros(9, dtype=torch.float64),
        )
    assert not picked.any() and not G.any() and not gb.any()


def test_which_fits_it_evaluates(monkeypatch):
    rows = torch.zeros(4, 10)
    assert onepass.applies(rows, 2) and onepass.applies(rows, 8)
    assert not onepass.applies(rows, 9) and not onepass.applies(rows.double(), 2)
    monkeypatch.setenv("LAYERSCOPE_PROBE_KERNEL", "torch")
    assert not onepass.applies(rows, 2)
