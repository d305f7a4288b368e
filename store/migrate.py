"""Schema migrations: ``init_db(url)`` runs ``alembic upgrade head`` programmatically.

Works on SQLite and Postgres. Several processes may start at once (the API and its workers),
so the upgrade is serialised: a Postgres advisory lock, or a lock file next to a SQLite DB.

SQLite needs care: its ``ALTER TABLE`` is so limited that Alembic's batch mode
rebuilds a table (copy, ``DROP TABLE``, rename), and with ``PRAGMA foreign_keys=ON`` that
``DROP TABLE runs`` silently fires every ``ON DELETE CASCADE`` / ``SET NULL`` of its children —
every probe, intervention and patching row gone. So a SQLite migration runs on its own
connection where

1. ``PRAGMA foreign_keys=OFF`` is set when the connection opens, before any transaction (inside
   one the pragma is a silent no-op), and checked;
2. the whole upgrade is ONE explicit transaction (``BEGIN IMMEDIATE``; pysqlite would otherwise
   commit DDL statement by statement), so a failure leaves the database as it was;
3. ``PRAGMA foreign_key_check`` runs before the commit: a migration that leaves a dangling
   reference is rolled back with :class:`MigrationError`, never committed;
4. foreign keys are switched back on after the commit.

``layerscope db upgrade`` also copies a SQLite file to a timestamped backup
(:func:`backup_sqlite`) before it changes anything. Every migration must pass
``tests/test_db_upgrade.py`` (a populated database at every past revision, upgraded to head on
SQLite and PostgreSQL, keeps every row and the checksum of its data): see
``store/migrations/README.md``.
"""

from __future__ import annotations

import fcntl
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, event, inspect, text
from sqlalchemy.engine import make_url

from store.session import make_engine

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
ALEMBIC_INI = PACKAGE_DIR / "alembic.ini"
MIGRATIONS_DIR = PACKAGE_DIR / "migrations"
_PG_LOCK_KEY = 0x1A7E55C0  # arbitrary, constant: "layerscope migrations"


class MigrationError(RuntimeError):
    """A migration was refused or rolled back; the database is as it was before it."""


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged migrations and ``url``."""
    cfg = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = script.get_current_head()
    assert head is not None
    return head


def revisions() -> list[str]:
    """Every revision of the packaged migrations, oldest first."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def database_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (None: empty, new, or made without Alembic)."""
    if _is_sqlite(url) and not _sqlite_has_file(url):
        return None
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        engine.dispose()


def _is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def _sqlite_path(url: str) -> Path | None:
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _sqlite_has_file(url: str) -> bool:
    path = _sqlite_path(url)
    return path is None or (path.exists() and path.stat().st_size > 0)


