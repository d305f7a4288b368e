"""L-BFGS on one flat float64 tensor: the iteration of ``torch.optim.LBFGS`` (two-loop recursion,
history ``m``, strong-Wolfe line search) without its per-parameter bookkeeping
(docs/SCIENCE.md#solver-tolerance).

``torch.optim.LBFGS`` handles any list of parameter tensors: every trial point of the line search
clones the parameters, adds the step to each, gathers their gradients into one new flat tensor and
copies the parameters back, and the optimiser keeps its state per parameter. For the probe, whose
parameters are one vector ``θ`` of ``K·D + K`` numbers, that bookkeeping cost ~0.5 ms an
iteration on this CPU (BENCHMARKS.md, "Lab scale"), as much as an evaluation on a small design.
:func:`lbfgs` runs the same arithmetic on the flat vector directly: the same directions, the same
line search (``torch.optim.lbfgs._strong_wolfe``, torch's own, called with a trial function that
evaluates ``θ + t·d`` without touching any parameter), the same stopping tests, and the restart
rule of the probe's solver — so its iterates equal ``torch.optim.LBFGS``'s bit for bit
(``tests/test_probe_lbfgs.py`` holds the two equal), with one evaluation fewer at the start of
each ``step`` (torch's ``step`` evaluates the point it starts from again). A fit the compiled
kernel evaluates runs this loop ported to C++ (``csrc/probe_lbfgs.h``,
:meth:`science.probes.kernel_objective.KernelObjective.minimise`); this one is its reference.

Sources: Nocedal & Wright 2006, *Numerical Optimization*, Alg. 7.4 (two-loop recursion) and
3.5–3.6 (strong-Wolfe line search); ``torch/optim/lbfgs.py`` (torch 2.13), whose ``step`` this
follows line by line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.optim.lbfgs import _strong_wolfe  # torch's line search (torch is pinned in pyproject)

# f(x) → (loss, gradient [n]); may raise Stop to end the run at x
Function = Callable[[Tensor], tuple[float, Tensor]]
TOLERANCE_CHANGE = 1e-14  # torch's stall tests (a step or a loss change below it end a segment)
RESTARTS = 1  # segments that may end early before the run ends


class Stop(Exception):
    """Raised by the function at a point that meets the caller's own criterion: the run ends there."""


@dataclass
class LbfgsRun:
    """Where a run ended: ``x`` ``[n]`` (the last point evaluated when ``stopped``, else the last
    iterate), the iterations made (``n_iter``, torch's ``state['n_iter']``), the evaluations,
    and whether the function raised :class:`Stop`."""

    x: Tensor
    n_iter: int
    n_evals: int
    stopped: bool


class _State:
    """torch's LBFGS state (``d``, ``t``, the history, ``H_diag``, the previous gradient and loss),
    carried from one segment to the next."""

    def __init__(self) -> None:
        self.n_iter = 0
        self.d: Tensor | None = None
        self.t: float | Tensor = 0.0
        self.old_dirs: list[Tensor] = []
        self.old_stps: list[Tensor] = []
        self.ro: list[Tensor] = []
        self.H_diag: float | Tensor = 1
        self.prev_flat_grad: Tensor | None = None
        self.prev_loss: float | None = None


def _direction(st: _State, flat_grad: Tensor, history_size: int) -> Tensor:
    """The L-BFGS direction at ``flat_grad`` (updates the history): torch's ``step``, first block."""
    if st.n_iter == 1:
        st.old_dirs, st.old_stps, st.ro, st.H_diag = [], [], [], 1
        return flat_grad.neg()
    assert st.d is not None and st.prev_flat_grad is not None
    y = flat_grad.sub(st.prev_flat_grad)
    s = st.d.mul(st.t)
    ys = y.dot(s)
    if ys > 1e-10:
        if len(st.old_dirs) == history_size:
            st.old_dirs.pop(0)
            st.old_stps.pop(0)
            st.ro.pop(0)
        st.old_dirs.append(y)
        st.old_stps.append(s)
        st.ro.append(1.0 / ys)
        st.H_diag = ys / y.dot(y)
    # the two-loop recursion; a tensor alpha is read as its float64 value, as torch reads it
    n = len(st.old_dirs)
    al = [flat_grad] * n  # placeholders: entry i is set by the first loop before the second reads it
    q = flat_grad.neg()
    for i in range(n - 1, -1, -1):
        al[i] = st.old_stps[i].dot(q) * st.ro[i]
        q.add_(st.old_dirs[i], alpha=float(-al[i]))
    d = r = torch.mul(q, st.H_diag)
    for i in range(n):
        be_i = st.old_dirs[i].dot(r) * st.ro[i]
        r.add_(st.old_stps[i], alpha=float(al[i] - be_i))
    return d


