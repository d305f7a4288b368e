"""Migration 0006 (tags and notes on runs and suites, views.created_by): every run and result
row survives (no rebuild of ``runs``), the new columns start empty, and the downgrade removes
them, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from store.migrate import database_revision, init_db
from store.session import make_engine
from tests.fixtures.populated_db import populate
from tests.test_db_migration_0003 import _downgrade


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _counts(conn) -> dict[str, int]:
    return {
        t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar()
        for t in ("runs", "probe_results", "intervention_results", "patching_results")
    }


def test_0006_keeps_every_row_and_the_downgrade_removes_its_columns(db_url) -> None:
    init_db(db_url, revision="0004")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
        before = _counts(conn)
    engine.dispose()
    assert before["runs"] > 0 and before["probe_results"] > 0
    assert init_db(db_url, revision="0006") == "0006"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert _counts(conn) == before
        assert (
            conn.execute(text("SELECT count(*) FROM runs WHERE tags IS NULL AND notes IS NULL")).scalar()
            == before["runs"]
        )
        assert "suite_notes" in inspect(conn).get_table_names()
        assert "created_by" in {c["name"] for c in inspect(conn).get_columns("views")}
    engine.dispose()
    _downgrade(db_url, "0004")
    assert database_revision(db_url) == "0004"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        cols = {c["name"] for c in inspect(conn).get_columns("runs")}
        assert not {"tags", "notes"} & cols
        assert "suite_notes" not in inspect(conn).get_table_names()
        assert _counts(conn) == before
    engine.dispose()
