"""One L-BFGS evaluation of the probe's objective around the one-pass kernel, its small float64
algebra folded into a few products (part of measurement version 3).

An evaluation at ``θ = [vec(W_z), b]`` (whitened coordinates, :mod:`science.probes.solver`) needs
the standardised weights ``W = W_z M``, the raw weights the rows are read with
``V = W diag(1/std) P`` (INLP's projection ``P``; none for a plain probe), the kernel's sums over
the rows (:func:`science.probes.onepass.bound_sums`: ``Σ log p[y]``, ``G = R·X``, ``Σ R``), the
standardised gradient ``g = G P diag(1/std) + λ W`` and its whitened image ``g Mᵀ``. Made with
the torch objective's ~25 small operations, that algebra took about a third of an evaluation at
16,000 × 160 rows and two classes (BENCHMARKS.md "Lab scale", sixth pass); here the maps are
multiplied out once a fit:

- ``[W | W diag(1/std)] = W_z · [M | M diag(1/std)]`` (one product), then ``· P`` for INLP (a
  ``[K, D]`` product an evaluation is cheaper than folding ``P`` into the map each round, ``D³``);
- ``g = λ W + G · P diag(1/std)`` (one ``addmm``; without a projection an elementwise scale);
- ``∇θ = [g Mᵀ, Σ R]`` (one product into the gradient's buffer).

The same objective and gradient as :func:`science.probes.solver._objective`, grouped differently
(float rounding only; ``tests/test_probe_kernel_objective.py`` holds them together).

:meth:`KernelObjective.minimise` runs a whole fit in C++ (``csrc/probe_lbfgs.h``): the flat
L-BFGS of :mod:`science.probes.lbfgs` around this evaluation, with the solver's stopping rule —
the same iterates bit for bit (every vector operation the same ATen op, every scalar the same
double operation; ``tests/test_probe_lbfgs_compiled.py``), without Python between evaluations.
"""

from __future__ import annotations

import torch
from torch import Tensor

from science.probes import onepass
from science.probes.design import Design
from science.probes.lbfgs import RESTARTS, TOLERANCE_CHANGE


class KernelObjective:
    """``F ×`` the standardised objective and its gradient in ``θ``, with ``max |∇|`` of the
    standardised gradient (the convergence test's quantity), for a fit the kernel takes
    (:func:`science.probes.onepass.applies`).

    Args:
        d: the design (rows in memory, ``Xt [D, N]`` float32 on the CPU).
        y: ``[N]`` labels in ``0..K-1``.
        K: classes present (2–8).
        M: ``[D, D]`` float64 preconditioner (``W = W_z M``).
        lam: the L2 strength λ.
        scale: ``F``, the factor the loss and gradient are handed to L-BFGS with.

    Raises:
        RuntimeError: the kernel is unavailable (:func:`science.probes.onepass.bound_sums`).
    """

    def __init__(self, d: Design, y: Tensor, K: int, M: Tensor, lam: float, scale: float) -> None:
        D = int(d.Xt.shape[0])
        self.K, self.D, self.n, self.lam, self.scale = K, D, d.n, lam, scale
        self.inv_std = 1.0 / d.std  # [D]; 0 where a feature is at the noise floor (inf std)
        self.maps = torch.cat([M, M * self.inv_std], dim=1)  # [D, 2D]: W_z → [W | W diag(1/std)]
        self.P = d.P  # [D, D] or None; applied an evaluation: cheaper than multiplying it into maps a round
        self.grad_map = None if d.P is None else d.P * self.inv_std  # [D, D]: P diag(1/std)
        self.MT = M.T.contiguous()
        self.Xt, self.y = onepass.kernel_rows(d.Xt, y)
        self.sums = onepass.bound_sums(self.Xt, self.y, d.n)
        self.picked = torch.zeros((), dtype=torch.float64)
        self.G = torch.zeros(K, D, dtype=torch.float64)
        self.gb = torch.zeros(K, dtype=torch.float64)

    def __call__(self, th: Tensor) -> tuple[float, Tensor, float]:
        """``(F · loss, F · ∇θ [K·D + K], max |∇| standardised)`` at ``th`` ``[K·D + K]`` float64."""
        K, D = self.K, self.D
        WV = th[: K * D].view(K, D) @ self.maps  # [K, 2D]
        W = WV[:, :D]  # [K, D] standardised weights
        self.picked.zero_()
        self.G.zero_()
        self.gb.zero_()
        V = WV[:, D:] if self.P is None else WV[:, D:] @ self.P  # [K, D] raw weights
        self.sums(V.to(torch.float32), th[K * D :], self.picked, self.G, self.gb)
        if self.grad_map is None:
            g = self.G.mul_(self.inv_std).add_(W, alpha=self.lam)  # [K, D]
        else:
            g = torch.addmm(W, self.G, self.grad_map, beta=self.lam)  # [K, D]
        grad = torch.empty(K * D + K, dtype=torch.float64)
        torch.mm(g, self.MT, out=grad[: K * D].view(K, D))
        grad[K * D :] = self.gb
        grad.mul_(self.scale)
        loss = -float(self.picked) / self.n + 0.5 * self.lam * float(W.pow(2).sum())
        gmax = max(float(g.abs().max()), float(self.gb.abs().max()))
        return loss * self.scale, grad, gmax

    def minimise(
        self, theta: Tensor, *, tol: float, max_iter: int, history_size: int
    ) -> tuple[Tensor, int, int, bool, float]:
        """A whole L-BFGS fit from ``theta`` ``[K·D + K]`` in one C++ call: the iterates of
        :func:`science.probes.lbfgs.lbfgs` over :meth:`__call__`, stopped at the first point
        evaluated whose standardised gradient has ``max |∇| ≤ tol`` (as
        :func:`science.probes.solver.minimise`'s closure stops it).

        Returns:
            ``(θ [K·D + K], iterations, evaluations, stopped at tol, max |∇| at the last point
            evaluated)``.

        Raises:
            RuntimeError: the kernel is unavailable, or an argument the op does not take.
        """
        fit = onepass.lbfgs_fit_op()
        th, n_iter, n_evals, stopped, gmax = fit(
            self.Xt,
            self.y,
            float(self.n),
            self.n,
            self.maps,
            None if self.P is None else self.P.contiguous(),
            None if self.grad_map is None else self.grad_map.contiguous(),
            self.inv_std.contiguous(),
            self.MT,
            self.lam,
            self.scale,
            theta.contiguous(),
            tol,
            max_iter,
            history_size,
            TOLERANCE_CHANGE,
            RESTARTS,
        )
        return th, int(n_iter), int(n_evals), bool(stopped), float(gmax)
