"""INLP's rounds (Ravfogel et al. 2020, "Null It Out", ACL, §3 / Alg. 1), two ways
(docs/SCIENCE.md#inlp-incremental):

- :func:`inlp_directions`, incremental (what ``inlp`` runs): the training rows are centred and
  standardised once (:func:`science.probes.standardised`); a round changes only the projection
  ``P = I − QQᵀ`` the probe sees the rows through, and the mean and covariance of the edited rows,
  updated from the last round's with the new directions (``P C P``: ``O(D² r)`` a round) rather
  than recomputed from the rows; no row is re-projected, and each round's probe starts from the
  last round's solution. A round costs its probe's evaluations, two reads of the training rows
  each, and one read of the held-out rows.
- :func:`inlp_directions_reference`, from scratch (kept as the reference the incremental rounds
  are tested against, ``tests/test_inlp_incremental.py``): each round projects every row and
  fits a probe on the edited rows with :func:`science.probes.fit_probe`, as Alg. 1 is written.

Both take the same split and stopping rule and return the removed directions ``Q [D, r]``
(float64, orthonormal) and the per-round record; :class:`science.edit_methods.Inlp` turns them
into the edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from science.context import Context
from science.edits import probe_span
from science.probes import LinearProbe, fit_design, fit_probe, standardised
from science.probes.design import Design, projected


@dataclass
class InlpSetup:
    """What both versions share: the rows ``X [N, D]`` (None: the rows are on disk, read by
    :func:`inlp_rounds` through a design, :mod:`science.streamed_fit`), labels ``y [N]``, the
    fitted mean ``mu`` ``[D]`` (float64) the projection acts around, the 80/20 split by ``seed``
    (``tr_idx``, ``dev_idx``), the held-out share of the training majority (``maj_dev``, recorded),
    the chance ``line`` a round stops at (``science.edit_methods.inlp_chance_line``) and the
    stopping settings."""

    X: Tensor | None
    y: Tensor
    n_classes: int
    mu: Tensor
    tr_idx: Tensor
    dev_idx: Tensor
    maj_dev: float
    line: float
    max_rounds: int
    chance_tol: float
    probe: LinearProbe | None
    probe_kwargs: dict[str, Any]
    ctx: Context | None


@dataclass
class _Rounds:
    """The directions found and the per-round record (``info`` of the edit)."""

    Q: Tensor
    rounds: list[dict[str, Any]]
    reached: bool = False

    def record(self, p: LinearProbe, acc: float, s: InlpSetup) -> bool:
        """Log a round; True when INLP stops here at chance."""
        self.rounds.append({"rank": int(self.Q.shape[1]), "dev_accuracy": acc, "converged": p.converged})
        self.reached = acc <= s.line
        return self.reached


def _orthogonal_to(Q: Tensor, new: Tensor) -> Tensor:
    """``new [D, k]`` made orthogonal to ``Q [D, r]`` (Gram–Schmidt twice, "twice is enough") and
    orthonormal (QR): the columns appended to Q; rounding in ``Q`` stays ~1e-16 over hundreds of
    rounds without re-orthonormalising Q itself."""
    for _ in range(2):
        new = new - Q @ (Q.T @ new)
    return torch.linalg.qr(new).Q


def inlp_directions(s: InlpSetup) -> _Rounds:
    """The incremental rounds (module docstring) on the rows ``s.X``."""
    X = s.X
    if X is None:
        raise ValueError("inlp_directions needs the rows X; rows on disk go through inlp_rounds")
    ytr, ydev = s.y[s.tr_idx], s.y[s.dev_idx]
    base = standardised(X[s.tr_idx])
    dev = base.centred(X[s.dev_idx])  # [N_dev, D], centred at the training mean once

    def accuracy(d: Design, p: LinearProbe) -> float:  # held-out logits through the same projection
        logits = dev @ d.raw_weights(p.W.double()).to(dev.dtype).T + p.b.to(dev.dtype)
        return float((logits.argmax(-1) == ydev).double().mean())

    return inlp_rounds(s, base, ytr, accuracy, lambda p: p.accuracy(X[s.dev_idx], ydev))


def inlp_rounds(
    s: InlpSetup,
    base: Design,
    ytr: Tensor,
    accuracy: Callable[[Design, LinearProbe], float],
    first_accuracy: Callable[[LinearProbe], float],
) -> _Rounds:
    """The incremental rounds on the training design ``base`` (labels ``ytr``): ``accuracy(d, p)``
    is the held-out accuracy of a probe ``p`` fitted on design ``d`` (its rows seen through
    ``d.P``), ``first_accuracy(p)`` that of ``s.probe`` on the raw held-out rows. In memory
    (:func:`inlp_directions`) or with rows on disk (:mod:`science.streamed_fit`)."""
    D = int(base.Xt.shape[0])
    device = base.centre.device
    mu = s.mu.to(device)
    P = torch.eye(D, dtype=torch.float64, device=device)
    mean, cov = base.mean.clone(), base.cov.clone()
    out = _Rounds(Q=torch.zeros(D, 0, dtype=torch.float64, device=device), rounds=[])
    prev: LinearProbe | None = None
    for r in range(s.max_rounds + 1):
        if s.ctx is not None:  # a cancel lands between rounds, not after the whole fit
            s.ctx.check_cancelled()
        d = base if r == 0 else projected(base, P, mean, cov)
        if r == 0 and s.probe is not None:
            p = s.probe
            acc = first_accuracy(p)
        else:
            p = fit_design(d, ytr, s.n_classes, init=prev, **s.probe_kwargs)
            acc = accuracy(d, p)
        if out.record(p, acc, s) or r == s.max_rounds:
            break
        q = probe_span(p, exclude=out.Q)
        if q.shape[1] == 0:
            break
        q = _orthogonal_to(out.Q, q)
        out.Q = torch.cat([out.Q, q], dim=1)
        # P ← P − qqᵀ; C_e ← P C P from the last one: C_e − (C_e q) qᵀ − q (C_e q)ᵀ + q (qᵀ C_e q) qᵀ
        Cq = cov @ q
        cov = cov - Cq @ q.T - q @ Cq.T + q @ (q.T @ Cq) @ q.T
        cov = 0.5 * (cov + cov.T)
        P = P - q @ q.T
        mean = mean - ((mean - mu) @ q) @ q.T  # the edited rows' mean: m − (m − μ) q qᵀ
        prev = None if r == 0 and s.probe is not None else p
    return out


class _SplitRows:
    """The reference's training and held-out rows of ``X [N, D]``, split and centred once;
    ``edited(Q)`` removes the span of ``Q [D, r]`` around ``mu`` from both parts,
    ``X − ((X − μ) Q) Qᵀ`` in X's dtype."""

    def __init__(self, X: Tensor, mu: Tensor, tr_idx: Tensor, dev_idx: Tensor) -> None:
        centred = X - mu
        self.parts = [(X[idx], centred[idx]) for idx in (tr_idx, dev_idx)]

    def edited(self, Q: Tensor) -> list[Tensor]:
        """``[train rows, held-out rows]`` with span(Q) removed (the rows themselves when r = 0)."""
        if Q.shape[1] == 0:
            return [x for x, _ in self.parts]
        Qx, QTx = Q.to(self.parts[0][0].dtype), Q.T.to(self.parts[0][0].dtype)
        return [x - (xc @ Qx) @ QTx for x, xc in self.parts]


