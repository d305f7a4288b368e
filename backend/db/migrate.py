"""Schema migrations: ``init_db(url)`` runs ``alembic upgrade head`` programmatically.

Works on SQLite and Postgres. Several processes may start at once (the API and its workers),
so the upgrade is serialised: a Postgres advisory lock, or a lock file next to a SQLite DB.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url

from backend.db.session import make_engine

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent.parent
ALEMBIC_INI = PACKAGE_DIR / "alembic.ini"
MIGRATIONS_DIR = PACKAGE_DIR / "migrations"
_PG_LOCK_KEY = 0x1A7E55C0  # arbitrary, constant: "layerscope migrations"


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


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


@contextmanager
def _sqlite_file_lock(url: str) -> Iterator[None]:
    database = make_url(url).database
    if not database or database == ":memory:":
        yield
        return
    lock_path = Path(database + ".migrate.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def init_db(url: str | None = None) -> str:
    """Bring the database at ``url`` (default: settings) to the newest schema; return the revision.

    A database whose tables were made by ``Base.metadata.create_all`` (no ``alembic_version``)
    is stamped at head instead of re-created.
    """
    if url is None:
        from backend.core.config import get_settings

        url = get_settings().resolved_db_url
    cfg = alembic_config(url)
    engine = make_engine(url)
    is_sqlite = engine.dialect.name == "sqlite"
    try:
        with _sqlite_file_lock(url) if is_sqlite else _noop():
            with engine.connect() as conn:
                if not is_sqlite:
                    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
                    conn.commit()
                try:
                    cfg.attributes["connection"] = conn
                    tables = set(inspect(conn).get_table_names())
                    if "runs" in tables and "alembic_version" not in tables:
                        log.warning("database at %s has tables but no alembic_version: stamping head", url)
                        command.stamp(cfg, "head")
                    else:
                        command.upgrade(cfg, "head")
                    conn.commit()
                    rev = current_revision(conn)
                finally:
                    if not is_sqlite:
                        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
                        conn.commit()
    finally:
        engine.dispose()
    assert rev is not None
    return rev


@contextmanager
def _noop() -> Iterator[None]:
    yield
