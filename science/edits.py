"""A fitted edit of one layer's states and the pieces the methods build theirs from
(docs/SCIENCE.md#interventions).

Every edit is an affine map fitted on training states ``X [N, D]``:

    h' = h − ((h − c) Rᵀ) Lᵀ          (``center`` c [D], ``left`` L [D, r], ``right`` R [r, D])

except a constant edit (``mean``), which returns ``c`` everywhere. ``Edit.apply`` takes
``h [..., D]`` with any leading dims and returns the same shape, device and dtype.
:func:`projection_edit`, :func:`probe_span` and :func:`rank_of` are shared by the methods
(``science.edit_methods``) and the random control (``science.interventions.random_removal``).

``rank_removed`` is the rank of ``I − A`` where ``A`` is the linear part of the edit
(numerical rank, relative tolerance :data:`RANK_RTOL`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from science.probes import LinearProbe

__all__ = ["RANK_RTOL", "Edit", "probe_span", "projection_edit", "rank_of", "span_of_directions"]

RANK_RTOL = 1e-6


@dataclass
class Edit:
    """A fitted edit. ``apply(h [..., D]) -> [..., D]``; see the module docstring.

    Attributes:
        method: the registered method's name (``layerscope_core.registry.method_names()``, or
            ``random`` for the rank-matched random control).
        rank_removed: dimensions removed (0..D).
        center: ``[D]`` c (the fitted mean, or LEACE's bias).
        left, right: ``[D, r]`` and ``[r, D]``; None (both) for a constant edit such as
            ``mean``, which returns ``center`` everywhere.
        k: the number of directions the method was asked to remove, for a method that takes
            one (``pca_top_k``), else None.
        info: method details (INLP rounds and accuracies, probe convergence, ...).
    """

    method: str
    rank_removed: int
    center: Tensor
    left: Tensor | None = None
    right: Tensor | None = None
    k: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def d_model(self) -> int:
        return int(self.center.shape[-1])

    def apply(self, h: Tensor) -> Tensor:
        """Edit ``h [..., D]`` → ``[..., D]`` on h's device, in h's dtype."""
        if h.shape[-1] != self.d_model:
            raise ValueError(f"edit fitted for D={self.d_model}, got states with D={h.shape[-1]}")
        work = h.dtype if h.dtype in (torch.float32, torch.float64) else torch.float32
        c = self.center.to(h.device, work)
        if self.left is None or self.right is None:  # a constant edit (mean ablation): both None
            return c.expand(h.shape).to(h.dtype).clone()
        x = h.to(work)
        L = self.left.to(h.device, work)
        R = self.right.to(h.device, work)
        return (x - ((x - c) @ R.T) @ L.T).to(h.dtype)

    __call__ = apply

    def matrix(self) -> Tensor:
        """The linear part ``A [D, D]`` (``h' = A h + const``, acting on column vectors)."""
        D = self.d_model
        eye = torch.eye(D, dtype=torch.float64, device=self.center.device)
        if self.left is None or self.right is None:  # a constant edit: both None
            return torch.zeros_like(eye)
        return eye - self.left.double() @ self.right.double()

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "rank_removed": self.rank_removed, "k": self.k, **self.info}


def span_of_directions(dirs: Tensor, exclude: Tensor | None = None, rtol: float = RANK_RTOL) -> Tensor:
    """Orthonormal basis ``[D, r]`` of the span of the rows of ``dirs [m, D]``.

    Components inside ``exclude [D, q]`` (orthonormal columns) are removed first, so the result
    is orthogonal to it. Singular values below ``rtol · s_max`` count as zero.
    """
    A = dirs.double()
    if exclude is not None and exclude.numel():
        E = exclude.double()
        A = A - (A @ E) @ E.T
    if A.numel() == 0:
        return torch.zeros(dirs.shape[-1], 0, dtype=torch.float64, device=dirs.device)
    _, s, Vh = torch.linalg.svd(A, full_matrices=False)
    ref = float(dirs.double().norm(dim=-1).max()) if dirs.numel() else 0.0
    keep = s > rtol * max(ref, 1e-300)
    return Vh[keep].T.contiguous()


def probe_span(probe: LinearProbe, exclude: Tensor | None = None) -> Tensor:
    """Orthonormal basis ``[D, r]`` (float64) of the span of ``probe``'s centred class directions
    (the classes present; r ≤ C−1), orthogonal to ``exclude [D, q]`` (see :func:`span_of_directions`)."""
    dirs = probe.class_directions().double()[probe.classes_present.to(probe.W.device)]
    dirs = dirs - dirs.mean(0, keepdim=True)  # softmax shift invariance: rank ≤ C−1
    return span_of_directions(dirs, exclude)


def projection_edit(method: str, mu: Tensor, Q: Tensor, **kw: Any) -> Edit:
    """The edit removing the span of ``Q [D, r]`` (orthonormal columns) around ``mu [D]``:
    ``h' = h − (h − μ) Q Qᵀ``; ``kw`` are further :class:`Edit` fields (``k``, ``info``)."""
    return Edit(method=method, rank_removed=int(Q.shape[1]), center=mu, left=Q, right=Q.T.contiguous(), **kw)


def rank_of(M: Tensor) -> int:
    """Numerical rank of ``M`` (singular values above ``RANK_RTOL`` · the largest)."""
    if M.numel() == 0:
        return 0
    s = torch.linalg.svdvals(M.double())
    return int((s > RANK_RTOL * max(float(s.max()), 1e-300)).sum()) if s.numel() else 0
