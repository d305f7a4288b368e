"""Code-Depth: lexing, hand-checked depths, corpora (stdlib, folders, jsonl/jsonl.gz), windows."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch

from science.tasks import get_task
from science.tasks.code_corpus import is_test_document
from science.tasks.code_lexer import CodeLexError, lex_source

OPEN, CLOSE = {"(", "[", "{"}, {")", "]", "}"}


def ref_depths(keys, variant="bracket"):
    """Depth after each task token, with plain loops (independent of depth_walk)."""
    up, down = (OPEN, CLOSE) if variant == "bracket" else ({"<indent>"}, {"<dedent>"})
    depth, out = 0, []
    for key in keys:
        if key in up:
            depth += 1
        elif key in down:
            depth = max(0, depth - 1)
        out.append(depth)
    return out


def write(folder, name, text):
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def tiny_task(tmp_path):
    """A task over a two-file corpus; brackets are always in the vocabulary."""
    write(tmp_path, "a.py", "x = (1, [2])\n")
    write(tmp_path, "b.py", "def f(y):\n    return {y: y}\n")
    return get_task("code_depth", corpus=str(tmp_path), test_fraction=0.01)


def labels_of(task, keys):
    return task.labels_for(task.encode(keys)[None, :])[0].tolist()


# ---------------------------------------------------------------- hand-written snippets
SNIPPETS = [
    # brackets in strings don't count
    ('s = "(" + \'[\' + """{\n"""\n', ["s", "=", "<str>", "+", "<str>", "+", "<str>", "<newline>"], [0] * 8),
    # f-strings are one <str>: brackets in replacement fields don't count
    (
        'y = (f"{b[(0)]}", f"{x:{w}}")\n',
        ["y", "=", "(", "<str>", ",", "<str>", ")", "<newline>"],
        [0, 0, 1, 1, 1, 1, 0, 0],
    ),
    # a comment holding a bracket, a line break inside brackets
    (
        "x = (1  # ) not a close\n     + 2)\n",
        ["x", "=", "(", "<num>", "+", "<num>", ")", "<newline>"],
        [0, 0, 1, 1, 1, 1, 0, 0],
    ),
    # a backslash line continuation
    ("x = 1 + \\\n    2\n", ["x", "=", "<num>", "+", "<num>", "<newline>"], [0] * 6),
    # nested comprehensions
    (
        "m = [[(i, j) for j in range(3)] for i in {k: v for k, v in d.items()}]\n",
        [
            "m",
            "=",
            "[",
            "[",
            "(",
            "i",
            ",",
            "j",
            ")",
            "for",
            "j",
            "in",
            "range",
            "(",
            "<num>",
            ")",
            "]",
            "for",
            "i",
            "in",
            "{",
            "k",
            ":",
            "v",
            "for",
            "k",
            ",",
            "v",
            "in",
            "d",
            ".",
            "items",
            "(",
            ")",
            "}",
            "]",
            "<newline>",
        ],
        [0, 0, 1, 2, 3, 3, 3, 3, 2, 2, 2, 2, 2, 3, 3, 2, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 0, 0],
    ),
]


@pytest.mark.parametrize("source, keys, depths", SNIPPETS)
def test_snippet_tokens_and_bracket_depths(tiny_task, source, keys, depths):
    assert lex_source(source) == keys
    assert ref_depths(keys) == depths  # the reference agrees with the hand-worked depths
    assert labels_of(tiny_task, keys) == depths


def test_indent_depths_and_cap(tmp_path):
    source = "def f(x):\n    if x:\n        return [\n    1]\n    return 0\n"
    keys = lex_source(source)
    assert keys == [
        "def",
        "f",
        "(",
        "x",
        ")",
        ":",
        "<newline>",
        "<indent>",
        "if",
        "x",
        ":",
        "<newline>",
        "<indent>",
        "return",
        "[",
        "<num>",
        "]",
        "<newline>",
        "<dedent>",
        "return",
        "<num>",
        "<newline>",
        "<dedent>",
    ]
    write(tmp_path, "a.py", source)
    indent = get_task("code_depth", corpus=str(tmp_path), variant="indent", test_fraction=0.01)
    assert labels_of(indent, keys) == [0] * 7 + [1] * 5 + [2] * 6 + [1] * 4 + [0]
    capped = get_task("code_depth", corpus=str(tmp_path), m=1, test_fraction=0.01)
    assert labels_of(capped, lex_source("a = ((([1])))\n")) == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    assert capped.n_classes == 2 and capped.class_names == ("0", "1")


@pytest.mark.parametrize("source", ["x = (1,\n    2\n", 'x = "never closed\n', "if x:\n        a\n    b\n"])
def test_untokenisable_sources_raise(source):
    with pytest.raises(CodeLexError):  # an unterminated bracket at EOF included
        lex_source(source)


# ---------------------------------------------------------------- corpora
def test_broken_files_are_skipped_and_counted(tmp_path):
    write(tmp_path, "good.py", "x = [1]\ny = 2\n")
    write(tmp_path, "unterminated_bracket.py", "x = (1,\n")
    write(tmp_path, "bad_string.py", "x = 'oops\n")
    (tmp_path / "bad_bytes.py").write_bytes(b"x = '\xff\xfe'\n")
    task = get_task("code_depth", corpus=str(tmp_path), test_fraction=0.01)
    assert task.skipped_files == 3
    assert task.corpus.train_ids + task.corpus.test_ids == ("good.py",)


def _records(tag):
    return [
        {"code": f"def {tag}(a):\n    return (a, [a])\n"},
        {"original_string": f"{tag}_x = {{1: (2)}}\n"},
        {"code": "x = (\n"},  # untokenisable
        {"docstring": "no code"},
    ]  # no code field


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl_corpus(tmp_path, gz):
    lines = [json.dumps(r) for r in _records("fa")] + ["{not json", ""]
    text = "\n".join(lines) + "\n"
    name = "python_train_0.jsonl" + (".gz" if gz else "")
    path = tmp_path / name
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    for spec in (str(path), str(tmp_path)):
        task = get_task("code_depth", corpus=spec, test_fraction=0.01)
        corpus = task.corpus
        assert task.skipped_files == 3  # untokenisable, no code field, bad JSON
        ids = sorted(corpus.train_ids + corpus.test_ids)
        assert ids == [f"{name}:1", f"{name}:2"]
        docs = dict(zip(corpus.train_ids + corpus.test_ids, corpus.train + corpus.test))
        assert list(docs[f"{name}:1"]) == lex_source(_records("fa")[0]["code"])
        assert list(docs[f"{name}:2"]) == ["fa_x", "=", "{", "<num>", ":", "(", "<num>", ")", "}", "<newline>"]


def test_bad_params_raise_naming_them(tmp_path):
    with pytest.raises(ValueError, match="'corpus'"):
        get_task("code_depth", corpus=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="'variant'"):
        get_task("code_depth", variant="tabs")
    with pytest.raises(ValueError, match="'vocab_size'"):
        get_task("code_depth", vocab_size=5)
    with pytest.raises(ValueError, match="'test_fraction'"):
        get_task("code_depth", test_fraction=1.0)
    with pytest.raises(ValueError, match="'max_files'"):
        get_task("code_depth", max_files=0)


def test_split_by_document_and_vocab_from_train_only(tmp_path):
    names = [f"doc{i}.py" for i in range(40)]
    test_name = next(n for n in names if is_test_document(n, 0.5))
    train_name = next(n for n in names if not is_test_document(n, 0.5))
    write(tmp_path, test_name, "only_in_test = 1\n")
    write(tmp_path, train_name, "only_in_train = 1\n")
    task = get_task("code_depth", corpus=str(tmp_path), test_fraction=0.5)
    assert task.corpus.test_ids == (test_name,) and task.corpus.train_ids == (train_name,)
    assert "only_in_train" in task.vocab and "only_in_test" not in task.vocab
    assert task.encode(["only_in_test", "only_in_train", "("]).tolist() == [0, task.vocab.index("only_in_train"), 6]
    assert task.vocab[:12] == (
        "<unk>",
        "<newline>",
        "<indent>",
        "<dedent>",
        "<num>",
        "<str>",
        "(",
        "[",
        "{",
        ")",
        "]",
        "}",
    )
    # a document's split does not depend on max_files
    small = get_task("code_depth", corpus=str(tmp_path), test_fraction=0.5, max_files=1)
    for doc_id in small.corpus.train_ids:
        assert doc_id == train_name
    for doc_id in small.corpus.test_ids:
        assert doc_id == test_name


# ---------------------------------------------------------------- the stdlib default
@pytest.fixture(scope="module", params=["bracket", "indent"])
def stdlib_task(request):
    return get_task("code_depth", variant=request.param, max_files=30, m=4)


def test_stdlib_corpus(stdlib_task):
    corpus = stdlib_task.corpus
    assert stdlib_task.skipped_files == 0
    assert len(corpus.train) > len(corpus.test) > 0
    assert not set(corpus.train_ids) & set(corpus.test_ids)
    for doc_id in corpus.train_ids + corpus.test_ids:
        parts = doc_id.split("/")
        assert doc_id.endswith(".py") and "site-packages" not in parts and "test" not in parts[:-1]
    assert len(stdlib_task.vocab) == stdlib_task.vocab_size == 256
    json.dumps(stdlib_task.params)


@pytest.mark.parametrize("split", ["train", "test"])
def test_windows_match_document_depths(stdlib_task, split):
    task, length = stdlib_task, 40
    docs = task.corpus.train if split == "train" else task.corpus.test
    windows = task.windows(split, length)
    assert len(windows) > 0
    previous_end = {}
    for d, s in windows.tolist():
        keys = list(docs[d])
        depths = ref_depths(keys, task.variant)
        assert s == 0 or keys[s - 1] in ("<newline>", "<indent>", "<dedent>")  # a line start
        assert s == 0 or depths[s - 1] == 0  # depth 0 before the window
        assert s >= previous_end.get(d, 0)  # non-overlapping
        previous_end[d] = s + length
        labels = task.labels_for(task.encode(keys[s : s + length])[None, :])[0].tolist()
        assert labels == [min(x, task.m) for x in depths[s : s + length]]
    data = task.generate(length, 64, seed=0, split=split)
    rows = {tuple(task.encode(list(docs[d])[s : s + length]).tolist()) for d, s in windows.tolist()}
    assert all(tuple(r) in rows for r in data.tokens.tolist())


def test_generate_deterministic_and_seeded(stdlib_task):
    a = stdlib_task.generate(40, 32, seed=0)
    b = stdlib_task.generate(40, 32, seed=0)
    c = stdlib_task.generate(40, 32, seed=1)
    assert a.tokens.shape == (32, 40) and a.tokens.dtype == torch.long
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.tokens, c.tokens)
    assert int(a.labels.max()) <= stdlib_task.m
    assert not torch.equal(a.tokens, stdlib_task.generate(40, 32, seed=0, split="test").tokens)


def test_corruption_pairs(stdlib_task):
    length, n = 40, 48
    clean, corrupted, pos = stdlib_task.corruption_pairs(length, n, seed=0)
    opener = 6 if stdlib_task.variant == "bracket" else 2  # "(" or "<indent>"
    for i in range(n):
        a, b = clean.tokens[i].tolist(), corrupted.tokens[i].tolist()
        diff = [t for t in range(length) if a[t] != b[t]]
        assert diff == [int(pos[i])] and int(pos[i]) < length // 4
        assert b[int(pos[i])] == opener
        vocab = stdlib_task.vocab
        for data, toks in ((clean, a), (corrupted, b)):
            ref = [min(x, stdlib_task.m) for x in ref_depths([vocab[t] for t in toks], stdlib_task.variant)]
            assert data.labels[i].tolist() == ref
        assert clean.labels[i, -1] != corrupted.labels[i, -1]
    again = stdlib_task.corruption_pairs(length, n, seed=0)
    assert torch.equal(again[1].tokens, corrupted.tokens) and torch.equal(again[2], pos)
    assert np.isin(clean.tokens.numpy(), np.arange(stdlib_task.vocab_size)).all()
