"""Engine and session factory: SQLite (WAL, busy timeout) by default, Postgres in the lab."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import CursorResult, Engine, Result, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str) -> Engine:
    """Create an engine for ``url``; SQLite gets WAL and a busy timeout so readers and a
    writing worker never see "database is locked"."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A transaction: commit on success, roll back on any error (no half-written rows)."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def rows_matched(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched (its ``rowcount``). ``Session.execute`` types its
    answer as a ``Result``; for such a statement it is a ``CursorResult``, which counts them.

    Raises:
        TypeError: ``result`` is not a statement's cursor result (a SELECT's, say).
    """
    if not isinstance(result, CursorResult):
        raise TypeError(f"rows_matched needs an UPDATE or DELETE result, got {type(result).__name__}")
    return result.rowcount
