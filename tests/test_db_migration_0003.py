"""Migration 0003 (measure_settings): existing result rows keep settings_id NULL after the
upgrade, and the downgrade undoes it, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, text

from store import migrate
from store.migrate import database_revision, head_revision, init_db
from store.session import make_engine
from tests.fixtures.populated_db import populate

RESULTS = ("probe_results", "intervention_results", "patching_results")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _downgrade(url: str, revision: str) -> None:
    cfg = migrate.alembic_config(url)
    if url.startswith("sqlite"):
        with migrate.sqlite_migration_connection(url) as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
        return
    engine = make_engine(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
    engine.dispose()


def test_rows_from_before_keep_null_settings_and_the_downgrade_undoes_it(db_url) -> None:
    init_db(db_url, revision="0002")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
    engine.dispose()
    assert init_db(db_url) == head_revision()
    engine = make_engine(db_url)
    with engine.connect() as conn:
        for table in RESULTS:
            assert conn.execute(text(f"SELECT count(*) FROM {table} WHERE settings_id IS NOT NULL")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM measure_settings")).scalar() == 0
    engine.dispose()
    _downgrade(db_url, "0002")  # (from head: later migrations are undone too)
    assert database_revision(db_url) == "0002"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        insp = inspect(conn)
        assert "measure_settings" not in insp.get_table_names()
        assert all("settings_id" not in {c["name"] for c in insp.get_columns(t)} for t in RESULTS)
    engine.dispose()
    assert init_db(db_url) == head_revision()
