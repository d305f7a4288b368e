"""Bounded-depth Dyck-k: a stack-tracking task (docs/SCIENCE.md#tasks).

Tokens: ``open_i = i`` and ``close_i = k + i`` for bracket types ``i = 0..k-1`` (vocab 2k).
Sequences are exact-length prefixes of a bounded random walk: at depth 0 open, at depth m
close, otherwise open with probability 1/2 (type uniform) or close the top bracket.
Labels after token t: target ``"top"`` — the type of the bracket on top of the stack, or
``empty`` (class ``k``); target ``"depth"`` — the stack depth ``0..m``.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import Task, TaskData, early_positions
from .validation import MAX_CLASSES, MAX_VOCAB, check_choice, check_generate_args, check_int, merge_params

TARGETS = ("top", "depth")
_CORRUPTION_STREAM = 0xD1_C4
_MAX_DRAW_ROUNDS = 1000
_MAX_BATCH = 100_000


def walk(rng: np.random.Generator, n: int, length: int, k: int, m: int) -> np.ndarray:
    """Sample ``n`` walks of ``length`` tokens, int64 [n, L] (loops over positions only).

    Draws ``rng.random((n, L))`` (open/close coins) then ``rng.integers(0, k, (n, L))``
    (types of opening brackets), so the result depends on ``rng``'s state alone.
    """
    coins, types = _draw(rng, n, length, k)
    return assign_types(open_pattern(coins, m), types, k)


def _draw(rng: np.random.Generator, n: int, length: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.random((n, length)), rng.integers(0, k, size=(n, length), dtype=np.int64)


def open_pattern(coins: np.ndarray, m: int) -> np.ndarray:
    """bool [n, L]: which steps open, for coins [n, L] uniform in [0, 1).

    At depth 0 open, at depth ``m`` close, otherwise open iff the coin is < 1/2.
    """
    n, length = coins.shape
    is_open = np.empty((n, length), dtype=bool)
    depth = np.zeros(n, dtype=np.int64)
    for t in range(length):
        step = (depth == 0) | ((depth < m) & (coins[:, t] < 0.5))
        is_open[:, t] = step
        depth += np.where(step, 1, -1)
    return is_open


def assign_types(is_open: np.ndarray, types: np.ndarray, k: int) -> np.ndarray:
    """Token ids int64 [n, L]: opening steps take ``types`` [n, L]; closes match the top."""
    n, length = is_open.shape
    tokens = np.empty((n, length), dtype=np.int64)
    stack = np.zeros((n, length + 1), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for t in range(length):
        step = is_open[:, t]
        top = stack[rows, np.maximum(depth - 1, 0)]
        tokens[:, t] = np.where(step, types[:, t], k + top)
        opened = rows[step]
        stack[opened, depth[opened]] = types[opened, t]
        depth += np.where(step, 1, -1)
    return tokens


def simulate(tokens: np.ndarray, k: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the stack over Dyck tokens [n, L].

    Returns:
        ``(depth, top, top_pos)``, int64 [n, L] each: the depth after token t, the type of
        the top bracket after token t (``k`` when empty), and the position of that
        bracket's opening token (``-1`` when empty).

    Raises:
        ValueError: if a sequence is not a valid input — a close on an empty stack, a
            close whose type does not match the top, depth above ``m``, or a token outside
            ``0..2k-1``.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    n, length = tokens.shape
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 2 * k):
        raise ValueError(f"dyck: token ids must be in 0..{2 * k - 1}")
    stack = np.zeros((n, m + 1), dtype=np.int64)
    stack_pos = np.zeros((n, m + 1), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    out_depth = np.empty((n, length), dtype=np.int64)
    out_top = np.empty((n, length), dtype=np.int64)
    out_pos = np.empty((n, length), dtype=np.int64)
    for t in range(length):
        tok = tokens[:, t]
        is_open = tok < k
        closing = rows[~is_open]
        bad = depth[closing] == 0
        bad |= stack[closing, np.maximum(depth[closing] - 1, 0)] != tok[closing] - k
        if bad.any():
            raise ValueError(f"dyck: sequence {int(closing[bad][0])} has an unmatched close at position {t}")
        opened = rows[is_open]
        if (depth[opened] >= m).any():
            raise ValueError(f"dyck: sequence {int(opened[depth[opened] >= m][0])} exceeds depth m={m} at position {t}")
        stack[opened, depth[opened]] = tok[opened]
        stack_pos[opened, depth[opened]] = t
        depth += np.where(is_open, 1, -1)
        idx = np.maximum(depth - 1, 0)
        out_depth[:, t] = depth
        out_top[:, t] = np.where(depth > 0, stack[rows, idx], k)
        out_pos[:, t] = np.where(depth > 0, stack_pos[rows, idx], -1)
    return out_depth, out_top, out_pos


class DyckTask(Task):
    """Dyck-k with depth bound m.

    Parameters: ``k`` (types, default 2, 1..1023), ``m`` (depth bound, default 10, 1..1023),
    ``target`` (``"top"`` default, or ``"depth"``).
    Classes: target top → ``("type0", ..., "type{k-1}", "empty")``; depth → ``("0", ..., "m")``.
    """

    name = "dyck"

    def __init__(self, **params) -> None:
        p = merge_params(self.name, params, {"k": 2, "m": 10, "target": "top"})
        self.k = check_int(self.name, "k", p["k"], 1, min(MAX_VOCAB // 2, MAX_CLASSES - 1))
        self.m = check_int(self.name, "m", p["m"], 1, MAX_CLASSES - 1)
        self.target = check_choice(self.name, "target", p["target"], TARGETS)
        self.params = {"k": self.k, "m": self.m, "target": self.target}
        self.vocab_size = 2 * self.k
        if self.target == "top":
            self.class_names = tuple(f"type{i}" for i in range(self.k)) + ("empty",)
        else:
            self.class_names = tuple(str(d) for d in range(self.m + 1))
        self.n_classes = len(self.class_names)

    token_type_names = ("open", "close")

    def token_types(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[n, L]``: 0 for an opening bracket (ids < k), 1 for a closing one. On a close the
        top of the stack is one step back in the input, so token identity carries much of the
        label; on an open the type is the token itself."""
        return (tokens >= self.k).long()

    def labels_for(self, tokens: np.ndarray) -> np.ndarray:
        """Labels int64 [n, L] for Dyck tokens [n, L] under this task's target.

        Raises:
            ValueError: if a sequence is not a valid input (see :func:`simulate`).
        """
        depth, top, _ = simulate(tokens, self.k, self.m)
        return top if self.target == "top" else depth

    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` random-walk prefixes with labels, TaskData [n, L].

        Seeded with ``numpy.random.default_rng(seed)``; ``split`` is validated and ignored.

        Raises:
            ValueError: on a bad argument.
        """
        check_generate_args(self.name, length, n, seed, split)
        tokens = walk(np.random.default_rng(seed), n, length, self.k, self.m)
        return TaskData.from_numpy(tokens, self.labels_for(tokens))

    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """Clean walks and a one-token corruption that keeps a valid input and flips the final label.

        Let ``Q = early_positions(L)`` (first quarter, at least 2). Walks are drawn in
        batches from ``default_rng([seed, stream])``; a walk that admits no change under the
        rule is discarded and the next one is used (deterministic in ``seed``), so clean
        sequences are walks *conditioned* on admitting the change.

        - target ``top``: the final top-of-stack bracket must have been opened at
          ``p < Q``; its type is changed to a uniformly chosen other type. It is never
          closed, so the corrupted sequence stays valid, and the final label (its type)
          changes. Exactly one token differs. Needs ``k >= 2``.
        - target ``depth``: ``p < Q`` is a closing bracket that empties the stack, and the
          depth after ``p`` never exceeds ``m - 2``; it is replaced by an opening bracket of
          uniform type. The two brackets left at the bottom are never popped (the rest of
          the walk never goes below depth 0 relative to them), so the corrupted sequence
          is valid with depth +2 at every position from ``p`` on. Exactly one token
          differs. Among admissible ``p`` one is chosen uniformly. Needs ``m >= 2``, ``L >= 2``.

        Returns:
            ``(clean, corrupted, pos)``: TaskData [n, L] twice and LongTensor [n].

        Raises:
            ValueError: on a bad argument, or ``k < 2`` (top) / ``m < 2`` or ``L < 2`` (depth).
            RuntimeError: if no admissible walk turns up in 1000 batches (should not happen
                for valid settings).
        """
        check_generate_args(self.name, length, n, seed, split)
        if self.target == "top" and self.k < 2:
            raise ValueError("dyck: corruption_pairs with target='top' needs parameter 'k' >= 2")
        if self.target == "depth" and (self.m < 2 or length < 2):
            raise ValueError("dyck: corruption_pairs with target='depth' needs parameter 'm' >= 2 and length >= 2")
        rng = np.random.default_rng([seed, _CORRUPTION_STREAM])
        q = early_positions(length)
        batch, drawn = max(1024, 4 * n), 0
        clean_parts, corrupt_parts, pos_parts, have = [], [], [], 0
        for _ in range(_MAX_DRAW_ROUNDS):
            coins, types = _draw(rng, batch, length, self.k)
            clean, corrupt, pos = self._corrupt(rng, open_pattern(coins, self.m), types, q)
            clean_parts.append(clean)
            corrupt_parts.append(corrupt)
            pos_parts.append(pos)
            have, drawn = have + len(pos), drawn + batch
            if have >= n:
                break
            # Next batch sized from the acceptance rate so far (deterministic in seed).
            rate = max(have / drawn, 1e-3)
            batch = int(min(_MAX_BATCH, max(1024, 1.2 * (n - have) / rate)))
        else:
            raise RuntimeError(f"dyck: found only {have} of {n} corruption pairs at length {length}")
        clean = np.concatenate(clean_parts)[:n]
        corrupt = np.concatenate(corrupt_parts)[:n]
        pos = np.concatenate(pos_parts)[:n]
        return (
            TaskData.from_numpy(clean, self.labels_for(clean)),
            TaskData.from_numpy(corrupt, self.labels_for(corrupt)),
            torch.from_numpy(pos),
        )

    def _corrupt(self, rng: np.random.Generator, is_open: np.ndarray, types: np.ndarray, q: int):
        """Admissible walks among open patterns [B, L] and their corruptions.

        Admissibility depends on the open/close pattern only, so bracket types are assigned
        to the admissible rows alone. Returns (clean, corrupted, pos): [b, L], [b, L], [b].
        """
        b, length = is_open.shape
        depth = np.cumsum(np.where(is_open, 1, -1), axis=1)
        if self.target == "top":
            # The final top was opened at the last step that started at depth D_final - 1.
            before = np.concatenate([np.zeros((b, 1), dtype=np.int64), depth[:, :-1]], axis=1)
            final = depth[:, -1:]
            hits = before == final - 1
            last = length - 1 - np.argmax(hits[:, ::-1], axis=1)
            pos = np.where((final[:, 0] > 0) & hits.any(axis=1), last, -1)
            keep = (pos >= 0) & (pos < q)
            shift = rng.integers(1, self.k, size=(b,), dtype=np.int64)
            rows = np.flatnonzero(keep)
            pos = pos[rows]
            clean = assign_types(is_open[rows], types[rows], self.k)
            new = (clean[np.arange(len(rows)), pos] + shift[rows]) % self.k
        else:
            suffix_max = np.maximum.accumulate(depth[:, ::-1], axis=1)[:, ::-1]
            ok = ~is_open[:, :q] & (depth[:, :q] == 0) & (suffix_max[:, :q] <= self.m - 2)
            score = np.where(ok, rng.random((b, q)), -1.0)
            new_types = rng.integers(0, self.k, size=(b,), dtype=np.int64)
            rows = np.flatnonzero(ok.any(axis=1))
            pos = score[rows].argmax(axis=1)
            clean = assign_types(is_open[rows], types[rows], self.k)
            new = new_types[rows]
        corrupt = clean.copy()
        corrupt[np.arange(len(rows)), pos] = new
        return clean, corrupt, pos.astype(np.int64)
