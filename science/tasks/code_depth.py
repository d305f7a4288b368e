"""Code-Depth: nesting depth in real Python source (docs/SCIENCE.md#tasks).

Tokens come from :mod:`science.tasks.code_lexer` (stdlib ``tokenize``; exact strings for
operators, keywords and identifiers, ``<num>``/``<str>`` for literals, f-strings as one
``<str>``, ``<newline>``/``<indent>``/``<dedent>`` markers, comments dropped) over a corpus
from :mod:`science.tasks.code_corpus` (default: the running Python's stdlib, split 80/20 by
a stable hash of the file path).

Vocabulary (``vocab_size`` ids, default 256), built from the TRAINING documents only: ids
0..11 are fixed — ``<unk> <newline> <indent> <dedent> <num> <str> ( [ { ) ] }`` — then the
most frequent other token strings of the training split (ties by string order). Anything
else maps to ``<unk>`` (id 0). If the corpus has fewer distinct tokens, the top ids are
simply unused, so ``vocab_size`` always equals the parameter.

Labels (``m + 1`` classes, names ``"0"..str(m)``), computed from the token ids of a window:
variant ``"bracket"`` (default) — the number of open ``( [ {`` minus closed ``) ] }`` after
the token; variant ``"indent"`` — ``<indent>`` minus ``<dedent>`` (block depth). An
unmatched close leaves the depth at 0; the label is ``min(depth, m)``.

Windows: each document's token stream is cut into non-overlapping windows of ``L`` tokens
that START at the first token of a logical line with depth 0 before it (for ``indent``,
block depth 0, i.e. a top-level statement), scanning greedily from the document's start
(each window begins at the first such start at or after the previous window's end; a tail
shorter than ``L`` is dropped). Depth is therefore 0 at every window start and the labels
are exactly the document-level depths — they are fully determined by the window's tokens.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

import numpy as np
import torch

from .base import Task, TaskData, early_positions
from .code_corpus import STDLIB, Corpus, check_corpus_spec, load_corpus
from .code_lexer import CLOSE_BRACKETS, DEDENT, INDENT, NEWLINE, OPEN_BRACKETS, SPECIAL_KEYS, UNK
from .validation import (
    MAX_CLASSES,
    MAX_FILES,
    MAX_VOCAB,
    check_choice,
    check_fraction,
    check_generate_args,
    check_int,
    merge_params,
)

VARIANTS = ("bracket", "indent")
_CORRUPTION_STREAM = 0xC0DE

_ID = {key: i for i, key in enumerate(SPECIAL_KEYS)}
_OPEN_IDS = {"bracket": [_ID[k] for k in OPEN_BRACKETS], "indent": [_ID[INDENT]]}
_CLOSE_IDS = {"bracket": [_ID[k] for k in CLOSE_BRACKETS], "indent": [_ID[DEDENT]]}
_LINE_BREAK_IDS = [_ID[NEWLINE], _ID[INDENT], _ID[DEDENT]]
# Tokens a corruption may overwrite: anything but the structural markers and brackets.
_STRUCTURAL_IDS = [_ID[k] for k in (NEWLINE, INDENT, DEDENT) + OPEN_BRACKETS + CLOSE_BRACKETS]


def depth_walk(ids: np.ndarray, variant: str) -> np.ndarray:
    """Uncapped depth after each token, int64 [n, L], for token ids [n, L], starting at 0.

    ``max(0, d + step)`` per token; computed in closed form as the walk reflected at 0,
    ``S_t - min(0, min_{s<=t} S_s)`` with ``S`` the cumulative steps.
    """
    ids = np.asarray(ids, dtype=np.int64)
    steps = np.isin(ids, _OPEN_IDS[variant]).astype(np.int64) - np.isin(ids, _CLOSE_IDS[variant])
    total = np.cumsum(steps, axis=-1)
    return total - np.minimum(0, np.minimum.accumulate(total, axis=-1))


class CodeDepthTask(Task):
    """Nesting depth of Python tokens (see the module docstring for every rule).

    Parameters (defaults): ``m`` (10, >= 1), ``variant`` (``"bracket"`` | ``"indent"``),
    ``vocab_size`` (256, >= 12), ``corpus`` (``"stdlib"`` or a path, see ``code_corpus``),
    ``max_files`` (400 documents read, None = all; the stdlib's 400 take a few seconds),
    ``test_fraction`` (0.2), ``skip_tests`` (True: leave out test folders).

    The corpus is read lazily on first use and cached per process; ``skipped_files`` counts
    the documents that could not be read or tokenised.
    """

    name = "code_depth"

    def __init__(self, **params) -> None:
        p = merge_params(
            self.name,
            params,
            {
                "m": 10,
                "variant": "bracket",
                "vocab_size": 256,
                "corpus": STDLIB,
                "max_files": 400,
                "test_fraction": 0.2,
                "skip_tests": True,
            },
        )
        self.m = check_int(self.name, "m", p["m"], 1, MAX_CLASSES - 1)
        self.variant = check_choice(self.name, "variant", p["variant"], VARIANTS)
        self.vocab_size = check_int(self.name, "vocab_size", p["vocab_size"], len(SPECIAL_KEYS), MAX_VOCAB)
        if not isinstance(p["corpus"], (str, os.PathLike)):
            raise ValueError(f"code_depth: parameter 'corpus' must be 'stdlib' or a path, got {p['corpus']!r}")
        corpus = os.fspath(p["corpus"])
        check_corpus_spec(corpus)
        max_files = None if p["max_files"] is None else check_int(self.name, "max_files", p["max_files"], 1, MAX_FILES)
        test_fraction = check_fraction(self.name, "test_fraction", p["test_fraction"])
        if not isinstance(p["skip_tests"], bool):
            raise ValueError(f"code_depth: parameter 'skip_tests' must be a bool, got {p['skip_tests']!r}")
        self.params = {
            "m": self.m,
            "variant": self.variant,
            "vocab_size": self.vocab_size,
            "corpus": corpus,
            "max_files": max_files,
            "test_fraction": test_fraction,
            "skip_tests": p["skip_tests"],
        }
        self.class_names = tuple(str(d) for d in range(self.m + 1))
        self.n_classes = self.m + 1
        self._vocab: tuple[str, ...] | None = None
        self._encoded: dict[str, list[np.ndarray]] = {}
        self._windows: dict[tuple[str, int], np.ndarray] = {}

    token_type_names = ("bracket", "other")

    def token_types(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[n, L]``: 0 for a token that opens or closes a level of this variant (brackets, or
        INDENT/DEDENT), 1 for every other token (their depth must be carried)."""
        moving = torch.tensor(_OPEN_IDS[self.variant] + _CLOSE_IDS[self.variant], dtype=tokens.dtype)
        return (~torch.isin(tokens, moving.to(tokens.device))).long()

    # --- corpus and vocabulary -------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        """The tokenised, split corpus (loaded on first access, cached per process)."""
        p = self.params
        return load_corpus(p["corpus"], p["max_files"], p["test_fraction"], p["skip_tests"])

    @property
    def skipped_files(self) -> int:
        """Number of documents skipped because they could not be read or tokenised."""
        return len(self.corpus.skipped)

    @property
    def corpus_info(self) -> dict[str, Any]:
        """Provenance: document counts per split, skipped count, Python version for stdlib."""
        c = self.corpus
        info: dict[str, Any] = {
            "train_documents": len(c.train),
            "test_documents": len(c.test),
            "skipped_files": len(c.skipped),
            "vocab_used": len(self.vocab),
        }
        if self.params["corpus"] == STDLIB:
            info["python"] = sys.version.split()[0]
        return info

    @property
    def vocab(self) -> tuple[str, ...]:
        """Token strings by id (at most ``vocab_size``; the fixed 12 first)."""
        if self._vocab is None:
            counts = Counter(key for doc in self.corpus.train for key in doc)
            for key in SPECIAL_KEYS:
                counts.pop(key, None)
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            extra = [key for key, _ in ranked[: self.vocab_size - len(SPECIAL_KEYS)]]
            self._vocab = SPECIAL_KEYS + tuple(extra)
        return self._vocab

    def encode(self, keys: list[str] | tuple[str, ...]) -> np.ndarray:
        """Token strings → ids, int64 [len(keys)]; unknown strings → ``<unk>`` (0)."""
        index = {key: i for i, key in enumerate(self.vocab)}
        return np.fromiter((index.get(k, _ID[UNK]) for k in keys), dtype=np.int64, count=len(keys))

    def labels_for(self, ids: np.ndarray) -> np.ndarray:
        """Capped depth labels int64 [n, L] for token ids [n, L] (depth 0 before each row)."""
        return np.minimum(depth_walk(ids, self.variant), self.m)

    def _documents(self, split: str) -> list[np.ndarray]:
        if split not in self._encoded:
            docs = self.corpus.train if split == "train" else self.corpus.test
            self._encoded[split] = [self.encode(doc) for doc in docs]
        return self._encoded[split]

    def windows(self, split: str, length: int) -> np.ndarray:
        """All windows of a split, int64 [W, 2] rows ``(document index, start)`` (cached)."""
        key = (split, length)
        if key not in self._windows:
            rows: list[tuple[int, int]] = []
            for d, ids in enumerate(self._documents(split)):
                starts = self._window_starts(ids)
                pos = 0
                while True:
                    j = np.searchsorted(starts, pos)
                    if j == len(starts) or starts[j] + length > len(ids):
                        break
                    rows.append((d, int(starts[j])))
                    pos = int(starts[j]) + length
            self._windows[key] = np.array(rows, dtype=np.int64).reshape(-1, 2)
        return self._windows[key]

    def _window_starts(self, ids: np.ndarray) -> np.ndarray:
        """Indices of first tokens of logical lines with depth 0 before them, int64 [S]."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        before = np.concatenate([[0], depth_walk(ids[None, :], self.variant)[0, :-1]])
        prev_break = np.concatenate([[True], np.isin(ids[:-1], _LINE_BREAK_IDS)])
        ok = prev_break & ~np.isin(ids, _LINE_BREAK_IDS) & (before == 0)
        return np.flatnonzero(ok)

    def _window_tokens(self, split: str, length: int, rows: np.ndarray) -> np.ndarray:
        docs = self._documents(split)
        wins = self.windows(split, length)[rows]
        if len(wins) == 0:
            return np.zeros((0, length), dtype=np.int64)
        return np.stack([docs[d][s : s + length] for d, s in wins])

    def _check_windows(self, split: str, length: int) -> int:
        count = len(self.windows(split, length))
        if count == 0:
            raise ValueError(f"code_depth: the {split!r} split has no window of length {length}")
        return count

    # --- the Task contract -----------------------------------------------------------
    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` windows of the split with depth labels, TaskData [n, L].

        Windows are drawn with ``default_rng(seed)``: without replacement when the split has
        at least ``n`` windows, with replacement otherwise.

        Raises:
            ValueError: on a bad argument, or when the split has no window of this length.
        """
        check_generate_args(self.name, length, n, seed, split)
        count = self._check_windows(split, length)
        rng = np.random.default_rng(seed)
        rows = rng.choice(count, size=n, replace=n > count)
        tokens = self._window_tokens(split, length, rows)
        return TaskData.from_numpy(tokens, self.labels_for(tokens))

    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """Clean windows and a one-token corruption that adds one level of nesting.

        Rule: windows are taken in the order of ``default_rng([seed, stream]).permutation``;
        in each, ``p`` is uniform among the first ``early_positions(L)`` positions (first
        quarter, at least 2) whose token is not ``<newline>``/``<indent>``/``<dedent>`` or a
        bracket, and that token becomes ``(`` (variant bracket) or ``<indent>`` (variant
        indent). Depth rises by one from ``p`` on; a window is kept only if its final label
        then differs (final depth < m, no clamped close absorbing the change). Exactly one
        token differs. The corrupted window is no longer valid Python — it is a valid task
        input, labelled by the same counting rule. With fewer admissible windows than ``n``
        they repeat (each with a fresh ``p``). ``split`` defaults to the held-out files.

        Returns:
            ``(clean, corrupted, pos)``: TaskData [n, L] twice and LongTensor [n].

        Raises:
            ValueError: on a bad argument, or when no window of the split is admissible.
        """
        check_generate_args(self.name, length, n, seed, split)
        count = self._check_windows(split, length)
        rng = np.random.default_rng([seed, _CORRUPTION_STREAM])
        rows = rng.permutation(count)
        tokens = self._window_tokens(split, length, rows)
        q = early_positions(length)
        can_change = ~np.isin(tokens[:, :q], _STRUCTURAL_IDS)
        candidates = np.flatnonzero(can_change.any(axis=1))
        candidates = candidates[self.labels_for(tokens[candidates])[:, -1] < self.m]
        if len(candidates) == 0:
            raise ValueError(f"code_depth: no window of length {length} in split {split!r} admits a corruption")
        pick = candidates[np.arange(n) % len(candidates)] if n > len(candidates) else candidates
        clean = tokens[pick]
        score = np.where(can_change[pick], rng.random((len(pick), q)), -1.0)
        pos = score.argmax(axis=1)
        corrupt = clean.copy()
        corrupt[np.arange(len(pick)), pos] = _OPEN_IDS[self.variant][0]
        clean_labels, corrupt_labels = self.labels_for(clean), self.labels_for(corrupt)
        keep = np.flatnonzero(clean_labels[:, -1] != corrupt_labels[:, -1])
        if len(keep) < n:  # clamped closes can absorb the change: refill from the kept pairs
            if len(keep) == 0:
                raise ValueError(f"code_depth: no window of length {length} in split {split!r} admits a corruption")
            keep = keep[np.arange(n) % len(keep)]
        keep = keep[:n]
        return (
            TaskData.from_numpy(clean[keep], clean_labels[keep]),
            TaskData.from_numpy(corrupt[keep], corrupt_labels[keep]),
            torch.from_numpy(pos[keep].astype(np.int64)),
        )
