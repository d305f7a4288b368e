"""Opening the results database at start-up (``layerscope serve``, ``worker``, ``db upgrade``
and every other command that touches it), with failures turned into one clear sentence.

:func:`open_database` checks what can be checked before connecting (``LAYERSCOPE_HOME`` is a
folder, the URL's scheme is one we support), then migrates, and explains the failures a user
can meet: a file that is not an SQLite database (garbage, truncated), a database at a
revision this version does not know (made by a newer layerscope), an unreachable server.
Each becomes a :class:`StartupError` whose message names the file or URL and what to do.
"""

from __future__ import annotations

from pathlib import Path

from store.settings import Settings

SUPPORTED_DATABASES = ("sqlite", "postgresql")


class StartupError(Exception):
    """A database or configuration problem found at start-up; ``str()`` is the one line to show."""


def redact(url: str) -> str:
    """``url`` with its password hidden (shown as given when it does not parse)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given
        return url


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_folders(settings: Settings) -> None:
    """``LAYERSCOPE_HOME`` (and ``LAYERSCOPE_STORE_DIR``) must be folders, or not exist yet."""
    for name, path in (("LAYERSCOPE_HOME", settings.home), ("LAYERSCOPE_STORE_DIR", settings.store_dir)):
        if path is not None and Path(path).exists() and not Path(path).is_dir():
            raise StartupError(
                f"{name}={path} is a file, not a folder: point {name} at a folder (it is created when missing)"
            )


def check_db_url(url: str) -> None:
    """The URL parses and names a database layerscope supports (SQLite, PostgreSQL)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError as exc:
        raise StartupError(
            f"LAYERSCOPE_DB_URL {url!r} is not a database URL ({exc}): use "
            "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from None
    if backend not in SUPPORTED_DATABASES:
        raise StartupError(
            f"unsupported database {backend!r} in LAYERSCOPE_DB_URL ({redact(url)}): layerscope "
            "stores results in SQLite or PostgreSQL; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        )


def explain(exc: BaseException, url: str) -> StartupError:
    """The one-line :class:`StartupError` for ``exc`` raised while opening/migrating ``url``."""
    from alembic.util import CommandError
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DatabaseError, OperationalError

    where = redact(url)
    message = _first_line(exc)
    if isinstance(exc, CommandError) or "revision" in message.lower():
        return StartupError(
            f"the database {where} is at a schema revision this version of layerscope does not "
            f"know ({message}); it was probably made by a newer layerscope: upgrade layerscope, "
            "or set LAYERSCOPE_DB_URL to another database"
        )
    is_sqlite = url.startswith("sqlite")
    if isinstance(exc, DatabaseError) and not isinstance(exc, OperationalError) and is_sqlite:
        path = make_url(url).database
        return StartupError(
            f"{path} is not a readable SQLite database ({message}): move it aside (a new one is "
            "created on the next start) or restore it from a backup"
        )
    if isinstance(exc, OperationalError):
        return StartupError(
            f"database not reachable ({where}): {message}; check LAYERSCOPE_DB_URL and that "
            "the database server is running"
        )
    if isinstance(exc, OSError):
        return StartupError(
            f"cannot use {getattr(exc, 'filename', None) or where}: "
            f"{exc.strerror or message}; check LAYERSCOPE_HOME / LAYERSCOPE_DB_URL"
        )
    return StartupError(f"cannot open the database {where}: {type(exc).__name__}: {message}")


def latest_backup(path: Path) -> Path | None:
    """The newest ``<file>.bak-*`` next to ``path`` (``layerscope db upgrade`` makes them)."""
    backups = sorted(path.parent.glob(f"{path.name}.bak-*"), key=lambda p: p.stat().st_mtime)
    return backups[-1] if backups else None


def quick_check(path: Path, seconds: float) -> list[str] | None:
    """SQLite's ``PRAGMA quick_check`` on the file at ``path``, read-only, stopped after
    ``seconds`` (a progress handler interrupts it). Returns the problems found ([] when the file
    is sound), or None when the time ran out first. Raises ``sqlite3.DatabaseError`` for a file
    that is not a database at all, ``sqlite3.OperationalError`` for one that cannot be opened."""
    import sqlite3
    import time

    deadline = time.monotonic() + seconds
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
        try:
            rows = con.execute("PRAGMA quick_check(20)").fetchall()
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc).lower():
                return None
            raise
    finally:
        con.close()
    found = [line for r in rows for line in str(r[0]).splitlines() if line.strip() and not line.startswith("***")]
    return [] if found == ["ok"] else found


def check_integrity(settings: Settings, url: str) -> None:
    """Refuse a corrupt SQLite file at start-up (``LAYERSCOPE_CHECK_INTEGRITY=0`` skips this):
    one line naming the file, the first problem, and the backup to restore."""
    import logging
    import sqlite3

    from sqlalchemy.engine import make_url

    if not settings.check_integrity or make_url(url).get_backend_name() != "sqlite":
        return
    database = make_url(url).database
    if not database or database == ":memory:" or not Path(database).is_file() or Path(database).stat().st_size == 0:
        return
    path = Path(database)
    try:
        problems = quick_check(path, settings.integrity_check_seconds)
    except sqlite3.OperationalError:  # cannot open it (permissions, a lock): migrating explains that
        return
    except sqlite3.DatabaseError as exc:  # not a database at all (garbage, a wrong header)
        raise StartupError(
            f"{path} is not a readable SQLite database ({_first_line(exc)}): move it aside (a new "
            "one is created on the next start) or restore it from a backup"
        ) from exc
    if problems is None:
        logging.getLogger(__name__).warning(
            "integrity check of %s stopped after %.0f s (a large file); serving it unchecked "
            "(LAYERSCOPE_INTEGRITY_CHECK_SECONDS sets the limit)",
            path,
            settings.integrity_check_seconds,
        )
        return
    if problems:
        backup = latest_backup(path)
        restore = (
            f"restore the backup {backup} (copy it over {path})"
            if backup
            else f"no backup ({path.name}.bak-*) is next to it: restore one of your own, or move the file aside "
            "(a new, empty one is created on the next start)"
        )
        raise StartupError(
            f"{path} is corrupt (PRAGMA quick_check: {problems[0]}); {restore}; "
            "LAYERSCOPE_CHECK_INTEGRITY=0 starts without this check"
        )


def open_database(settings: Settings) -> str:
    """Check the folders and URL of ``settings``, then migrate the results database to the newest
    schema (``store.migrate.init_db``); return its revision.

    Raises:
        StartupError: one line naming the file or URL and what to do.
    """
    from store.migrate import init_db

    check_folders(settings)
    url = settings.resolved_db_url
    check_db_url(url)
    check_integrity(settings, url)
    try:
        return init_db(url)
    except Exception as exc:  # every failure at start-up becomes one clear line
        raise explain(exc, url) from exc
