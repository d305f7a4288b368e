"""S3: running composition of permutations of {0, 1, 2} (6 classes, non-commutative).

Token and class order: the 6 permutations in lexicographic order of their one-line
notation, as :func:`itertools.permutations` yields them::

    0: (0,1,2) identity   1: (0,2,1)   2: (1,0,2)   3: (1,2,0)   4: (2,0,1)   5: (2,1,0)

A tuple ``p`` maps ``i -> p[i]``. Composition ``(a ∘ b)(i) = a(b(i))`` and the label is the
index of ``s_t = x_t ∘ s_{t-1}``, ``s_0`` = identity (docs/SCIENCE.md#tasks).
"""

from __future__ import annotations

import itertools

import numpy as np

from .group import GroupPrefixTask

PERMUTATIONS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(3)))


def _compose_table() -> np.ndarray:
    """int64 [6, 6]: ``table[a, b]`` = index of ``PERMUTATIONS[a] ∘ PERMUTATIONS[b]``."""
    index = {p: i for i, p in enumerate(PERMUTATIONS)}
    table = np.empty((6, 6), dtype=np.int64)
    for ia, a in enumerate(PERMUTATIONS):
        for ib, b in enumerate(PERMUTATIONS):
            table[ia, ib] = index[tuple(a[b[i]] for i in range(3))]
    return table


class S3Task(GroupPrefixTask):
    """Running product in S3; tokens and classes are the permutations above.

    Class names are the one-line notations, e.g. ``"012"`` (identity), ``"120"``.
    No parameters.
    """

    name = "s3"
    class_names = tuple("".join(map(str, p)) for p in PERMUTATIONS)
    table = _compose_table()
    identity = 0