def _segment(
    f: Function,
    x: Tensor,
    loss: float,
    flat_grad: Tensor,
    st: _State,
    max_iter: int,
    max_eval: int,
    history_size: int,
    tolerance_change: float,
    count: list[int],
) -> tuple[Tensor, float, Tensor]:
    """One ``torch.optim.LBFGS.step`` from ``x`` (loss and gradient known there): at most
    ``max_iter`` iterations and ``max_eval`` evaluations (counting the start's); returns the
    new ``(x, loss, gradient)``. Gradient test off (torch's ``tolerance_grad = 0``)."""
    current_evals = 1
    if bool(flat_grad.abs().max() <= 0.0):
        return x, loss, flat_grad
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        st.n_iter += 1
        d = _direction(st, flat_grad, history_size)
        if st.prev_flat_grad is None:
            st.prev_flat_grad = flat_grad.clone(memory_format=torch.contiguous_format)
        else:
            st.prev_flat_grad.copy_(flat_grad)
        st.prev_loss = loss
        t: float | Tensor = min(1.0, float(1.0 / flat_grad.abs().sum())) if st.n_iter == 1 else 1.0
        gtd = flat_grad.dot(d)
        st.d, st.t = d, t
        if gtd > -tolerance_change:
            break

        def trial(x0: Tensor, step: float | Tensor, direction: Tensor) -> tuple[float, Tensor]:
            count[0] += 1
            return f(x0.add(direction, alpha=float(step)))

        loss, flat_grad, t, ls_evals = _strong_wolfe(
            trial, x, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
        )
        st.t = t
        x = x.add(d, alpha=float(t))
        current_evals += ls_evals
        if n_iter == max_iter or current_evals >= max_eval:
            break
        if bool(flat_grad.abs().max() <= 0.0):
            break
        if d.mul(t).abs().max() <= tolerance_change:
            break
        if abs(loss - st.prev_loss) < tolerance_change:
            break
    return x, loss, flat_grad


def lbfgs(
    f: Function,
    x0: Tensor,
    *,
    max_iter: int,
    history_size: int,
    tolerance_change: float = TOLERANCE_CHANGE,
    restarts: int = RESTARTS,
) -> LbfgsRun:
    """Minimise ``f`` from ``x0`` ``[n]`` (float64) by L-BFGS with a strong-Wolfe line search.

    Runs torch's ``step`` segments until ``max_iter`` iterations in all, or a segment ended early
    (its stall tests: a step or a loss change below ``tolerance_change``) ``restarts + 1`` times;
    each segment may use ``1.25 ×`` its iterations ``+ 25`` evaluations. The history carries over
    from one segment to the next, as it does in ``torch.optim.LBFGS``.

    Args:
        f: ``x [n] → (loss, gradient [n])``; raising :class:`Stop` ends the run at that point.
        x0: the start (not modified).
        max_iter: iteration budget (at least one evaluation is made).
        history_size: the number of curvature pairs kept (``m``).

    Returns:
        :class:`LbfgsRun`.
    """
    st = _State()
    count = [1]
    x = x0.detach().clone()
    last = [x]

    def evaluated(point: Tensor) -> tuple[float, Tensor]:
        last[0] = point
        return f(point)

    try:
        loss, flat_grad = evaluated(x)
        early_stops = 0
        while st.n_iter < max_iter and early_stops <= restarts:
            done = st.n_iter
            budget = max_iter - done
            x, loss, flat_grad = _segment(
                evaluated,
                x,
                loss,
                flat_grad,
                st,
                budget,
                int(budget * 1.25) + 25,
                history_size,
                tolerance_change,
                count,
            )
            if st.n_iter - done < budget:
                early_stops += 1
    except Stop:
        return LbfgsRun(x=last[0], n_iter=st.n_iter, n_evals=count[0], stopped=True)
    return LbfgsRun(x=x, n_iter=st.n_iter, n_evals=count[0], stopped=False)
