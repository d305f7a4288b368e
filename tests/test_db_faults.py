"""Database faults: a page-corrupted SQLite file is refused at start-up with one line
naming it and the backup to restore; at request time a corrupt file, a full disk and an
unreachable PostgreSQL server answer 503 / 507 with a ``detail`` saying which — never a bare 500."""

from __future__ import annotations

import os
import shutil

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from backend.api.main import create_app
from backend.cli import main
from backend.core.startup import StartupError, open_database, quick_check
from store.migrate import init_db
from store.models import SavedView
from store.session import make_engine, make_sessionmaker
from store.settings import get_settings
from tests.conftest import seed_runs
from tests.test_cli_commands import one_line_error

PAGE = 4096


def scribble(path, seed: int = 0) -> None:
    """Overwrite 300 bytes inside every other page after the first two (the header stays valid)."""
    import random

    rnd = random.Random(seed)
    data = bytearray(path.read_bytes())
    for page in range(3, len(data) // PAGE, 2):
        data[page * PAGE + 100 : page * PAGE + 400] = bytes(rnd.randrange(256) for _ in range(300))
    path.write_bytes(bytes(data))


@pytest.fixture
def seeded(make_settings):
    settings = make_settings()
    init_db(settings.resolved_db_url)
    engine = make_engine(settings.resolved_db_url)
    seed_runs(make_sessionmaker(engine))
    engine.dispose()
    return settings, settings.home.parent / "layerscope.db"


def test_sound_file_passes_the_check(seeded) -> None:
    settings, path = seeded
    assert quick_check(path, 10.0) == []
    assert open_database(settings)


@pytest.mark.parametrize("seed", [0, 1])
def test_page_corrupted_file_is_refused_at_start(seeded, seed) -> None:
    settings, path = seeded
    scribble(path, seed)
    with pytest.raises(StartupError) as err:
        open_database(settings)
    line = str(err.value)
    assert "\n" not in line and str(path) in line and "corrupt" in line and "quick_check" in line
    assert "no backup" in line


def test_refusal_names_the_newest_backup(seeded) -> None:
    settings, path = seeded
    old = path.with_name(path.name + ".bak-20260101T000000Z-0003")
    new = path.with_name(path.name + ".bak-20260102T000000Z-0004")
    shutil.copy(path, old)
    shutil.copy(path, new)
    os.utime(old, (1, 1))
    scribble(path)
    with pytest.raises(StartupError, match=f"restore the backup {new}"):
        open_database(settings)


def test_check_can_be_skipped(seeded) -> None:
    settings, path = seeded
    scribble(path)
    skipped = settings.model_copy(update={"check_integrity": False})
    try:
        open_database(skipped)  # no integrity refusal; migrating may still trip over the damage
    except StartupError as exc:
        assert "quick_check" not in str(exc)


def test_check_stops_at_its_time_limit(seeded) -> None:
    _, path = seeded
    assert quick_check(path, -1.0) is None  # interrupted at once: the caller serves unchecked


def test_serve_refuses_a_corrupt_file_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("LAYERSCOPE_HOME", str(home))
    monkeypatch.delenv("LAYERSCOPE_DB_URL", raising=False)
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    get_settings.cache_clear()
    try:
        assert main(["db", "upgrade"]) == 0
        settings = get_settings()
        engine = make_engine(settings.resolved_db_url)
        seed_runs(make_sessionmaker(engine))
        engine.dispose()
        capsys.readouterr()
        scribble(home / "layerscope.db")
        one_line_error(capsys, main(["serve", "--port", "18766"]), 1, str(home / "layerscope.db"), "corrupt")
    finally:
        get_settings.cache_clear()


def test_corrupt_pages_at_request_time_are_503(seeded) -> None:
    settings, path = seeded
    engine = make_engine(settings.resolved_db_url)
    app = create_app(settings, make_sessionmaker(engine), background=False)
    scribble(path)
    with TestClient(app, raise_server_exceptions=False) as c:
        answers = [c.get(p) for p in ("/api/runs", "/api/curves", "/api/profiles", "/api/export/probes.csv")]
    engine.dispose()
    assert all(r.status_code < 500 or r.status_code == 503 for r in answers), [r.status_code for r in answers]
    failed = [r for r in answers if r.status_code == 503]
    assert failed, [r.status_code for r in answers]
    for r in failed:
        assert "corrupt" in r.json()["detail"] and r.json()["reason"] == "corrupt"


def test_disk_full_write_is_507_and_half_writes_nothing(make_settings) -> None:
    settings = make_settings()
    init_db(settings.resolved_db_url)
    engine = make_engine(settings.resolved_db_url)

    @event.listens_for(engine, "connect")
    def _cap(dbapi_conn, _record):  # the file may not grow: SQLite answers "database or disk is full"
        dbapi_conn.execute("PRAGMA journal_mode = DELETE")  # WAL would defer the limit to a checkpoint
        dbapi_conn.execute("PRAGMA max_page_count = 1")  # clamped to the current size: no new page

    app = create_app(settings, make_sessionmaker(engine), background=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        big = {"title": "t", "page": "/curves", "state": {"k": "v" * 100_000}}
        answers = [c.post("/api/views", json=big) for _ in range(10)]
        codes = [r.status_code for r in answers]
        assert set(codes) <= {201, 507} and 507 in codes, codes
        for r in answers:
            if r.status_code == 507:
                assert "disk is full" in r.json()["detail"] and r.json()["reason"] == "disk_full"
                assert "Retry-After" in r.headers
        assert c.get("/api/health").status_code == 200
    with make_sessionmaker(engine)() as s:  # nothing half-written: one row per 201
        assert s.query(SavedView).count() == codes.count(201)
    engine.dispose()


def test_postgres_down_reads_are_503_with_retry_after(make_settings) -> None:
    settings = make_settings()
    engine = make_engine("postgresql+psycopg://postgres@127.0.0.1:1/nothing?connect_timeout=2")
    app = create_app(settings, make_sessionmaker(engine), background=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        for path in ("/api/runs", "/api/curves", "/api/jobs", "/api/suites"):
            r = c.get(path)
            assert r.status_code == 503, (path, r.status_code, r.text[:200])
            assert int(r.headers["Retry-After"]) >= 1
            assert "unreachable" in r.json()["detail"]
    engine.dispose()
