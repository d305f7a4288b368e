"""Prefix-product tasks over a finite group (Parity = Z2, S3 = permutations of {0,1,2}).

The label after token ``t`` is the running product ``s_t = x_t ∘ s_{t-1}`` with
``s_0 = identity`` (docs/SCIENCE.md#tasks); tokens are uniform group elements.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import Task, TaskData, early_positions
from .validation import check_generate_args, merge_params

# Mixed into the seed of corruption_pairs so its position/replacement draws are a stream
# of their own (the clean sequences are exactly ``generate(length, n, seed)``).
_CORRUPTION_STREAM = 0xC0_44


class GroupPrefixTask(Task):
    """Token tagging with the running group product (vocab = classes = group elements).

    Subclasses set ``name``, ``class_names`` and ``table`` (an int array [G, G] with
    ``table[a, b] = index of a ∘ b``) and ``identity``.
    """

    table: np.ndarray
    identity: int

    def __init__(self, **params) -> None:
        self.params = merge_params(self.name, params, {})
        self.vocab_size = self.n_classes = len(self.class_names)

    def labels_for(self, tokens: np.ndarray) -> np.ndarray:
        """Running products, int64 [n, L], for element tokens [n, L] (a loop over positions).

        Raises:
            ValueError: if ``tokens`` is not 2-D or holds an id outside the group.
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 2 or (tokens.size and (tokens.min() < 0 or tokens.max() >= len(self.table))):
            raise ValueError(f"{self.name}: tokens must be a 2-D array of ids in 0..{len(self.table) - 1}")
        labels = np.empty_like(tokens)
        state = np.full(tokens.shape[0], self.identity, dtype=np.int64)
        for t in range(tokens.shape[1]):
            state = self.table[tokens[:, t], state]
            labels[:, t] = state
        return labels

    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` uniform token sequences and their running products, TaskData [n, L].

        Seeded with ``numpy.random.default_rng(seed)``; ``split`` is validated and ignored.

        Raises:
            ValueError: on a bad argument.
        """
        check_generate_args(self.name, length, n, seed, split)
        rng = np.random.default_rng(seed)
        tokens = rng.integers(0, self.vocab_size, size=(n, length), dtype=np.int64)
        return TaskData.from_numpy(tokens, self.labels_for(tokens))

    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """Clean = ``generate(length, n, seed)``; corrupted changes one early token.

        Rule: position ``p`` uniform in ``0..early_positions(L)-1`` (the first quarter,
        at least two positions), the token there replaced by a uniformly chosen *different*
        element. In a group ``s_L = A ∘ x_p ∘ B`` is injective in ``x_p``, so the final label
        always differs. Exactly one token differs.

        Returns:
            ``(clean, corrupted, pos)``: TaskData [n, L] twice and LongTensor [n].

        Raises:
            ValueError: on a bad argument.
        """
        clean = self.generate(length, n, seed, split)
        rng = np.random.default_rng([seed, _CORRUPTION_STREAM])
        pos = rng.integers(0, early_positions(length), size=n, dtype=np.int64)
        shift = rng.integers(1, self.vocab_size, size=n, dtype=np.int64)
        tokens = clean.tokens.numpy().copy()
        rows = np.arange(n)
        tokens[rows, pos] = (tokens[rows, pos] + shift) % self.vocab_size
        corrupted = TaskData.from_numpy(tokens, self.labels_for(tokens))
        return clean, corrupted, torch.from_numpy(pos)
