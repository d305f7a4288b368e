"""Alembic environment: runs against the connection handed over by ``init_db`` (or a URL)."""

from __future__ import annotations

from alembic import context

from store.models import Base
from store.session import make_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from store.settings import get_settings

    return get_settings().resolved_db_url


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # ALTER TABLE via copy on SQLite
        compare_type=True,
    )


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=_url().startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = _url()
    if url.startswith("sqlite"):
        # `alembic -c store/alembic.ini upgrade head` from a shell: the same safety as init_db
        # (foreign keys off, one transaction, foreign_key_check before commit).
        from store.migrate import sqlite_migration_connection

        with sqlite_migration_connection(url) as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
        return
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
