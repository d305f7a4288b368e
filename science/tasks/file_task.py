"""A task defined by your own labelled file: JSONL or Parquet rows, one label per token.

Row formats (one per row, all rows alike):

- ``{"tokens": [3, 1, 4, ...], "labels": [0, 1, null, ...]}``: token ids (ints ≥ 0) or token
  strings, with one label per token; a label is an int ≥ 0 or a string, ``null`` = not probed
  (ignored by the loss, the probes and every accuracy).
- ``{"text": "...", "spans": [[start, end, label], ...]}``: character spans of the text,
  aligned to a tokenizer's tokens through its offsets (``tokenizer=`` of ``parse_task_file``):
  a token takes the label of the span its characters overlap, others are ``null``. Tokens become
  the tokenizer's token strings.

Validation collects one message per bad row (``TaskFileError``: "row 12: 5 tokens but 4
labels", ...); limits: ``MAX_FILE_BYTES``, ``MAX_ROWS``, ``MAX_LENGTH`` tokens a row, at least
``MIN_ROWS`` rows, at least two label values, token ids below ``MAX_VOCAB - 1`` (the next id is
the padding token). The file is UTF-8 (a byte-order mark is read past); other bytes are refused,
never replaced (two tokens would become one).

A file someone else made is bounded before it is materialised (``TaskFileLimit``, one line): a
Parquet file's row count, row groups' value counts and schema nesting are read from its
metadata before any row, then rows are decoded ``PARQUET_BATCH_ROWS`` at a time; a JSONL file is
streamed a line at a time, each line's size (``MAX_LINE_BYTES``) and nesting (``MAX_ROW_DEPTH``,
counted on its bytes: ``json`` would recurse) checked before it is parsed; and the rows held for
validation (about ``BYTES_PER_TOKEN`` bytes a token) are kept under ``max_memory_bytes``.

The parsed file has one canonical JSON form (``canonical_bytes``) and is named by its SHA-256
(``digest``), so a worker on another machine reads the same data from a shared store. Token
strings / string labels are numbered in sorted order; ``PAD`` (id ``vocab_size - 1``) fills
short rows.

``FileTask`` (a ``Task``): rows ``i % 5 == 4`` are the test split, the rest train.
``generate(length, n, seed, split)`` draws rows of the split (train: with replacement when the
split has fewer than n; test: without, so at most the split's size) and crops each to its
first ``length`` tokens or pads it with ``PAD`` and ``null`` labels (cropping keeps the labels
of a causal model's prefix). Eval lengths are the file's sequences: ``lengths`` lists the
distinct row lengths, ``max_length`` the longest. ``corruption_pairs`` pairs two rows of the
file that differ in one token and whose labels at the last position differ (the file carries no
corruption rule); a file without such pairs cannot be patched (``NoCorruptionPairs``: a suite
skips its patching and says so in the job log).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from layerscope_core.json_checks import depth_error

from .base import Task, TaskData
from .validation import MAX_VOCAB, check_generate_args

IGNORE = -100  # the label of a position that is not probed (torch's cross_entropy ignore_index)
MAX_FILE_BYTES = 64 * 2**20
MAX_ROWS = 200_000
MAX_LENGTH = 4096
MIN_ROWS = 10
MAX_ERRORS = 20
MAX_LINE_BYTES = 2**20  # a JSONL line: 256 bytes for each of MAX_LENGTH tokens and labels
MAX_ROW_DEPTH = 8  # a row nests 3 deep ({"spans": [[start, end, label]]}): a deeper one is refused unparsed
BYTES_PER_TOKEN = 64  # what validation holds per token (its label and canonical copies too); measured about 30
MAX_MEMORY_BYTES = 1024 * 2**20  # the default of LAYERSCOPE_TASK_FILE_MAX_MEMORY_MIB
PARQUET_BATCH_ROWS = 64
PARQUET_SUFFIXES = (".parquet", ".pq")
PAD = "<pad>"


class NoCorruptionPairs(ValueError):
    """A file task whose rows hold no corruption pair at the asked length (it cannot be patched)."""


class TaskFileError(ValueError):
    """A task file that cannot be used; ``errors`` holds one message per bad row (or the file's)."""

    def __init__(self, path: str, errors: list[str]) -> None:
        self.errors = errors
        shown = errors[:MAX_ERRORS]
        more = f"\n  … and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
        super().__init__(f"task file {path}: {len(errors)} problem(s)\n  " + "\n  ".join(shown) + more)


class TaskFileLimit(TaskFileError):
    """A task file over one of the limits (size, rows, a line's size or nesting, memory), refused
    before it is read in full: one line, ``errors`` holding the one reason."""

    def __init__(self, path: str, reason: str) -> None:
        self.errors = [reason]
        ValueError.__init__(self, f"task file {path}: {reason}")


@dataclass(frozen=True)
class TaskFile:
    """A validated task file in canonical form.

    Attributes:
        tokens: per row, token ids (``0..vocab_size-2``).
        labels: per row, label ids (``0..n_classes-1``) or ``IGNORE``.
        vocab: the token strings by id (None: the file gave ids; id i is the token ``str(i)``).
        class_names: the label values by id.
    """

    tokens: tuple[tuple[int, ...], ...]
    labels: tuple[tuple[int, ...], ...]
    vocab: tuple[str, ...] | None
    class_names: tuple[str, ...]

    @property
    def vocab_size(self) -> int:
        """Token ids the model sees, PAD (the last id) included."""
        n = len(self.vocab) if self.vocab is not None else 1 + max(max(r) for r in self.tokens)
        return n + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "vocab": None if self.vocab is None else list(self.vocab),
            "class_names": list(self.class_names),
            "rows": [{"tokens": list(t), "labels": list(lab)} for t, lab in zip(self.tokens, self.labels)],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskFile:
        rows = d["rows"]
        return cls(
            tuple(tuple(r["tokens"]) for r in rows),
            tuple(tuple(r["labels"]) for r in rows),
            None if d["vocab"] is None else tuple(d["vocab"]),
            tuple(d["class_names"]),
        )

    def canonical_bytes(self) -> bytes:
        """The canonical JSON (sorted keys, no spaces): what ``digest`` hashes and the store keeps."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        """SHA-256 of ``canonical_bytes`` (64 hex characters)."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()


class _NotJson(str):
    """A line that is not JSON (its message); streamed in the rows' place so lines keep their numbers."""


def _too_big(path: str, what: str, max_memory_bytes: int) -> TaskFileLimit:
    return TaskFileLimit(
        path,
        f"{what}: validating it would hold over {max_memory_bytes // 2**20} MiB "
        f"(LAYERSCOPE_TASK_FILE_MAX_MEMORY_MIB; about {BYTES_PER_TOKEN} bytes a token)",
    )


def _jsonl_rows(path: str, lines: Iterable[bytes]) -> Iterator[Any]:
    """The rows of JSONL ``lines`` one at a time (blank lines skipped, a line that is not JSON as
    ``_NotJson``): each line is checked for size and nesting on its bytes before it is parsed."""
    offset = 0  # of the line in the file, in bytes
    for i, line in enumerate(lines, start=1):
        skip = 3 if i == 1 and line.startswith(b"\xef\xbb\xbf") else 0  # a BOM (a common editor's save)
        try:
            # strict: a replaced byte would merge distinct tokens into one
            text = line[skip:].decode("utf-8")
        except UnicodeDecodeError as e:
            at = offset + skip + e.start
            raise TaskFileError(path, [f"line {i}: not valid UTF-8 (byte {at} counting from 0: {e.reason})"]) from None
        offset += len(line)
        line = line[skip:]
        if not line.strip():  # bytes: blank as backend.task_files counts lines
            continue
        if len(line) > MAX_LINE_BYTES:
            raise TaskFileLimit(path, f"line {i}: {len(line)} bytes; the limit is {MAX_LINE_BYTES} a line")
        if depth_error(line, MAX_ROW_DEPTH):  # before parsing: a deep line overflows json's recursion
            raise TaskFileLimit(path, f"line {i}: nested deeper than {MAX_ROW_DEPTH} arrays/objects")
        try:
            yield json.loads(text)
        except json.JSONDecodeError as e:
            yield _NotJson(f"line {i}: not JSON ({e.msg})")


def _type_depth(t: Any) -> int:
    """Nesting of an Arrow type (a row of a Parquet file is level 1, as a JSONL row's object is)."""
    import pyarrow as pa

    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return 1 + _type_depth(t.value_type)
    if pa.types.is_struct(t):
        return 1 + max((_type_depth(t.field(k).type) for k in range(t.num_fields)), default=0)
    if pa.types.is_map(t):
        return 1 + max(_type_depth(t.key_type), _type_depth(t.item_type))
    return 0


def _parquet_rows(path: str, data: bytes, max_memory_bytes: int) -> Iterator[Any]:
    """The rows of a Parquet file one batch at a time, after its metadata (row count, row groups'
    value counts, schema nesting) is checked against the limits: nothing is decoded first."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        meta = pf.metadata
        schema = pf.schema_arrow
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid / OSError on a broken file
        raise TaskFileError(path, [f"not a readable Parquet file ({type(e).__name__}: {e})"]) from None
    if meta.num_rows > MAX_ROWS:
        raise TaskFileLimit(path, f"{meta.num_rows} rows; the limit is {MAX_ROWS}")
    depth = 1 + max((_type_depth(f.type) for f in schema), default=0)
    if depth > MAX_ROW_DEPTH:
        raise TaskFileLimit(path, f"its columns nest {depth} deep; the limit is {MAX_ROW_DEPTH} arrays/objects")
    # the leaf values its column chunks declare (a token and its label are two): the encoded sizes
    # say nothing, a run-length encoded column of millions of zeros takes a few bytes
    values = sum(
        meta.row_group(g).column(c).num_values for g in range(meta.num_row_groups) for c in range(meta.num_columns)
    )
    if values * BYTES_PER_TOKEN // 2 > max_memory_bytes:
        raise _too_big(path, f"{values} values in {meta.num_row_groups} row group(s)", max_memory_bytes)
    try:
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            yield from batch.to_pylist()
    except TaskFileError:
        raise
    except Exception as e:  # noqa: BLE001 - a file whose data does not match its metadata
        raise TaskFileError(path, [f"not a readable Parquet file ({type(e).__name__}: {e})"]) from None


def _align_spans(row: dict, tokenizer: Any) -> tuple[list[str], list[Any]]:
    """Token strings and labels of a ``{"text", "spans"}`` row (spans → tokens by offsets)."""
    text, spans = row["text"], row["spans"]
    if not isinstance(text, str) or not isinstance(spans, list):
        raise ValueError("text must be a string and spans a list of [start, end, label]")
    for s in spans:
        if not (
            isinstance(s, list)
            and len(s) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in s[:2])
            and 0 <= s[0] < s[1] <= len(text)
        ):
            raise ValueError(f"span {s!r} is not [start, end, label] with 0 <= start < end <= {len(text)}")
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    strings = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    labels = []
    for a, b in enc["offset_mapping"]:
        hit = [s[2] for s in spans if a < s[1] and s[0] < b]  # the token's characters overlap the span
        if len({json.dumps(h) for h in hit}) > 1:
            raise ValueError(f"the token at characters {a}..{b} overlaps spans of different labels {hit}")
        labels.append(hit[0] if hit else None)
    return strings, labels


def parse_task_file(
    path: str | Path,
    tokenizer: Any = None,
    data: bytes | None = None,
    max_memory_bytes: int = MAX_MEMORY_BYTES,
) -> TaskFile:
    """Read and validate a task file (see the module docstring for the formats).

    Bounded before anything is materialised: the file's size first; a Parquet file's row count,
    row groups' value counts and schema nesting from its metadata, then its rows a batch at
    a time; a JSONL file a line at a time, each line's size and nesting checked on its bytes
    before it is parsed; and the rows held for validation (about ``BYTES_PER_TOKEN`` bytes a
    token) against ``max_memory_bytes``.

    Args:
        path: a ``.jsonl`` / ``.json`` (one JSON object a line) or ``.parquet`` file.
        tokenizer: a transformers tokenizer (fast: it must give offsets), needed by text rows.
        data: the file's bytes when they are already read (an upload); ``path`` then only names it.
        max_memory_bytes: the most bytes the validation may hold (the setting
            ``LAYERSCOPE_TASK_FILE_MAX_MEMORY_MIB``).

    Raises:
        TaskFileError (a ValueError): every problem found, one line per bad row; or the one limit
            the file passes (size, rows, a line's size or nesting, memory).
    """
    path = Path(path)
    name = str(path)
    if data is None:
        if not path.is_file():
            raise TaskFileError(name, ["a folder, not a file" if path.is_dir() else "no such file"])
        if path.stat().st_size > MAX_FILE_BYTES:
            raise TaskFileLimit(name, f"{path.stat().st_size} bytes; the limit is {MAX_FILE_BYTES}")
        if path.suffix.lower() not in PARQUET_SUFFIXES:
            with path.open("rb") as stream:  # streamed from disk, a line at a time
                return _validate(name, _jsonl_rows(name, stream), tokenizer, max_memory_bytes)
        data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise TaskFileLimit(name, f"{len(data)} bytes; the limit is {MAX_FILE_BYTES}")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        rows = _parquet_rows(name, data, max_memory_bytes)
    else:
        rows = _jsonl_rows(name, io.BytesIO(data))
    return _validate(name, rows, tokenizer, max_memory_bytes)


def _validate(path: str, rows: Iterable[Any], tokenizer: Any, max_memory_bytes: int) -> TaskFile:
    """Each row checked as it is read; a file with lines that are not JSON reports those only."""
    errors: list[str] = []
    not_json: list[str] = []
    seqs: list[tuple[list[Any], list[Any]]] = []
    n_rows = n_tokens = 0
    for row in rows:
        n_rows += 1
        if n_rows > MAX_ROWS:  # count the rest without parsing them, to say how many
            raise TaskFileLimit(path, f"{n_rows + sum(1 for _ in rows)} rows; the limit is {MAX_ROWS}")
        if isinstance(row, _NotJson):
            not_json.append(row)
            continue
        if not_json:  # the report is the lines that are not JSON (backend.task_files adds the rows)
            continue
        try:
            seq = _row(row, tokenizer)
        except ValueError as e:
            errors.append(f"row {n_rows}: {e}")
            continue
        n_tokens += len(seq[0])
        if n_tokens * BYTES_PER_TOKEN > max_memory_bytes:
            raise _too_big(path, f"{n_tokens} tokens in its first {n_rows} rows", max_memory_bytes)
        seqs.append(seq)
    if not_json or errors:
        raise TaskFileError(path, not_json or errors)
    return _canonical(path, seqs)


def _row(row: Any, tokenizer: Any) -> tuple[list[Any], list[Any]]:
    if not isinstance(row, dict):
        raise ValueError(f"expected an object with tokens and labels (or text and spans), got {type(row).__name__}")
    if "text" in row or "spans" in row:
        if tokenizer is None:
            raise ValueError("a text row needs a tokenizer (layerscope task add FILE --tokenizer NAME_OR_FOLDER)")
        if set(row) - {"text", "spans"}:
            raise ValueError(f"unknown fields {sorted(set(row) - {'text', 'spans'})}")
        tokens, labels = _align_spans(row, tokenizer)
    else:
        unknown = set(row) - {"tokens", "labels"}
        missing = [f for f in ("tokens", "labels") if f not in row]
        if unknown or missing:
            said = [f"unknown {sorted(unknown)}"] if unknown else []
            said += [f"missing {missing}"] if missing else []
            raise ValueError(f"expected exactly the fields tokens and labels ({'; '.join(said)})")
        tokens, labels = row["tokens"], row["labels"]
        if not isinstance(tokens, list) or not isinstance(labels, list):
            raise ValueError("tokens and labels must be lists")
    if not tokens:
        raise ValueError("no tokens")
    if len(tokens) != len(labels):
        raise ValueError(f"{len(tokens)} tokens but {len(labels)} labels")
    if len(tokens) > MAX_LENGTH:
        raise ValueError(f"{len(tokens)} tokens; the limit is {MAX_LENGTH}")
    kinds = {type(t) for t in tokens}
    if not (kinds <= {str} or kinds <= {int}) or any(
        isinstance(t, int) and (isinstance(t, bool) or t < 0) for t in tokens
    ):
        raise ValueError("tokens must all be non-negative integer ids or all strings")
    top = max(int(t) for t in tokens) if kinds <= {int} else None
    if top is not None and top >= MAX_VOCAB - 1:  # the id after the largest is the padding token
        raise ValueError(f"token id {top} is over the limit: ids run from 0 to {MAX_VOCAB - 2}")
    if any(t == PAD for t in tokens):
        raise ValueError(f"the token {PAD!r} is reserved for padding")
    for t, lab in enumerate(labels):
        if lab is not None and (
            isinstance(lab, bool) or not isinstance(lab, (int, str)) or (isinstance(lab, int) and lab < 0)
        ):
            # rows and lines count from 1 (as editors do), positions from 0 (as eval and patching positions do): say so
            raise ValueError(
                f"the label at position {t} (counting from 0) is {lab!r}; expected an integer >= 0, a string or null"
            )
    return tokens, labels


def _canonical(path: str, seqs: list[tuple[list[Any], list[Any]]]) -> TaskFile:
    errors = []
    if len(seqs) < MIN_ROWS:
        errors.append(f"{len(seqs)} rows; at least {MIN_ROWS} are needed (a fifth is held out)")
    token_kinds = {type(t) for toks, _ in seqs for t in toks}
    label_kinds = {type(lab) for _, labs in seqs for lab in labs if lab is not None}
    if len(token_kinds) > 1:
        errors.append("some rows give token ids and others token strings")
    if len(label_kinds) > 1:
        errors.append("some labels are integers and others strings")
    label_values = {lab for _, labs in seqs for lab in labs if lab is not None}
    if len(label_values) < 2:
        errors.append(f"the labels take {len(label_values)} value(s); a probe needs at least 2")
    if errors:
        raise TaskFileError(path, errors)
    if label_kinds == {int}:
        class_names = tuple(str(c) for c in range(max(label_values) + 1))
        label_id = {c: c for c in label_values}
    else:
        class_names = tuple(sorted(label_values))
        label_id = {c: i for i, c in enumerate(class_names)}
    vocab = None
    token_id: dict[Any, int] | None = None
    if token_kinds == {str}:
        vocab = tuple(sorted({t for toks, _ in seqs for t in toks}))
        if len(vocab) > MAX_VOCAB - 1:
            raise TaskFileError(path, [f"{len(vocab)} distinct token strings; the limit is {MAX_VOCAB - 1}"])
        token_id = {t: i for i, t in enumerate(vocab)}
    tokens = tuple(tuple(token_id[t] if token_id else t for t in toks) for toks, _ in seqs)
    labels = tuple(tuple(IGNORE if lab is None else label_id[lab] for lab in labs) for _, labs in seqs)
    return TaskFile(tokens, labels, vocab, class_names)


class FileTask(Task):
    """The task of a ``TaskFile`` (see the module docstring for splits, lengths and pairs).

    Attributes:
        name: the name it was added under (``layerscope task add FILE --name NAME``).
        params: ``{"sha256": digest}``, so a run's config hash names the data it saw.
    """

    def __init__(self, name: str, file: TaskFile) -> None:
        self.name, self.file = name, file
        self.vocab_size = file.vocab_size
        self.pad_id = self.vocab_size - 1
        self.n_classes = len(file.class_names)
        self.class_names = file.class_names
        self.params = {"sha256": file.digest}
        self._split = {
            s: [i for i in range(len(file.tokens)) if (i % 5 == 4) == (s == "test")] for s in ("train", "test")
        }

    @property
    def lengths(self) -> list[int]:
        """The distinct row lengths (the file's sequences: its natural eval lengths)."""
        return sorted({len(t) for t in self.file.tokens})

    @property
    def max_length(self) -> int:
        return max(self.lengths)

    def eval_length_problem(self, lengths: Iterable[int]) -> str | None:
        """Why ``lengths`` cannot be this task's eval lengths, or None: the rows end at the file's
        longest row, and a longer length would measure padding (null labels, the same row drawn
        again), numbers that look real and mean nothing."""
        over = sorted({n for n in lengths if n > self.max_length})
        if not over:
            return None
        return (
            f"eval length {', '.join(map(str, over))}: task {self.name!r} is a file task whose rows have "
            f"{', '.join(map(str, self.lengths))} tokens; its eval lengths are at most {self.max_length} "
            "(the file's sequences, or prefixes of them)"
        )

    def _rows(self, idx: Iterable[int], length: int) -> TaskData:
        idx = list(idx)
        tokens = np.full((len(idx), length), self.pad_id, dtype=np.int64)
        labels = np.full((len(idx), length), IGNORE, dtype=np.int64)
        for r, i in enumerate(idx):
            t, lab = self.file.tokens[i][:length], self.file.labels[i][:length]
            tokens[r, : len(t)], labels[r, : len(lab)] = t, lab
        return TaskData.from_numpy(tokens, labels)

    def labels_for(self, tokens: np.ndarray) -> np.ndarray:
        raise ValueError(f"task {self.name!r} is defined by its file: labels exist for its rows only")

    def generate(self, length: int, n: int, seed: int, split: str = "train") -> TaskData:
        """Rows of ``split`` cropped / padded to ``length``: [n, length] (test: at most the split's size)."""
        check_generate_args(self.name, length, n, seed, split)
        pool = self._split[split]
        rng = np.random.default_rng([seed, length, split == "test"])
        if split == "train":
            idx = rng.choice(len(pool), size=n, replace=len(pool) < n)
        else:
            idx = rng.permutation(len(pool))[:n]
        return self._rows((pool[int(i)] for i in idx), length)

    def corruption_pairs(
        self, length: int, n: int, seed: int, split: str = "test"
    ) -> tuple[TaskData, TaskData, torch.Tensor]:
        """n pairs (drawn with replacement) of rows cropped to ``length`` that differ in exactly one
        token and have different non-null labels at position ``length - 1``.

        Raises:
            NoCorruptionPairs (a ValueError): the file has no such pair at this length.
        """
        check_generate_args(self.name, length, n, seed, split)
        pairs = self._pairs(length)
        if not pairs:
            raise NoCorruptionPairs(
                f"task {self.name!r}: no two rows of its file (cropped to {length} tokens) differ in "
                "one token with different labels at the last position; it cannot be patched"
            )
        rng = np.random.default_rng([seed, length, 7])
        pick = [pairs[int(k)] for k in rng.integers(0, len(pairs), size=n)]
        clean, corr = self._rows((a for a, _, _ in pick), length), self._rows((b for _, b, _ in pick), length)
        return clean, corr, torch.tensor([p for _, _, p in pick], dtype=torch.long)

    def _pairs(self, length: int, cap: int = 4000) -> list[tuple[int, int, int]]:
        groups: dict[tuple, list[int]] = defaultdict(list)
        rows = [
            i for i, t in enumerate(self.file.tokens) if len(t) >= length and self.file.labels[i][length - 1] != IGNORE
        ][:cap]
        for i in rows:  # rows equal but for position p share the key (p, tokens without p)
            t = self.file.tokens[i][:length]
            for p in range(length):
                groups[(p, t[:p], t[p + 1 :])].append(i)
        out = []
        for (p, _, _), members in groups.items():
            for a in members:
                for b in members:
                    if (
                        self.file.tokens[a][p] != self.file.tokens[b][p]
                        and self.file.labels[a][length - 1] != self.file.labels[b][length - 1]
                    ):
                        out.append((a, b, p))
        return sorted(out)
