"""A broken database or configuration at start-up is one `layerscope: error: …` line
naming the file or URL and what to do — for `db upgrade`, `serve` and `worker` alike."""

from __future__ import annotations

import sqlite3

import pytest

from backend.cli import main
from layerscope_core.registry import BUILTIN_TASKS
from store.settings import get_settings
from tests.test_cli_commands import one_line_error
from worker.job_params import FAMILIES, METHODS, PRESETS

COMMANDS = [
    ["db", "upgrade"],
    ["serve", "--port", "18765"],
    ["worker", "--max-jobs", "1", "--idle-exit", "0"],
    ["token", "list"],
]


@pytest.fixture
def env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LAYERSCOPE_HOME", str(home))
    monkeypatch.delenv("LAYERSCOPE_DB_URL", raising=False)
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


def one_line(capsys, rc: int, *needles: str) -> str:
    """One `layerscope: error:` line, exit status 1 (2 for a usage error), no traceback."""
    return one_line_error(capsys, rc, 2 if rc == 2 else 1, *needles)


def garbage(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def a_real_db(env, capsys) -> bytes:
    assert main(["db", "upgrade"]) == 0
    capsys.readouterr()
    return (env / "layerscope.db").read_bytes()


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("content", [b"garbage\n", b"\x00" * 4096, b"SQLite format 3\x00" + b"\xff" * 200])
def test_garbage_database_file(env, capsys, argv, content) -> None:
    garbage(env / "layerscope.db", content)
    line = one_line(capsys, main(argv), str(env / "layerscope.db"), "not a readable SQLite database", "move it aside")
    assert "backup" in line


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_truncated_database_file(env, capsys, argv, fraction) -> None:
    data = a_real_db(env, capsys)
    (env / "layerscope.db").write_bytes(data[: int(len(data) * fraction)])
    one_line(capsys, main(argv), str(env / "layerscope.db"))


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("revision", ["9999_future", "ffffffffffff"])
def test_database_at_an_unknown_future_revision(env, capsys, argv, revision) -> None:
    a_real_db(env, capsys)
    with sqlite3.connect(env / "layerscope.db") as c:
        c.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    one_line(capsys, main(argv), "layerscope.db", revision, "newer layerscope", "upgrade layerscope")


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize(
    "url, needle",
    [
        ("mysql://u:secret@db.example/x", "'mysql'"),
        ("mysql+pymysql://u@h/x", "'mysql'"),
        ("oracle://u@h/x", "'oracle'"),
        ("mssql+pyodbc://u@h/x", "'mssql'"),
        ("not a url", "not a database URL"),
    ],
)
def test_unsupported_database_url(env, capsys, monkeypatch, argv, url, needle) -> None:
    monkeypatch.setenv("LAYERSCOPE_DB_URL", url)
    get_settings.cache_clear()
    line = one_line(capsys, main(argv), needle, "LAYERSCOPE_DB_URL")
    assert "secret" not in line  # the password is never printed


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("var", ["LAYERSCOPE_HOME", "LAYERSCOPE_STORE_DIR"])
def test_a_folder_setting_pointing_at_a_file(env, capsys, monkeypatch, tmp_path, argv, var) -> None:
    f = tmp_path / "a_file"
    f.write_text("x")
    monkeypatch.setenv(var, str(f))
    get_settings.cache_clear()
    one_line(capsys, main(argv), f"{var}={f}", "is a file, not a folder")


def test_suite_help_lists_every_choice(capsys) -> None:
    assert main(["suite", "--help"]) == 0
    text = capsys.readouterr().out
    for name in (*FAMILIES, *BUILTIN_TASKS, *PRESETS):
        assert name in text, name


def test_intervene_help_lists_every_method(capsys) -> None:
    assert main(["intervene", "--help"]) == 0
    text = capsys.readouterr().out
    for name in METHODS:
        assert name in text, name


@pytest.mark.parametrize(
    "option, value, valid",
    [("--family", "rnn", FAMILIES), ("--task", "chess", BUILTIN_TASKS), ("--preset", "huge", PRESETS)],
)
def test_a_typo_lists_the_choices(capsys, option, value, valid) -> None:
    argv = ["suite", "--preset", "smoke", option, value] if option != "--preset" else ["suite", option, value]
    rc = main(argv)
    assert rc == 2
    one_line(capsys, rc, option, value, *valid)


@pytest.mark.parametrize("name", ["a\x00b", "tab\there", "line\nbreak", "bell\x07", "c1\x85"])
def test_control_characters_in_a_cli_name_are_one_line(env, capsys, name) -> None:
    one_line(capsys, main(["suite", "--preset", "smoke", "--name", name, "--submit"]), "name", "control characters")


@pytest.mark.parametrize("name", ["a\x00b", "new\nline", "esc\x1b[31m", "c1\x9b"])
def test_control_characters_in_a_token_name_are_one_line(env, capsys, name) -> None:
    one_line(capsys, main(["token", "create", "--name", name]), "token name", "control characters")


@pytest.mark.parametrize("bundle", [False, True])
def test_serve_on_a_busy_port_is_one_line(env, capsys, bundle) -> None:
    """As `demo` does: said before uvicorn starts (it printed its log, an ERROR line and exited 3)."""
    import socket
    from pathlib import Path

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        extra = [str(Path(__file__).resolve().parents[1] / "examples" / "paper-steps.layerscope.zip")] if bundle else []
        rc = main(["serve", *extra, "--port", str(port)])
    one_line(capsys, rc, f"cannot listen on 127.0.0.1:{port}", "--port")
