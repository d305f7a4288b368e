"""Parity: bits from a fair coin, label = XOR of x_1..x_t (2 classes)."""

from __future__ import annotations

import numpy as np

from .group import GroupPrefixTask


class ParityTask(GroupPrefixTask):
    """Parity as the prefix product over Z2.

    Tokens: ``0``, ``1`` (vocab 2). Labels: XOR of the prefix, classes ``("0", "1")``.
    No parameters.
    """

    name = "parity"
    class_names = ("0", "1")
    table = np.array([[0, 1], [1, 0]], dtype=np.int64)  # table[a, b] = a XOR b
    identity = 0
