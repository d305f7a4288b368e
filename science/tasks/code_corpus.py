"""Python corpora for ``code_depth``: read, select, split by document, tokenise, cache.

Sources (``corpus`` parameter):

- ``"stdlib"`` (default): the ``*.py`` files of the running Python's standard library,
  found at run time under ``sysconfig.get_paths()["stdlib"]``; ``site-packages`` is always
  left out, and test folders (a path part ``test``, ``tests`` or ``idle_test``) too when
  ``skip_tests`` is true. Document id = the path relative to that folder.
- a path to a CodeSearchNet Python ``.jsonl`` / ``.jsonl.gz`` file, a ``.py`` file, or a
  folder searched recursively for those. Each jsonl line is one document, its source in the
  field ``code`` (else ``original_string``); document id = ``"<relative file>:<line no>"``.

Selection and split are stable hashes of the document id (SHA-1), independent of the file
system order: the ``max_files`` documents with the smallest ``sha1("order:" + id)`` are kept
(all when ``max_files`` is None), and a document is in the test split when
``sha1("split:" + id)`` / 2**64 < ``test_fraction``. A document's split therefore never
depends on ``max_files``.

Documents that cannot be read, decoded, parsed as JSON or tokenised are skipped and counted
(``Corpus.skipped``), never fatal. :func:`load_corpus` caches per process.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import heapq
import json
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .code_lexer import CodeLexError, lex_source

STDLIB = "stdlib"
TEST_DIR_NAMES = frozenset({"test", "tests", "idle_test"})
CODE_FIELDS = ("code", "original_string")


@dataclass(frozen=True)
class Corpus:
    """A tokenised corpus split by document.

    Attributes:
        train / test: one tuple of task token strings per document (see ``code_lexer``),
            in document-id order.
        train_ids / test_ids: the matching document ids.
        skipped: ids of the documents that were skipped, with the reason.
    """

    train: tuple[tuple[str, ...], ...]
    test: tuple[tuple[str, ...], ...]
    train_ids: tuple[str, ...]
    test_ids: tuple[str, ...]
    skipped: tuple[str, ...]


def _hash(prefix: str, doc_id: str) -> int:
    return int.from_bytes(hashlib.sha1(f"{prefix}:{doc_id}".encode()).digest()[:8], "big")


def is_test_document(doc_id: str, test_fraction: float) -> bool:
    """True if ``doc_id`` belongs to the test split (stable SHA-1 rule above)."""
    return _hash("split", doc_id) / 2**64 < test_fraction


def stdlib_root() -> Path:
    """The running interpreter's standard-library folder."""
    return Path(sysconfig.get_paths()["stdlib"])


def _py_files(root: Path, skip_tests: bool, always_skip: frozenset[str]) -> list[Path]:
    files = []
    for path in root.rglob("*.py"):
        parts = set(path.relative_to(root).parts[:-1])
        if parts & always_skip or (skip_tests and parts & TEST_DIR_NAMES):
            continue
        files.append(path)
    return sorted(files)


def _documents(spec: str, skip_tests: bool, skipped: list[str]) -> Iterator[tuple[str, object]]:
    """Yield ``(doc_id, payload)``: a Path for .py files, a jsonl line (str) otherwise."""
    if spec == STDLIB:
        root = stdlib_root()
        for path in _py_files(root, skip_tests, frozenset({"site-packages"})):
            yield path.relative_to(root).as_posix(), path
        return
    target = Path(spec)
    if target.is_dir():
        root = target
        candidates = _py_files(root, skip_tests, frozenset()) + sorted(
            p for p in root.rglob("*") if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz"))
        )
    else:
        root, candidates = target.parent, [target]
    for path in candidates:
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".py":
            yield rel, path
            continue
        try:
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as handle:
                for lineno, line in enumerate(handle, start=1):
                    if line.strip():
                        yield f"{rel}:{lineno}", line
        except (OSError, EOFError, UnicodeDecodeError) as err:
            skipped.append(f"{rel} (unreadable: {err})")


def _source(payload: object) -> str | bytes:
    """The source of one document; raises ValueError/OSError when there is none."""
    if isinstance(payload, Path):
        return payload.read_bytes()
    if not isinstance(payload, str | bytes | bytearray):
        raise TypeError(f"a document is a file path or a JSON line, got {type(payload).__name__}")
    record = json.loads(payload)
    if isinstance(record, dict):
        for field in CODE_FIELDS:
            if isinstance(record.get(field), str):
                return record[field]
    raise ValueError(f"no string field among {CODE_FIELDS}")


def check_corpus_spec(spec: str) -> None:
    """Raise ValueError unless ``spec`` is ``"stdlib"``, an existing folder or a .py/.jsonl(.gz) file."""
    if spec == STDLIB:
        return
    path = Path(spec)
    if path.is_dir():
        return
    if not path.is_file() or not path.name.endswith((".py", ".jsonl", ".jsonl.gz")):
        raise ValueError(
            f"code_depth: parameter 'corpus' must be 'stdlib', a folder, or an existing "
            f".py/.jsonl/.jsonl.gz file; got {spec!r}"
        )


@functools.lru_cache(maxsize=8)
def load_corpus(spec: str, max_files: int | None, test_fraction: float, skip_tests: bool) -> Corpus:
    """Select, split and tokenise the documents of ``spec`` (cached per process).

    Raises:
        ValueError: if ``spec`` is not a valid corpus (see :func:`check_corpus_spec`).
    """
    check_corpus_spec(spec)
    skipped: list[str] = []
    heap: list[tuple[int, str, object]] = []  # (-order hash, id, payload): the smallest hashes
    for doc_id, payload in _documents(spec, skip_tests, skipped):
        item = (-_hash("order", doc_id), doc_id, payload)
        if max_files is None or len(heap) < max_files:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)
    split: dict[bool, list[tuple[str, tuple[str, ...]]]] = {False: [], True: []}
    for _, doc_id, payload in sorted(heap, key=lambda item: item[1]):
        try:
            keys = tuple(lex_source(_source(payload)))
        except (CodeLexError, ValueError, OSError) as err:
            skipped.append(f"{doc_id} ({err})")
            continue
        split[is_test_document(doc_id, test_fraction)].append((doc_id, keys))
    return Corpus(
        train=tuple(k for _, k in split[False]),
        test=tuple(k for _, k in split[True]),
        train_ids=tuple(i for i, _ in split[False]),
        test_ids=tuple(i for i, _ in split[True]),
        skipped=tuple(skipped),
    )
