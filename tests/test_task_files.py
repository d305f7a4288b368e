"""``layerscope task add`` / ``POST /api/tasks`` name every bad row even when some lines are not
JSON (backend/task_files.py), and ``layerscope task list --json``."""

from __future__ import annotations

import base64
import json

from tests import test_file_task
from tests.cli_one_line import run_cli
from tests.test_file_task import parity_rows, write_jsonl

cli_env = test_file_task.cli_env  # the fixture: a temp home, DB, queue and model store

SHORT = {"tokens": [0, 1, 1], "labels": [0, 1]}


def broken_file(path, n_bad: int = 8):
    """Parity rows, line 2 not JSON, then ``n_bad`` rows with a label missing (every other line
    from line 5); a blank line after line 3 shifts row and line numbers by one after it."""
    lines = [json.dumps(r) for r in parity_rows(40)]
    lines[1] = "not json at all"
    for k in range(n_bad):
        lines[4 + 2 * k] = json.dumps(SHORT)
    lines.insert(3, "")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_task_add_names_the_bad_rows_beside_the_lines_that_are_not_json(cli_env) -> None:
    rc, out, err = run_cli(["task", "add", str(broken_file(cli_env / "bad.jsonl")), "--name", "t"])
    assert rc == 1 and "Traceback" not in out + err
    assert "9 problem(s)" in err
    lines = err.strip().splitlines()[1:]
    assert [x.strip() for x in lines] == ["line 2: not JSON (Expecting value)"] + [
        f"row {r} (line {r + 1}): 3 tokens but 2 labels" for r in range(5, 21, 2)
    ]


def test_task_add_shows_the_first_20_and_counts_the_rest(cli_env) -> None:
    rc, _, err = run_cli(["task", "add", str(broken_file(cli_env / "bad.jsonl", n_bad=30)), "--name", "t"])
    assert rc == 1 and "31 problem(s)" in err and "… and 11 more" in err
    assert len([x for x in err.splitlines() if x.startswith("  line") or x.startswith("  row")]) == 20


def test_api_upload_names_them_too(api, tmp_path) -> None:
    data = broken_file(tmp_path / "bad.jsonl").read_bytes()
    r = api.client.post(
        "/api/tasks", json={"name": "bad", "filename": "bad.jsonl", "content_base64": base64.b64encode(data).decode()}
    )
    msgs = [d["msg"] for d in r.json()["detail"]]
    assert r.status_code == 422 and len(msgs) == 9 and msgs[0].startswith("line 2: not JSON")
    assert msgs[-1] == "row 19 (line 20): 3 tokens but 2 labels"


def test_a_file_that_is_only_broken_lines_or_only_bad_rows_reads_as_before(cli_env) -> None:
    rows = parity_rows(10)
    rows[2] = SHORT
    rc, _, err = run_cli(["task", "add", str(write_jsonl(cli_env / "rows.jsonl", rows)), "--name", "t"])
    assert rc == 1 and "1 problem(s)" in err and "row 3: 3 tokens but 2 labels" in err
    lines = [json.dumps(r) for r in parity_rows(10)]
    lines[3] = "{not json"
    (cli_env / "broken.jsonl").write_text("\n".join(lines))
    rc, _, err = run_cli(["task", "add", str(cli_env / "broken.jsonl"), "--name", "t"])
    assert rc == 1 and "1 problem(s)" in err and "line 4: not JSON" in err
    (cli_env / "both.jsonl").write_text('{"tokens": [1]}\nnot json\n')  # the row the first line makes, too
    rc, _, err = run_cli(["task", "add", str(cli_env / "both.jsonl"), "--name", "t"])
    assert (
        "2 problem(s)\n  row 1: expected exactly the fields tokens and labels (missing ['labels'])\n  line 2: not JSON"
        in err
    )


def test_task_list_json(cli_env) -> None:
    rc, out, err = run_cli(["task", "list", "--json"])
    assert rc == 0 and json.loads(out) == [], err
    assert run_cli(["task", "add", str(write_jsonl(cli_env / "p.jsonl", parity_rows(10))), "--name", "mine"])[0] == 0
    rc, out, _ = run_cli(["task", "list", "--json"])
    (rec,) = json.loads(out)
    assert rec["name"] == "mine" and rec["n_rows"] == 20 and len(rec["sha256"]) == 64 and rec["class_names"]
    rc, out, _ = run_cli(["task", "list"])
    assert rc == 0 and out.startswith(f"mine\t20 rows\tlengths {rec['lengths'][0]}..") and rec["sha256"][:12] in out
