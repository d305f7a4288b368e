"""The probe's solver: full-batch L-BFGS on the standardised objective of
:mod:`science.probes.linear`, in whitened coordinates (docs/SCIENCE.md#probes).

Solver: ``torch.optim.LBFGS``'s iteration with a strong-Wolfe line search (Nocedal & Wright 2006,
*Numerical Optimization*, Alg. 7.4–7.5 and 3.5–3.6), run on the flat parameter vector by
:func:`science.probes.lbfgs.lbfgs` (the same iterates bit for bit, without torch's per-parameter
bookkeeping; ``minimise(reference=True)`` runs ``torch.optim.LBFGS`` itself), in **whitened coordinates**: a change of variables
``W = W_z · L⁻¹`` with ``L Lᵀ = Σ̃ + λ_e I`` the Cholesky factor of the covariance ``Σ̃`` of the
standardised features, shifted by ``λ_e = max(λ, 1e-10·max diag Σ̃)`` (the shift at the penalty
strength keeps the map invertible; :func:`whitening`). This is
preconditioning only: the objective, its unique minimiser and the convergence test are those
of the standardised problem. Correlated residual-stream features make the standardised
problem ill-conditioned (sklearn's lbfgs hits ``max_iter`` on such states); in whitened
coordinates the curvature is within a small factor of the identity and L-BFGS needs tens of
iterations. The large matrix products run in the features' dtype (float32 by default); the
loss, the softmax and the optimiser's state are float64.

Fused evaluation (measurement version 2): the objective reads the rows centred once and stored
transposed (:class:`science.probes.design.Design`); standardisation and INLP's projection act
on the ``[K, D]`` weights, so one evaluation is two products on contiguous rows — logits
``V·Xᵀ`` and gradient ``R·X`` — and no standardised copy of the states is made.

One-pass evaluation (measurement version 3): on the CPU, float32 rows with 2–8 classes are read by
the compiled kernel of :mod:`science.probes.onepass` instead (the same sums, made per block of rows
while it is in cache), one call an evaluation, with the algebra around it folded into a few small
products (:class:`science.probes.kernel_objective.KernelObjective`); such a fit runs its whole
L-BFGS loop in C++ too (:meth:`~science.probes.kernel_objective.KernelObjective.minimise`: the
same iterates bit for bit, without Python between evaluations).

Convergence: ``converged`` is ``max |∇| ≤ tol`` over all parameters (W and b) of the
standardised objective, the same criterion as sklearn's lbfgs ``gtol`` (default ``tol=1e-4``),
checked on a final evaluation at the returned parameters. A probe that stops at ``max_iter``
reports ``converged=False`` with its ``n_iter`` and ``grad_max``; nothing is silent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from science.probes import onepass
from science.probes.design import Design
from science.probes.kernel_objective import KernelObjective
from science.probes.lbfgs import Stop, lbfgs

DEFAULT_TOL = 1e-4
HISTORY_SIZE = 10

# (loss, gradient in W [K, D], gradient in b [K], W [K, D]) of the standardised objective at θ
Objective = Callable[[Tensor], tuple[Tensor, Tensor, Tensor, Tensor]]


@dataclass
class SolverResult:
    """The minimiser over the K classes present: ``W [K, D]`` and ``b [K]`` (float64, standardised
    coordinates), whether ``max|∇| ≤ tol`` was reached, the L-BFGS iterations and function
    evaluations used, and the final ``max|∇|``. The defaults describe a problem with nothing to
    optimise (one class)."""

    W: Tensor
    b: Tensor
    converged: bool = True
    n_iter: int = 0
    n_evals: int = 0
    grad_max: float = 0.0


def whitening(cov: Tensor, std: Tensor, lam: float) -> Tensor:
    """The preconditioner ``M = L⁻¹`` ``[D, D]`` (float64, lower triangular; ``W = W_z @ M``) with
    ``L Lᵀ = Σ̃ + λ_e I`` the Cholesky factor of the standardised covariance ``Σ̃`` (from the raw
    covariance ``cov [D, D]`` and the standardisation ``std [D]``, inf: a feature at the noise
    floor) shifted by ``λ_e = max(lam, 1e-10 × its largest diagonal entry)``. A Cholesky
    factorisation costs a third of an eigendecomposition's ``D³`` and INLP needs one a round.
    Where the shifted matrix is not positive definite (float32 rounding of nearly collinear
    features), ``M = Λ^{-1/2} Uᵀ`` from the eigendecomposition with eigenvalues clamped at ``λ_e``."""
    corr = torch.nan_to_num(cov / torch.outer(std, std), nan=0.0)
    D = corr.shape[0]
    floor = max(lam, 1e-10 * float(corr.diagonal().max().clamp_min(1e-30)))
    eye = torch.eye(D, dtype=corr.dtype, device=corr.device)
    chol, info = torch.linalg.cholesky_ex(corr + floor * eye)
    if int(info) == 0:
        return torch.linalg.solve_triangular(chol, eye, upper=False)  # [D, D]: W = W_z @ M
    # Not positive definite: nearly collinear features (saturated units of a trained RNN) whose
    # covariance, a float32 product, has eigenvalues rounded below −floor. Any SPD M is a valid
    # preconditioner (the optimum does not depend on it), so clamp the spectrum instead.
    evals, evecs = torch.linalg.eigh(corr)
    return (evecs * evals.clamp_min(floor).rsqrt()).T  # [D, D]: W = W_z @ M


# Rows above this size (bytes) are read a cache-sized block of columns at a time on the CPU
# (:func:`_blocked_objective`); below it they stay in the last-level cache between the two products.
BLOCK_ABOVE_BYTES = 64 * 2**20
BLOCK_BYTES = 2**21  # one block of rows, [D, B] float32: still in cache when its second product reads it


def _objective(d: Design, Y: Tensor, M: Tensor, lam: float) -> Objective:
    """The standardised objective and its gradient at ``θ = [vec(W_z), b]`` (module docstring),
    fused: the features are ``d.Xt`` (``[D, N]``, centred, transposed) read twice per evaluation,
    once for the logits ``V·Xᵀ`` and once for the gradient ``R·X``, each a product on contiguous
    rows; standardisation (and INLP's projection) act on the ``[K, D]`` weights only
    (:meth:`Design.raw_weights`). ``Y [N, K]``: one-hot targets (float64). Rows over
    :data:`BLOCK_ABOVE_BYTES` on the CPU are read by :func:`_blocked_objective` instead
    (:func:`_in_blocks`)."""
    Xt = d.Xt
    D, N = Xt.shape
    K = Y.shape[1]
    dt = Xt.dtype
    Yt = Y.T.contiguous()  # [K, N]
    inv_std = 1.0 / d.std  # 0 where a feature is at the noise floor

    def evaluate(th: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        Wz = th[: K * D].view(K, D)
        b = th[K * D :]
        W = Wz @ M  # [K, D] float64, standardised coordinates
        # [K, N] float64: the float32 product widened as the intercepts are added (one pass)
        logits = torch.add(d.raw_weights(W).to(dt) @ Xt, b.unsqueeze(1))
        logp = torch.log_softmax(logits, 0)  # one pass over the classes of each row
        loss = -(logp * Yt).sum() / N + 0.5 * lam * (W * W).sum()
        R = logp.exp_().sub_(Yt).div_(N)  # residuals P − Y, scaled: [K, N]
        G = (R.to(dt) @ Xt.T).double()  # [K, D]: ∂/∂V on the centred rows
        if d.P is not None:
            G = G @ d.P
        g_std = G.mul_(inv_std).add_(W, alpha=lam)  # [K, D]: ∂/∂W
        g_b = R.sum(1)
        return loss, g_std, g_b, W

    return evaluate


class _Sums:
    """An evaluation's sums over rows, added a block at a time: the picked log-probabilities,
    ``G = R·X`` ``[K, D]`` and ``Σ R`` ``[K]`` (float64)."""

    def __init__(self, K: int, D: int) -> None:
        self.picked = torch.zeros((), dtype=torch.float64)
        self.G = torch.zeros(K, D, dtype=torch.float64)
        self.g_b = torch.zeros(K, dtype=torch.float64)

    def add(self, V: Tensor, b: Tensor, xt: Tensor, y: Tensor, N: int, kernel: bool) -> None:
        """One block: ``xt [D, m]`` centred rows (any strides; unit stride along a row for the
        kernel), ``y [m]`` its labels (int64), ``V [K, D]`` raw weights in the rows' dtype, ``b [K]``;
        its logits, loss, residuals and gradient product made while the block is in cache.
        ``kernel``: the compiled one-pass kernel (measurement version 3) adds them, as
        :func:`science.probes.onepass.applies` decided once for the fit (asking it per block read
        the environment on every chunk)."""
        if kernel:
            onepass.add_sums(xt, V, b, y, N, self.picked, self.G, self.g_b)
            return
        yc = y.unsqueeze(0)  # [1, m]
        logp = torch.log_softmax(torch.add(V @ xt, b.unsqueeze(1)), 0)  # [K, m] float64
        self.picked += logp.gather(0, yc).sum()
        R = logp.exp_()
        minus = torch.tensor(-1.0, dtype=R.dtype, device=R.device).expand(yc.shape)  # [1, m] of −1, no copy
        R.scatter_add_(0, yc, minus).div_(N)  # (P − Y) / N
        self.G += (R.to(xt.dtype) @ xt.T).double()
        self.g_b += R.sum(1)

    def result(self, d: Design, W: Tensor, lam: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(loss, ∂/∂W [K, D], ∂/∂b [K], W)`` from the sums (as :func:`_objective` returns them)."""
        loss = -self.picked / d.n + 0.5 * lam * (W * W).sum()
        G = self.G if d.P is None else self.G @ d.P
        return loss, G.mul_(1.0 / d.std).add_(W, alpha=lam), self.g_b, W


def _in_blocks(d: Design) -> bool:
    """Whether ``d``'s rows (in memory) are read a block at a time: over :data:`BLOCK_ABOVE_BYTES`,
    on the CPU (a GPU reads its memory at the rate the blocks would save)."""
    return d.rows is None and d.Xt.device.type == "cpu" and d.Xt.numel() * d.Xt.element_size() > BLOCK_ABOVE_BYTES


def _blocked_objective(d: Design, y: Tensor, K: int, M: Tensor, lam: float) -> Objective:
    """:func:`_objective` read a block of :data:`BLOCK_BYTES` of ``d.Xt``'s columns at a time: each
    block's logits, residuals and gradient product are made while it is in cache, so rows that do
    not fit the last-level cache are read from memory once an evaluation, not twice (about 0.85 of
    the two-product evaluation's time, 0.55–1.06 over three runs, at 39,000–196,000 rows × 160–768
    on one CPU core; ``benchmarks/bench_blocked_objective.py``, BENCHMARKS.md "Lab scale").
    The same objective; the sums over rows are grouped by block (float rounding only).
    ``y [N]``: labels in ``0..K-1``."""
    Xt = d.Xt
    D, N = int(Xt.shape[0]), int(Xt.shape[1])
    B = max(256, BLOCK_BYTES // (D * Xt.element_size()))
    blocks = [(Xt[:, i : i + B], y[i : i + B]) for i in range(0, N, B)]  # made once
    kernel = onepass.applies(Xt, K)

    def evaluate(th: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        W = th[: K * D].view(K, D) @ M
        V, b = d.raw_weights(W).to(Xt.dtype), th[K * D :]
        sums = _Sums(K, D)
        for xt, yb in blocks:
            sums.add(V, b, xt, yb, N, kernel)
        return sums.result(d, W, lam)

    return evaluate


def _chunked_objective(d: Design, y: Tensor, K: int, M: Tensor, lam: float) -> Objective:
    """:func:`_objective` on a design whose rows are on disk (``d.rows``,
    :func:`science.probes.design.standardise_rows`): one pass over the chunks an evaluation, each
    chunk centred, its logits, loss, residuals and gradient products made before the next is read.
    The same objective; the sums over rows are grouped by chunk (float rounding only).
    ``y [N]``: labels in ``0..K-1``."""
    rows = d.rows
    assert rows is not None
    D, N, dt = int(d.Xt.shape[0]), d.n, d.Xt.dtype
    centre = d.centre.to(dt)
    # the kernel reads [D, m] rows: gathered, centred and transposed in one compiled pass (the same
    # bits as index_select, sub_ and torch's transposed copy, which took ~55 % of an evaluation)
    kernel = onepass.applies(d.Xt, K)

    def evaluate(th: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        W = th[: K * D].view(K, D) @ M
        V, b = d.raw_weights(W).to(dt), th[K * D :]
        sums = _Sums(K, D)
        start = 0
        for X, index in rows.indexed_chunks():  # [n, D] raw rows, the positions of those to read
            if kernel:
                xt = onepass.centred_transpose(X, centre, index)
            else:
                xt = (X if index is None else X.index_select(0, index)).sub_(centre).T
            sums.add(V, b, xt, y[start : start + xt.shape[1]], N, kernel)
            start += int(xt.shape[1])
        return sums.result(d, W, lam)

    return evaluate


def _run_torch_lbfgs(
    theta: Tensor, scaled: Callable[[Tensor], tuple[float, Tensor]], max_iter: int, history_size: int
) -> tuple[bool, int, Tensor]:
    """The reference run: ``torch.optim.LBFGS`` on ``theta`` (strong-Wolfe line search), stepped
    until ``scaled`` raises :class:`Stop` (→ True), the iteration budget is spent, or torch's
    stall test (``tolerance_change``) has ended a step early twice (→ False); also returns the
    iterations made and where the run ended. :func:`science.probes.lbfgs.lbfgs` makes the same
    iterates without torch's per-parameter bookkeeping (and without the evaluation that each
    ``step`` makes again at its start); ``minimise(reference=True)`` runs this instead.

    Stopping: torch's gradient test is off (tolerance_grad=0; it would test the whitened
    gradient, not the standardised one). The closure raises at the first evaluated point — an
    iterate or a line-search trial point, where LBFGS leaves the parameters when the closure
    raises — whose standardised gradient meets the criterion.
    """
    theta = theta.clone().requires_grad_(True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=max(max_iter, 1),
        history_size=history_size,
        tolerance_grad=0.0,
        tolerance_change=1e-14,
        line_search_fn="strong_wolfe",
    )

    def closure() -> float:
        with torch.no_grad():
            loss, theta.grad = scaled(theta.detach())
        return loss

    def iterations() -> int:
        return int(opt.state[theta].get("n_iter", 0)) if opt.state else 0

    early_stops = 0
    try:
        closure()
        while True:
            done = iterations()
            if done >= max_iter or early_stops >= 2:
                break
            group = opt.param_groups[0]
            group["max_iter"] = max_iter - done
            group["max_eval"] = int((max_iter - done) * 1.25) + 25
            opt.step(closure)
            ran = iterations() - done
            early_stops = early_stops + 1 if ran < max_iter - done else early_stops
    except Stop:
        return True, iterations(), theta.detach()
    return False, iterations(), theta.detach()


def _scaled_objective(
    d: Design, y: Tensor, K: int, M: Tensor, lam: float, F: float
) -> Callable[[Tensor], tuple[float, Tensor, float]]:
    """``θ → (F · loss, F · ∇θ [K·D + K], max |∇| of the standardised gradient)``: the kernel's
    folded evaluation (:class:`science.probes.kernel_objective.KernelObjective`) where it applies,
    else the torch objectives (in memory, in blocks, or on disk)."""
    if d.rows is None and onepass.applies(d.Xt, K):
        return KernelObjective(d, y, K, M, lam, F)
    if d.rows is not None:  # rows on disk: one pass over their chunks an evaluation
        evaluate = _chunked_objective(d, y, K, M, lam)
    elif _in_blocks(d):  # one read of the rows an evaluation
        evaluate = _blocked_objective(d, y, K, M, lam)
    else:
        N, dev = d.n, d.Xt.device
        Y = torch.zeros(N, K, dtype=torch.float64, device=dev)
        Y[torch.arange(N, device=dev), y] = 1.0  # one-hot targets [N, K]
        evaluate = _objective(d, Y, M, lam)
    MT = M.T.contiguous()

    def scaled(th: Tensor) -> tuple[float, Tensor, float]:
        loss, g_std, g_b, _ = evaluate(th)
        grad = torch.cat([(g_std @ MT).reshape(-1), g_b]) * F
        gmax = float(torch.maximum(g_std.abs().max(), g_b.abs().max()))  # one read-back
        return float(loss * F), grad, gmax

    return scaled


def minimise(
    d: Design,
    y: Tensor,
    counts: Tensor,
    lam: float,
    M: Tensor,
    *,
    tol: float,
    max_iter: int,
    history_size: int,
    init: tuple[Tensor, Tensor] | None = None,
    reference: bool = False,
    python_loop: bool = False,
) -> SolverResult:
    """Minimise the standardised objective over K ≥ 2 classes.

    Args:
        d: the :class:`Design` (``N`` rows, ``D`` features).
        y: ``[N]`` labels in ``0..K-1``; ``counts``: ``[K]`` how often each occurs (the intercepts
            start at the centred log prior).
        lam: the L2 strength λ.
        M: ``[D, D]`` float64 preconditioner (:func:`whitening`, or the identity).
        tol, max_iter, history_size: as :func:`science.probes.fit_probe`.
        init: a warm start ``(W [K, D], b [K])`` in standardised coordinates (float64), instead
            of ``W = 0`` and the log prior.
        reference: run ``torch.optim.LBFGS`` itself (:func:`_run_torch_lbfgs`) instead of the flat
            :func:`science.probes.lbfgs.lbfgs`: the same iterates, slower.
        python_loop: where the compiled kernel evaluates the fit, run the flat L-BFGS in Python
            around it instead of the whole fit in C++
            (:meth:`science.probes.kernel_objective.KernelObjective.minimise`): the same iterates
            bit for bit, slower (the reference the compiled loop is tested against).
    """
    dev = d.Xt.device
    D, N = int(d.Xt.shape[0]), d.n
    K = int(counts.numel())
    MT = M.T.contiguous()
    prior = counts.double() / N
    theta = torch.zeros(K * D + K, dtype=torch.float64, device=dev)
    if init is None:
        theta[K * D :] = prior.log() - prior.log().mean()
    else:
        W0, b0 = init
        if bool(W0.any()):  # W = W_z M, so W_z = W M⁻¹
            theta[: K * D] = torch.linalg.solve(MT, W0.T).T.reshape(-1)
        theta[K * D :] = b0
    # The objective is handed to L-BFGS multiplied by F = 1/tol: torch's LBFGS drops curvature
    # pairs with yᵀs ≤ 1e-10, which an unscaled objective reaches near a tight optimum.
    F = 1.0 / tol if tol > 0 else 1e8
    evaluate = _scaled_objective(d, y, K, M, lam, F)
    last: dict[str, float] = {"evals": 0}

    def scaled(th: Tensor) -> tuple[float, Tensor]:
        """``(F · loss, F · ∇ in θ)`` at ``th``; raises :class:`Stop` where ``max|∇| ≤ tol``."""
        loss, grad, last["gmax"] = evaluate(th)
        last["evals"] += 1
        if last["gmax"] <= tol:
            raise Stop
        return loss, grad

    with torch.no_grad():
        if reference:  # torch.optim.LBFGS itself (tests hold the flat run equal to it)
            converged, n_iter, th = _run_torch_lbfgs(theta, scaled, max_iter, history_size)
        elif isinstance(evaluate, KernelObjective) and not python_loop:  # the whole fit in C++
            th, n_iter, last["evals"], converged, last["gmax"] = evaluate.minimise(
                theta, tol=tol, max_iter=max_iter, history_size=history_size
            )
        else:
            run = lbfgs(scaled, theta, max_iter=max_iter, history_size=history_size)
            converged, n_iter, th = run.stopped, run.n_iter, run.x
        W = th[: K * D].view(K, D) @ M
        b = th[K * D :]
    return SolverResult(W, b, converged, n_iter, int(last["evals"]), last["gmax"])