@contextmanager
def _sqlite_file_lock(url: str) -> Iterator[None]:
    path = _sqlite_path(url)
    if path is None:
        yield
        return
    lock_path = Path(str(path) + ".migrate.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- SQLite: foreign keys off, one explicit transaction, foreign_key_check before commit ------


def sqlite_migration_engine(url: str) -> Engine:
    """An engine for migrating a SQLite DB: every connection opens with ``foreign_keys=OFF``
    (set outside any transaction, where SQLite honours it) and the driver's implicit
    transaction handling off, so ``begin`` is a real ``BEGIN IMMEDIATE`` that DDL joins."""
    engine = make_engine(url)  # WAL + busy timeout (its listener also turns foreign keys on ...)

    @event.listens_for(engine, "connect")
    def _migration_pragmas(dbapi_conn, _record):  # runs after make_engine's listener
        dbapi_conn.isolation_level = None  # pysqlite: no implicit BEGIN/COMMIT around statements
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=OFF")  # ... and off here, before any transaction
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock now (waits busy_timeout)

    return engine


def sqlite_foreign_keys_enabled(conn: Connection) -> bool:
    return bool(conn.exec_driver_sql("PRAGMA foreign_keys").scalar())


def sqlite_foreign_key_violations(conn: Connection, limit: int = 20) -> list[tuple]:
    """Rows of ``PRAGMA foreign_key_check``: (table, rowid, parent table, fk index)."""
    return [tuple(r) for r in conn.exec_driver_sql("PRAGMA foreign_key_check").fetchmany(limit)]


def check_sqlite_foreign_keys(conn: Connection) -> None:
    """Raise :class:`MigrationError` if any row references a missing parent (run inside the
    migration's transaction, before it commits)."""
    bad = sqlite_foreign_key_violations(conn)
    if bad:
        shown = ", ".join(f"{t} row {rowid} → missing {parent}" for t, rowid, parent, *_ in bad[:5])
        raise MigrationError(
            f"the migration would leave rows pointing at missing parents ({shown}"
            f"{', …' if len(bad) > 5 else ''}): rolled back, the database is unchanged"
        )


@contextmanager
def sqlite_migration_connection(url: str) -> Iterator[Connection]:
    """A connection in one open transaction with foreign keys off. On leaving without an error
    the foreign keys are checked, the transaction committed, and foreign keys switched back on;
    on an error everything is rolled back."""
    engine = sqlite_migration_engine(url)
    try:
        with engine.connect() as conn:
            conn.begin()
            try:
                if sqlite_foreign_keys_enabled(conn):  # never migrate with cascades armed
                    raise MigrationError("could not switch SQLite foreign keys off for the migration")
                yield conn
                check_sqlite_foreign_keys(conn)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            # back on, outside any transaction (the driver connection: SQLAlchemy would BEGIN first)
            raw = conn.connection.driver_connection
            assert raw is not None  # an open connection has its driver's
            raw.execute("PRAGMA foreign_keys=ON")
            assert raw.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        engine.dispose()


# --- upgrade --------------------------------------------------------------------------------


def _upgrade_on(conn: Connection, cfg: Config, url: str, revision: str) -> str | None:
    cfg.attributes["connection"] = conn
    tables = set(inspect(conn).get_table_names())
    if "runs" in tables and "alembic_version" not in tables:
        log.warning("database at %s has tables but no alembic_version: stamping head", url)
        command.stamp(cfg, "head")
    else:
        command.upgrade(cfg, revision)
    return current_revision(conn)


def init_db(url: str | None = None, *, revision: str = "head") -> str:
    """Bring the database at ``url`` (default: settings) to the newest schema; return the revision.

    A database whose tables were made by ``Base.metadata.create_all`` (no ``alembic_version``)
    is stamped at head instead of re-created. On SQLite the upgrade runs with foreign keys off,
    in one transaction, checked with ``PRAGMA foreign_key_check`` before it commits.
    ``revision``: upgrade only that far (the upgrade tests build databases at past revisions).
    """
    if url is None:
        from store.settings import get_settings

        url = get_settings().resolved_db_url
    cfg = alembic_config(url)
    head = ScriptDirectory.from_config(cfg).get_current_head()
    if _is_sqlite(url):
        with _sqlite_file_lock(url):
            if revision == "head" and head is not None and _sqlite_has_file(url) and database_revision(url) == head:
                return head  # nothing to do: take no write lock (workers may be writing)
            with sqlite_migration_connection(url) as conn:
                rev = _upgrade_on(conn, cfg, url, revision)
        assert rev is not None
        return rev
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
            conn.commit()
            try:
                rev = _upgrade_on(conn, cfg, url, revision)  # PostgreSQL: transactional DDL, constraints enforced
                conn.commit()
            finally:
                conn.rollback()
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
                conn.commit()
    finally:
        engine.dispose()
    assert rev is not None
    return rev


def backup_sqlite(url: str, *, now: datetime | None = None) -> Path | None:
    """Copy the SQLite database at ``url`` to ``<file>.bak-<UTC timestamp>-<revision>`` next to
    it (SQLite's online backup: a consistent copy even while a worker writes) and return the
    copy's path; None when ``url`` is not a SQLite file or the file does not exist yet."""
    if not _is_sqlite(url):
        return None
    path = _sqlite_path(url)
    if path is None or not path.exists() or path.stat().st_size == 0:
        return None
    rev = database_revision(url) or "unversioned"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.bak-{stamp}-{rev}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{stamp}-{rev}.{n}")
        n += 1
    src = sqlite3.connect(str(path), timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    return target
