"""Migration 0013 (``intervention_results.refit_line``): every row stored before it keeps its
values and reads NULL (a measurement version 1 row, judged at ``refit_majority`` + 2 pp), and the
downgrade removes the column, on SQLite and PostgreSQL."""

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


def _rows(conn) -> list[tuple]:
    return conn.execute(text("SELECT id, refit_acc, refit_majority FROM intervention_results ORDER BY id")).all()


def test_0013_adds_a_null_refit_line_and_the_downgrade_removes_it(db_url) -> None:
    init_db(db_url, revision="0012")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
        before = _rows(conn)
    engine.dispose()
    assert before
    assert init_db(db_url, revision="0013") == "0013"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert _rows(conn) == before
        lines = conn.execute(text("SELECT DISTINCT refit_line FROM intervention_results")).scalars().all()
        assert lines == [None]
    engine.dispose()
    _downgrade(db_url, "0012")
    assert database_revision(db_url) == "0012"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert "refit_line" not in {c["name"] for c in inspect(conn).get_columns("intervention_results")}
        assert _rows(conn) == before
    engine.dispose()
