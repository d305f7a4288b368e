"""Database failures at request time, answered as what they are instead of a bare 500.

A request that meets a corrupt SQLite file, a full disk, or a PostgreSQL server that is down
gets one JSON ``detail`` sentence saying which, with the status a client can act on:

- 503 + ``Retry-After``: the database is unreachable, or busy (locked): try again later;
- 507 Insufficient Storage: the disk (or the database's quota) is full: free space, then retry;
- 503: the database file is corrupt (``database disk image is malformed``): restore a backup.

The classification reads the DB-API error (sqlite3 / psycopg), so it holds for both backends.
"""

from __future__ import annotations

import errno
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request
from fastapi.responses import JSONResponse

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
FULL_BELOW_BYTES = 1 << 20  # a disk with less free space than this counts as full

_CORRUPT = ("database disk image is malformed", "file is not a database", "file is encrypted or is not a database")
_FULL = ("database or disk is full", "no space left on device", "disk full", "could not extend file", "quota exceeded")
_BUSY = ("database is locked", "database table is locked")
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "connection timed out",
    "terminating connection",
    "the database system is starting up",
    "the database system is shutting down",
    "connection is closed",
    "unable to open database file",
    "no route to host",
    "name or service not known",
    "connection reset",
    "ssl syscall error",
    "consuming input failed",
)


@dataclass(frozen=True)
class DbFailure:
    """What a database exception means for a client: the HTTP status and the sentence to show."""

    status: int
    kind: str  # corrupt | disk_full | io_error | busy | unreachable
    detail: str

    @property
    def retry(self) -> bool:
        return self.kind in ("busy", "unreachable")


def _text(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()).lower()


def _disk_nearly_full(path: Path | None) -> bool:
    if path is None:
        return False
    try:
        return shutil.disk_usage(path.parent if path.parent.exists() else path).free < FULL_BELOW_BYTES
    except OSError:
        return False


def classify(exc: BaseException, db_file: Path | None = None) -> DbFailure | None:
    """The :class:`DbFailure` for a SQLAlchemy / DB-API / OS error, or None when it is not one of
    the kinds below (a bug: let it be a 500 with its traceback).

    ``db_file``: the SQLite file, when the database is one — SQLite reports a disk too full to
    create its WAL files as "disk I/O error"; with the file's disk (nearly) full that is one."""
    from sqlalchemy.exc import DBAPIError, DisconnectionError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    text = _text(exc)
    orig = getattr(exc, "orig", None)
    io_error = "disk i/o error" in text
    if (
        isinstance(exc, OSError)
        and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        or any(s in text for s in _FULL)
        or type(orig).__name__ == "DiskFull"
        or (io_error and _disk_nearly_full(db_file))
    ):
        return DbFailure(
            507,
            "disk_full",
            "the disk is full: the database cannot write (this change, or the files "
            "it needs to open); nothing was written; free space on the server and "
            "try again",
        )
    if any(s in text for s in _CORRUPT):
        return DbFailure(
            503,
            "corrupt",
            "the database file is corrupt (database disk image is malformed): stop "
            "the server and restore a backup (<file>.bak-* next to it, made by "
            "`layerscope db upgrade`)",
        )
    if io_error:
        return DbFailure(
            503,
            "io_error",
            "the database's disk failed a read or write (disk I/O error): check the "
            "disk and the server's log; nothing was written",
        )
    if any(s in text for s in _BUSY):
        return DbFailure(503, "busy", "the database is busy (locked by another writer); try again shortly")
    if (
        isinstance(exc, (DisconnectionError, PoolTimeout))
        or any(s in text for s in _UNREACHABLE)
        or (isinstance(exc, DBAPIError) and exc.connection_invalidated)
    ):
        return DbFailure(503, "unreachable", "the database is unreachable; try again after Retry-After seconds")
    return None


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return Path(u.database) if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:") else None


def failure_response(failure: DbFailure) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if failure.retry or failure.status == 507 else {}
    return JSONResponse(
        status_code=failure.status, content={"detail": failure.detail, "reason": failure.kind}, headers=headers
    )


async def on_database_error(request: Request, exc: Exception) -> JSONResponse:
    """The API's handler for SQLAlchemy errors and ENOSPC ``OSError``: a 503/507 with a
    ``detail`` for the kinds :func:`classify` knows; anything else is re-raised (a 500)."""
    failure = classify(exc, sqlite_file(request.app.state.settings.resolved_db_url))
    if failure is None:
        raise exc
    log.warning(
        "%s %s: %s (%s)",
        request.method,
        request.url.path,
        failure.kind,
        " ".join(str(getattr(exc, "orig", None) or exc).split())[:200],
    )
    return failure_response(failure)
