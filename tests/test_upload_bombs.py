"""Hostile task files are refused before they are materialised: a Parquet file
whose metadata claims millions of rows, a JSONL line nested 200,000 deep, a file whose rows would
hold more than the memory setting. Peak memory growth is measured in a fresh interpreter
(the process's peak resident memory, VmHWM, before and after the parse), never assumed."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.api.middleware import is_heavy
from science.tasks.file_task import MAX_ROW_DEPTH, TaskFileLimit, parse_task_file
from tests import test_file_task
from tests.cli_one_line import assert_one_line_error
from tests.test_file_task import parity_rows, write_jsonl

cli_env = test_file_task.cli_env
ROOT = Path(__file__).resolve().parents[1]
GROWTH_LIMIT_MB = 200

_MEASURE = """
import io, json, sys
import pyarrow as pa, pyarrow.parquet as pq
from science.tasks.file_task import TaskFileError, parse_task_file
kind = sys.argv[1]
if kind == "parquet":  # 5,000,000 rows of [0, 1] compress to about 140 KB
    n = 5_000_000
    one = pa.array([[0, 1]], type=pa.list_(pa.int64()))
    table = pa.table({"tokens": one.take(pa.array([0] * n)), "labels": one.take(pa.array([0] * n))})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    data, name = buf.getvalue(), "bomb.parquet"
    del table, one
else:  # one line of about 400 KB nested 200,000 deep
    data, name = b'{"tokens": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\\n", "bomb.jsonl"
import gc
gc.collect()
def hwm():  # this process's own peak resident memory, KiB (VmHWM; ru_maxrss carries the parent's across fork)
    return int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM:")).split()[1])
before = hwm()
try:
    parse_task_file(name, data=data)
    said = "accepted"
except TaskFileError as e:
    said = str(e)
growth_mb = (hwm() - before) / 1024
print(json.dumps({"said": said, "growth_mb": growth_mb, "bytes": len(data)}))
"""


def _measured(kind: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, kind],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_parquet_bomb_refused_from_its_metadata_with_bounded_memory() -> None:
    got = _measured("parquet")
    assert got["bytes"] < 1_000_000  # the bomb is small; what it claims is not
    assert got["said"] == "task file bomb.parquet: 5000000 rows; the limit is 200000"
    assert got["growth_mb"] < GROWTH_LIMIT_MB, got  # it took 1.9 GB before the metadata was read first


def test_nesting_bomb_refused_in_one_line_with_bounded_memory() -> None:
    got = _measured("nest")
    assert got["said"] == f"task file bomb.jsonl: line 1: nested deeper than {MAX_ROW_DEPTH} arrays/objects"
    assert got["growth_mb"] < GROWTH_LIMIT_MB, got


def _nest(depth: int) -> bytes:
    return b'{"tokens": ' + b"[" * depth + b"]" * depth + b"}\n"


def test_nesting_at_the_limit_is_read_one_over_is_refused(tmp_path) -> None:
    rows = [json.dumps(r).encode() for r in parity_rows(10)]
    ok = b'{"tokens": [[[[[[[0]]]]]]], "labels": [0]}'  # 8 deep: read, then refused as a row
    with pytest.raises(Exception, match="row 1: tokens must all be") as e:
        parse_task_file("x.jsonl", data=b"\n".join([ok, *rows]))
    assert not isinstance(e.value, TaskFileLimit)
    with pytest.raises(TaskFileLimit, match="line 3: nested deeper than 8"):
        parse_task_file("x.jsonl", data=b"\n".join([rows[0], rows[1], _nest(9), *rows]))


def test_parquet_whose_columns_nest_too_deep_is_refused_before_reading() -> None:
    t = pa.table({"tokens": [[[[[[[[[0]]]]]]]]], "labels": [[0]]})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    with pytest.raises(TaskFileLimit, match="its columns nest 9 deep; the limit is 8"):
        parse_task_file("deep.parquet", data=buf.getvalue())


def test_parquet_over_the_memory_setting_is_refused_from_its_row_groups() -> None:
    n, length = 200, 4096  # 819,200 tokens: 6.5 MB of int64 each for tokens and labels
    col = pa.array([[0, 1] * (length // 2)] * n, type=pa.list_(pa.int64()))
    buf = io.BytesIO()
    pq.write_table(pa.table({"tokens": col, "labels": col}), buf, row_group_size=50)
    data = buf.getvalue()
    with pytest.raises(TaskFileLimit, match=r"1638400 values in 4 row group\(s\): .* over 4 MiB"):
        parse_task_file("big.parquet", data=data, max_memory_bytes=4 * 2**20)
    assert len(parse_task_file("big.parquet", data=data).tokens) == n  # the default setting reads it


def test_jsonl_rows_over_the_memory_setting_are_refused_while_streaming(tmp_path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", parity_rows(10_000))
    with pytest.raises(TaskFileLimit, match=r"tokens in its first \d+ rows: .*over 1 MiB"):
        parse_task_file(path, max_memory_bytes=2**20)
    assert parse_task_file(path).tokens  # within the default


def test_a_line_over_the_line_limit_is_refused_unparsed() -> None:
    line = b'{"tokens": [' + b"0," * 600_000 + b'0], "labels": [0]}'
    with pytest.raises(TaskFileLimit, match=r"line 1: \d+ bytes; the limit is 1048576 a line"):
        parse_task_file("x.jsonl", data=line)


def test_cli_refuses_the_nesting_bomb_in_one_line(cli_env) -> None:
    (cli_env / "bomb.jsonl").write_bytes(_nest(200_000))
    assert_one_line_error(["task", "add", str(cli_env / "bomb.jsonl"), "--name", "b"], "nested deeper than 8")


def test_cli_memory_setting_is_honoured(cli_env, monkeypatch) -> None:
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_TASK_FILE_MAX_MEMORY_MIB", "1")
    get_settings.cache_clear()
    path = write_jsonl(cli_env / "p.jsonl", parity_rows(10_000))
    assert_one_line_error(["task", "add", str(path), "--name", "p"], "LAYERSCOPE_TASK_FILE_MAX_MEMORY_MIB")


def _upload(api, name: str, data: bytes):
    body = {"name": "bomb", "filename": name, "content_base64": base64.b64encode(data).decode()}
    return api.client.post("/api/tasks", json=body)


def test_api_answers_422_to_both_bombs(api) -> None:
    r = _upload(api, "bomb.jsonl", _nest(200_000))
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        {"loc": ["body", "content_base64"], "msg": "line 1: nested deeper than 8 arrays/objects", "type": "value_error"}
    ]
    one = pa.array([[0, 1]], type=pa.list_(pa.int64()))
    buf = io.BytesIO()
    pq.write_table(
        pa.table({"tokens": one.take(pa.array([0] * 300_000)), "labels": one.take(pa.array([0] * 300_000))}), buf
    )
    r = _upload(api, "bomb.parquet", buf.getvalue())
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == "300000 rows; the limit is 200000", r.text
    assert api.client.get("/api/tasks").json() == []  # nothing stored


def test_uploads_are_heavy_routes_and_the_list_is_not() -> None:
    assert is_heavy("/api/tasks", "POST") and is_heavy("/api/tasks/upload", "POST")
    assert not is_heavy("/api/tasks", "GET") and not is_heavy("/api/tasks")
