"""Upgrades lose nothing: a populated database at EVERY past revision, upgraded to
head on SQLite and PostgreSQL, keeps every row count and the checksum of every table's data;
a migration that rebuilds ``runs`` (SQLite batch mode) no longer cascades into its children;
a migration that leaves dangling references, or fails half-way, is rolled back; and
``layerscope db upgrade`` backs a SQLite file up first and says where.

Part of every new migration's checklist: store/migrations/README.md.
"""

from __future__ import annotations

import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select, text

from store import migrate
from store.migrate import MigrationError, database_revision, head_revision, init_db, revisions
from store.session import make_engine
from tests.fixtures.populated_db import fingerprint, populate

PAST = revisions()[:-1]


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def build(url: str, revision: str):
    """A database at ``revision``, filled; returns its fingerprint."""
    assert init_db(url, revision=revision) == revision
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            counts = populate(conn)
        with engine.connect() as conn:
            fp = fingerprint(conn)
    finally:
        engine.dispose()
    assert fp.counts == counts and all(counts.values())
    return fp


def after(url: str, before):
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return fingerprint(conn, before.columns)
    finally:
        engine.dispose()


def assert_kept(url: str, before) -> None:
    now = after(url, before)
    assert now.counts == before.counts, "row counts changed by the upgrade"
    assert now.checksums == before.checksums, "stored data changed by the upgrade"


def test_there_is_a_past_revision_to_upgrade_from() -> None:
    assert PAST, "one migration only: nothing to test yet"
    assert revisions()[-1] == head_revision()


@pytest.mark.parametrize("revision", PAST)
def test_populated_database_at_every_past_revision_upgrades_to_head_losing_nothing(db_url, revision) -> None:
    before = build(db_url, revision)
    assert init_db(db_url) == head_revision()
    assert_kept(db_url, before)
    assert init_db(db_url) == head_revision()  # idempotent
    assert_kept(db_url, before)
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.split("///", 1)[1]) as raw:
            assert raw.execute("PRAGMA foreign_key_check").fetchall() == []


# --- a migration that rebuilds `runs`: the failure mode this guards against -------------

WIDEN_RUN_NAME = '''
"""Widen runs.name (a rebuild of `runs` on SQLite).

Revision ID: 9001
Revises: {head}
"""
import sqlalchemy as sa
from alembic import op

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:  # SQLite: copy, DROP TABLE runs, rename
        batch.alter_column("name", type_=sa.String(length=300), existing_type=sa.String(length=200),
                           existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("name", type_=sa.String(length=200), existing_type=sa.String(length=300),
                           existing_nullable=False)
'''

ORPHAN_RUNS = '''
"""A broken migration: deletes a run (foreign keys are off) and leaves its results dangling.

Revision ID: 9002
Revises: {head}
"""
from alembic import op

revision = "9002"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM runs WHERE id = 1")


def downgrade() -> None:
    pass
'''

FAILS_HALF_WAY = '''
"""A migration that rebuilds `runs`, then fails.

Revision ID: 9003
Revises: {head}
"""
import sqlalchemy as sa
from alembic import op

revision = "9003"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("runs", recreate="always" if sqlite else "auto") as batch:  # a rebuild on SQLite
        batch.add_column(sa.Column("extra", sa.Integer(), nullable=True))
    op.execute("UPDATE runs SET name = 'changed'")
    raise RuntimeError("boom, half-way")


def downgrade() -> None:
    pass
'''


