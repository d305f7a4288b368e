"""The compiled gather, centre and transpose of a chunk of rows on disk (``onepass.centred_transpose``)
equals torch's index_select, sub_ and transposed copy bit for bit, and a streamed evaluation of the
probe objective that uses it equals the evaluation built from those torch steps bit for bit."""

from __future__ import annotations

import pytest
import torch

import science.spill as spill
from benchmarks.bench_streamed_objective import _torch_steps
from science.probes import onepass
from science.probes.design import standardise_rows
from science.probes.solver import _chunked_objective
from science.spill import SpilledRows
from tests.compiled_kernels import require_probe_kernel


@pytest.fixture(autouse=True)
def _kernel() -> None:
    require_probe_kernel()  # must build where a compiler is, and in CI


@pytest.mark.parametrize(("n", "d"), [(1024, 1024), (819, 96), (1023, 77), (17, 8), (5, 3), (16, 1), (0, 4)])
def test_equals_torchs_gather_centre_and_transpose(n: int, d: int) -> None:
    g = torch.Generator().manual_seed(n * 1000 + d)
    X = torch.randn(n, d, generator=g) * 3 + 1
    c = torch.randn(d, generator=g)
    given = X.clone()
    whole = onepass.centred_transpose(X, c)
    assert whole.is_contiguous() and whole.shape == (d, n)
    assert torch.equal(whole, X.clone().sub_(c).T.contiguous())
    rows = torch.nonzero(torch.rand(n, generator=g) < 0.7).flatten()
    picked = onepass.centred_transpose(X, c, rows)
    assert torch.equal(picked, X.index_select(0, rows).sub_(c).T.contiguous())
    assert torch.equal(X, given)  # left as it was


def test_refuses_what_it_cannot_read() -> None:
    X, c = torch.zeros(4, 3), torch.zeros(3)
    with pytest.raises(RuntimeError, match="rows must be positions in 0..3, got 4"):
        onepass.centred_transpose(X, c, torch.tensor([0, 4]))
    with pytest.raises(RuntimeError, match="X must be Float"):
        onepass.centred_transpose(X.double(), c)
    with pytest.raises(RuntimeError, match="centre must have shape"):
        onepass.centred_transpose(X, torch.zeros(4))
    with pytest.raises(RuntimeError, match="X must be contiguous"):
        onepass.centred_transpose(torch.zeros(3, 4).T, c)


def test_a_streamed_evaluation_keeps_its_bits(monkeypatch) -> None:
    monkeypatch.setattr(spill, "CHUNK_BYTES", 4 * 40 * 300)  # several chunks, a ragged last one
    g = torch.Generator().manual_seed(0)
    n, d, k = 2000, 40, 3
    y_all = torch.randint(0, k, (n,), generator=g)
    X = torch.randn(n, d, generator=g) + torch.randn(k, d, generator=g)[y_all] + 2.0
    mask = torch.rand(n, generator=g) < 0.8
    y = y_all[mask]
    th = torch.randn(k * d + k, dtype=torch.float64, generator=g) * 0.1
    M = torch.eye(d, dtype=torch.float64)
    with SpilledRows(d) as rows:
        rows.append(X)
        source = rows.selected(mask)
        design = standardise_rows(source)
        got = _chunked_objective(design, y, k, M, 1e-3)(th)
        want = _torch_steps(design, source, y, k, M, 1e-3)(th)  # gathered, centred in place, a transposed view
    assert design.n == int(mask.sum())
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