def inlp_directions_reference(s: InlpSetup) -> _Rounds:
    """The from-scratch rounds (module docstring): every row projected, a probe fitted cold on the
    edited rows, and Q re-orthonormalised, each round."""
    if s.X is None:
        raise ValueError("the reference INLP rounds need the rows X in memory")
    D = s.X.shape[1]
    ytr, ydev = s.y[s.tr_idx], s.y[s.dev_idx]
    parts = _SplitRows(s.X, s.mu.to(s.X.dtype), s.tr_idx, s.dev_idx)
    out = _Rounds(Q=torch.zeros(D, 0, dtype=torch.float64, device=s.X.device), rounds=[])
    for r in range(s.max_rounds + 1):
        if s.ctx is not None:
            s.ctx.check_cancelled()
        Xe_tr, Xe_dev = parts.edited(out.Q)
        p = s.probe if r == 0 and s.probe is not None else fit_probe(Xe_tr, ytr, s.n_classes, **s.probe_kwargs)
        if out.record(p, p.accuracy(Xe_dev, ydev), s) or r == s.max_rounds:
            break
        new = probe_span(p, exclude=out.Q)
        if new.shape[1] == 0:
            break
        out.Q = torch.linalg.qr(torch.cat([out.Q, new], dim=1)).Q  # re-orthonormalise (drift)
    return out
