"""The task contract: token-tagging data sets with one label per position.

A :class:`Task` turns ``(length, n, seed, split)`` into a :class:`TaskData` — the same
arguments always give identical tensors (a local ``numpy.random.Generator`` is seeded from
the arguments; global RNG state is never read or changed). ``corruption_pairs`` builds the
clean/corrupted inputs for activation patching (docs/SCIENCE.md#corruption: one early token
changed so the final label differs); each task documents its rule.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class TaskData:
    """Token ids and per-position labels.

    Attributes:
        tokens: LongTensor [n, L] of token ids in ``0..vocab_size-1``.
        labels: LongTensor [n, L]; ``labels[i, t]`` is the label after token ``t``.

    Raises:
        ValueError: if the two are not 2-D int64 tensors of the same shape.
    """

    tokens: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        for field in ("tokens", "labels"):
            value = getattr(self, field)
            if not isinstance(value, torch.Tensor) or value.dtype != torch.long or value.dim() != 2:
                raise ValueError(f"TaskData.{field} must be a 2-D LongTensor [n, L]")
        if self.tokens.shape != self.labels.shape:
            raise ValueError(
                f"TaskData: tokens {tuple(self.tokens.shape)} and labels {tuple(self.labels.shape)} differ in shape"
            )

    @property
    def n(self) -> int:
        """Number of sequences."""
        return int(self.tokens.shape[0])

    @property
    def length(self) -> int:
        """Sequence length L."""
        return int(self.tokens.shape[1])

    @classmethod
    def from_numpy(cls, tokens: np.ndarray, labels: np.ndarray) -> TaskData:
        """Build from two integer arrays [n, L] (copied to int64 tensors)."""
        return cls(
            torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)),
            torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)),
        )


def early_positions(length: int) -> int:
    """Number of leading positions a corruption may change: ``min(L, max(2, L // 4))``.

    The first quarter of the sequence, widened to two positions for short sequences (L < 8)
    so that every task admits a change; position 0 is always allowed.
    """
    return min(length, max(2, length // 4))


class Task(abc.ABC):
    """A token-tagging task.

    Attributes:
        name: registry name (``"parity"``, ``"s3"``, ``"dyck"``, ``"code_depth"``).
        vocab_size: token ids are in ``0..vocab_size-1``.
        n_classes: labels are in ``0..n_classes-1``.
        class_names: ``n_classes`` display names.
        params: the JSON-able parameters (defaults filled in) used for config hashes.
    """

    name: str
    vocab_size: int
    n_classes: int
    class_names: tuple[str, ...]
    params: dict[str, Any]

    @abc.abstractmethod
    def labels_for(self, tokens: np.ndarray) -> np.ndarray:
        """Labels int64 [n, L] of token ids [n, L] (array or CPU tensor) under this task's rule.

        Raises:
            ValueError: if the tokens are not a valid input of the task (Dyck).
        """

    @abc.abstractmethod
    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` sequences of ``length`` tokens with labels, TaskData [n, L].

        Pure and seeded: the same arguments give identical tensors. ``split`` selects the
        train/test files for ``code_depth``; formal tasks validate and ignore it.

        Raises:
            ValueError: on a bad argument.
        """

    @abc.abstractmethod
    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """Clean and corrupted inputs for activation patching.

        Returns:
            ``(clean, corrupted, pos)``: two TaskData [n, L] and a LongTensor [n] holding
            the index of the changed token; the final labels of clean and corrupted differ.

        Raises:
            ValueError: on a bad argument or when the task admits no such pair.
        """

    # Names of the token types whose identity carries the label (docs/SCIENCE.md#token-types);
    # empty: the task defines none (parity and S3, where the label is not a function of the token).
    token_type_names: tuple[str, ...] = ()

    def token_types(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """Token type ids ``[n, L]`` (indices into :attr:`token_type_names`) of token ids
        ``[n, L]``, or None where the task defines no token types."""
        return None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