@pytest.fixture
def extra_migration(tmp_path, monkeypatch):
    """Install the packaged migrations plus one more (its source given) in a temp folder."""

    def _install(source: str, name: str) -> str:
        target = tmp_path / "migrations"
        shutil.copytree(migrate.MIGRATIONS_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
        (target / "versions" / f"{name}.py").write_text(textwrap.dedent(source).format(head=head_revision()))
        monkeypatch.setattr(migrate, "MIGRATIONS_DIR", target)
        return migrate.head_revision()

    return _install


def test_a_migration_that_rebuilds_runs_keeps_every_child_row(db_url, extra_migration) -> None:
    before = build(db_url, head_revision())
    new_head = extra_migration(WIDEN_RUN_NAME, "9001_widen_run_name")
    assert new_head == "9001"
    assert init_db(db_url) == "9001"
    assert_kept(db_url, before)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        name = next(c for c in inspect(conn).get_columns("runs") if c["name"] == "name")
        assert name["type"].length == 300
        fks = {fk["referred_table"] for t in ("probe_results", "jobs") for fk in inspect(conn).get_foreign_keys(t)}
        assert "runs" in fks  # children still reference runs
    engine.dispose()


def test_without_the_fix_that_migration_would_cascade(sqlite_url, extra_migration) -> None:
    """The hazard is real: the same migration on a plain connection with foreign keys ON (the
    old init_db) empties the result tables. Guards the test above against passing vacuously."""
    from alembic import command

    before = build(sqlite_url, head_revision())
    extra_migration(WIDEN_RUN_NAME, "9001_widen_run_name")
    engine = make_engine(sqlite_url)  # foreign_keys=ON on every connection
    with engine.connect() as conn:
        cfg = migrate.alembic_config(sqlite_url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()
    with engine.connect() as conn:
        lost = conn.execute(text("SELECT count(*) FROM probe_results")).scalar_one()
    engine.dispose()
    assert before.counts["probe_results"] > 0 and lost == 0


def test_a_migration_leaving_dangling_references_is_rolled_back(sqlite_url, extra_migration) -> None:
    before = build(sqlite_url, head_revision())
    old_head = head_revision()
    extra_migration(ORPHAN_RUNS, "9002_orphan_runs")
    with pytest.raises(MigrationError, match="missing parents"):
        init_db(sqlite_url)
    assert database_revision(sqlite_url) == old_head
    assert_kept(sqlite_url, before)


def test_a_migration_failing_half_way_leaves_the_database_as_it_was(db_url, extra_migration) -> None:
    before = build(db_url, head_revision())
    old_head = head_revision()
    extra_migration(FAILS_HALF_WAY, "9003_fails")
    with pytest.raises(RuntimeError, match="half-way"):
        init_db(db_url)
    assert database_revision(db_url) == old_head
    assert_kept(db_url, before)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert "extra" not in {c["name"] for c in inspect(conn).get_columns("runs")}
        assert "_alembic_tmp_runs" not in inspect(conn).get_table_names()
    engine.dispose()


def test_sqlite_foreign_keys_are_back_on_for_the_application(sqlite_url) -> None:
    build(sqlite_url, PAST[0])
    init_db(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


# --- `layerscope db upgrade`: a backup first, and it says where -------------------------------


@pytest.fixture
def cli_db(tmp_path, monkeypatch):
    from store.settings import get_settings

    db = tmp_path / "cli.db"
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{db}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    get_settings.cache_clear()
    yield db
    get_settings.cache_clear()


def test_db_upgrade_backs_up_a_sqlite_file_first_and_says_where(cli_db, capsys) -> None:
    from backend.cli import main

    url = f"sqlite:///{cli_db}"
    before = build(url, PAST[0])
    assert main(["db", "upgrade"]) == 0
    out = capsys.readouterr()
    backups = sorted(cli_db.parent.glob("cli.db.bak-*"))
    assert len(backups) == 1, out
    backup = backups[0]
    assert str(backup) in out.out + out.err
    assert f"at revision {head_revision()}" in out.out
    assert PAST[0] in backup.name
    # the backup is the database as it was: old revision, same rows
    backup_url = f"sqlite:///{backup}"
    assert database_revision(backup_url) == PAST[0]
    assert_kept(backup_url, before)
    assert_kept(url, before)
    # at head already: nothing to do, no second backup
    assert main(["db", "upgrade"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert len(list(cli_db.parent.glob("cli.db.bak-*"))) == 1


def test_db_upgrade_of_a_new_database_needs_no_backup(cli_db, capsys) -> None:
    from backend.cli import main

    assert main(["db", "upgrade"]) == 0
    out = capsys.readouterr().out
    assert f"at revision {head_revision()}" in out and "backup" not in out
    assert not list(cli_db.parent.glob("cli.db.bak-*"))


def test_db_upgrade_failure_is_one_line_naming_the_backup(cli_db, capsys, extra_migration) -> None:
    from backend.cli import main

    url = f"sqlite:///{cli_db}"
    before = build(url, head_revision())
    extra_migration(ORPHAN_RUNS, "9002_orphan_runs")
    assert main(["db", "upgrade"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("layerscope: error: "), err
    backup = next(cli_db.parent.glob("cli.db.bak-*"))
    assert str(backup) in err[0] and "unchanged" in err[0]
    assert_kept(url, before)


def test_backup_copies_a_wal_database_consistently(tmp_path) -> None:
    """Rows still in the WAL (not checkpointed) are in the backup."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    init_db(url)
    engine = make_engine(url)
    conn = engine.connect()  # held open: the WAL is not checkpointed away
    conn.execute(
        text(
            "INSERT INTO views (slug, title, page, state, created_at) "
            "VALUES ('s1', 't', '/curves', '{}', '2026-01-01 00:00:00')"
        )
    )
    conn.commit()
    backup = migrate.backup_sqlite(url)
    conn.close()
    engine.dispose()
    assert backup is not None and backup.exists()
    raw = create_engine(f"sqlite:///{backup}")
    with raw.connect() as c:
        assert c.execute(select(text("slug")).select_from(text("views"))).scalars().all() == ["s1"]
    raw.dispose()
    assert migrate.backup_sqlite("postgresql+psycopg://x@127.0.0.1/none") is None
    assert migrate.backup_sqlite(f"sqlite:///{tmp_path / 'missing.db'}") is None
    assert isinstance(backup, Path)
