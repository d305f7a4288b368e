"""A task added the way docs/DESIGN.md's recipe says (tests/test_new_task.py registers and removes
it): majority of bits. Its ``MAJORITY`` spec names the class as ``"module:attr"``, as the built-ins' do."""

from __future__ import annotations

import numpy as np
import torch

from layerscope_core.registry import TaskSpec
from science.tasks import Task, TaskData, early_positions
from science.tasks.validation import check_generate_args, merge_params

NAME = "majority"
_CORRUPTION_STREAM = 0x3A  # mixed into corruption_pairs' seed: a stream of its own


class MajorityTask(Task):
    """Bits from a fair coin; the label after token ``t`` is 1 when ``x_1..x_t`` hold more ones
    than zeros (a tie is 0). Tokens ``0``, ``1`` (vocab 2); 2 classes. No parameters."""

    name = NAME
    class_names = ("not more ones", "more ones")
    vocab_size = 2
    n_classes = 2

    def __init__(self, **params) -> None:
        self.params = merge_params(self.name, params, {})

    def labels_for(self, tokens: np.ndarray) -> np.ndarray:
        """Labels int64 [n, L] of bits [n, L]: the sign of the running lead of ones over zeros."""
        lead = np.cumsum(2 * np.asarray(tokens, dtype=np.int64) - 1, axis=1)
        return (lead > 0).astype(np.int64)

    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` fair-coin bit sequences [n, L] and their labels (``numpy.random.default_rng(seed)``)."""
        check_generate_args(self.name, length, n, seed, split)
        tokens = np.random.default_rng(seed).integers(0, 2, size=(n, length), dtype=np.int64)
        return TaskData.from_numpy(tokens, self.labels_for(tokens))

    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """One early bit flipped so the final label differs: flipping moves the final lead by 2, so
        a 0 becomes 1 where the lead is -1 or 0 and a 1 becomes 0 where it is 1 or 2 (the first such
        bit among the ``early_positions(L)``); other sequences are drawn again.

        Raises:
            ValueError: on a bad argument.
        """
        check_generate_args(self.name, length, n, seed, split)
        rng = np.random.default_rng([seed, _CORRUPTION_STREAM])
        kept: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        while sum(map(len, positions)) < n:
            tokens = rng.integers(0, 2, size=(4 * n, length), dtype=np.int64)
            lead = (2 * tokens - 1).sum(axis=1)
            flip = np.select([np.isin(lead, (-1, 0)), np.isin(lead, (1, 2))], [0, 1], default=-1)
            hits = tokens[:, : early_positions(length)] == flip[:, None]
            rows = np.flatnonzero(hits.any(axis=1))
            kept.append(tokens[rows])
            positions.append(hits[rows].argmax(axis=1))
        clean, pos = np.concatenate(kept)[:n], np.concatenate(positions)[:n]
        corrupted = clean.copy()
        corrupted[np.arange(n), pos] ^= 1
        return (
            TaskData.from_numpy(clean, self.labels_for(clean)),
            TaskData.from_numpy(corrupted, self.labels_for(corrupted)),
            torch.from_numpy(pos.astype(np.int64)),
        )


MAJORITY = TaskSpec(NAME, "Majority", "tests.toy_task:MajorityTask")
