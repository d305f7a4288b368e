"""Migration 0004 (runs.made_with): runs from before keep NULL (their code was not recorded),
nothing else changes, and the downgrade removes the column, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from store.migrate import database_revision, head_revision, init_db
from store.session import make_engine
from tests.fixtures.populated_db import populate
from tests.test_db_migration_0003 import _downgrade


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def test_runs_from_before_keep_null_made_with_and_the_downgrade_removes_it(db_url) -> None:
    init_db(db_url, revision="0003")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
        n_runs = conn.execute(text("SELECT count(*) FROM runs")).scalar()
    engine.dispose()
    assert n_runs > 0 and init_db(db_url) == head_revision()
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs WHERE made_with IS NULL")).scalar() == n_runs
    engine.dispose()
    _downgrade(db_url, "0003")
    assert database_revision(db_url) == "0003"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert "made_with" not in {c["name"] for c in inspect(conn).get_columns("runs")}
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == n_runs
    engine.dispose()
    assert init_db(db_url) == head_revision()
