"""The probe's preconditioner on a covariance that float32 rounding left indefinite.

A trained LSTM's parity embedding layer gave a standardised covariance of rank one (one input bit)
whose other 159 eigenvalues, a float32 product's rounding, lay in ±5e-5 — below the probe's
``λ = 4.2e-5`` — so the Cholesky factorisation of ``Σ̃ + λI`` failed and the whole measurement
stopped. The preconditioner then comes from the eigendecomposition, eigenvalues clamped at ``λ``.
"""

from __future__ import annotations

import torch

from science.probes.design import Design
from science.probes.linear import DEFAULT_C, fit_design
from science.probes.solver import whitening

D, N = 160, 24_000
NOISE = 2e-4  # the rounding's size, a few times λ (the LSTM's: ±5e-5 against λ = 4.2e-5)
LAM = 2.0 / (DEFAULT_C * N)  # the probe's two-class λ at N rows (science.probes.linear.fit_design)


def _rank_one_corr(noise: float, seed: int = 0) -> torch.Tensor:
    """``[D, D]`` float64: all-ones (every feature the same bit) plus a symmetric perturbation of
    size ``noise``, like the rounding of a float32 covariance product."""
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(D, D, generator=g, dtype=torch.float64)
    E = (E + E.T) / 2
    E *= noise / torch.linalg.eigvalsh(E).abs().max()
    return torch.ones(D, D, dtype=torch.float64) + E


def test_indefinite_corr_gets_a_clamped_eigen_preconditioner():
    corr = _rank_one_corr(NOISE)
    assert float(torch.linalg.eigvalsh(corr)[0]) < -LAM  # the failing case: Cholesky cannot factor it
    assert int(torch.linalg.cholesky_ex(corr + LAM * torch.eye(D, dtype=torch.float64)).info) > 0
    M = whitening(corr, torch.ones(D, dtype=torch.float64), LAM)
    assert torch.isfinite(M).all()
    evals, evecs = torch.linalg.eigh(corr)
    clamped = (evecs * evals.clamp_min(LAM)) @ evecs.T
    # M whitens the clamped matrix: M Σ̃_clamped Mᵀ = I
    assert torch.allclose(M @ clamped @ M.T, torch.eye(D, dtype=torch.float64), atol=1e-8)


def test_positive_definite_corr_keeps_the_cholesky_factor():
    corr = _rank_one_corr(NOISE) + 1e-3 * torch.eye(D, dtype=torch.float64)
    M = whitening(corr, torch.ones(D, dtype=torch.float64), LAM)
    assert torch.equal(M, M.tril())  # L⁻¹: lower triangular
    shifted = corr + LAM * torch.eye(D, dtype=torch.float64)
    assert torch.allclose(M @ shifted @ M.T, torch.eye(D, dtype=torch.float64), atol=1e-8)


def test_probe_fits_on_rows_whose_covariance_is_indefinite():
    """A probe on one bit carried by every feature: the design's covariance is replaced by the
    indefinite one (what float32 rounding produced on the LSTM), and the fit still separates the
    two classes."""
    g = torch.Generator().manual_seed(1)
    bit = torch.randint(0, 2, (N,), generator=g)
    direction = torch.randn(D, generator=g)
    X = (bit.float() - 0.5).unsqueeze(1) * direction  # [N, D]: rank one, centred
    Xt = X.T.contiguous()
    std = direction.abs().double() / 2
    cov = _rank_one_corr(NOISE) * torch.outer(std, std) * torch.sign(torch.outer(direction, direction)).double()
    zeros = torch.zeros(D, dtype=torch.float64)
    d = Design(Xt=Xt, centre=zeros, mean=zeros, cov=cov, std=std)
    p = fit_design(d, bit, 2)
    assert p.accuracy(X, bit) == 1.0
