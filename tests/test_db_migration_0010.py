"""Migration 0010 (``measurement_version`` on result rows): every row stored before it keeps its
values and reads version 1 (the measurement code before versions were recorded), new rows
written by the worker read the current version, and the downgrade removes the column, on SQLite
and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from science.measurement_version import MEASUREMENT_VERSION
from store.migrate import database_revision, init_db
from store.session import make_engine, make_sessionmaker
from tests.fixtures.populated_db import populate
from tests.test_db_migration_0003 import _downgrade

TABLES = ("probe_results", "intervention_results", "patching_results")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _counts(conn) -> dict[str, int]:
    return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ("runs", *TABLES)}


def test_0010_gives_stored_rows_version_1_and_the_downgrade_removes_it(db_url) -> None:
    init_db(db_url, revision="0009")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
        before = _counts(conn)
        probe_acc = conn.execute(text("SELECT sum(accuracy) FROM probe_results")).scalar()
    engine.dispose()
    assert all(before[t] > 0 for t in TABLES)
    assert init_db(db_url, revision="0010") == "0010"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert _counts(conn) == before
        assert conn.execute(text("SELECT sum(accuracy) FROM probe_results")).scalar() == probe_acc
        for t in TABLES:
            versions = conn.execute(text(f"SELECT DISTINCT measurement_version FROM {t}")).scalars().all()
            assert versions == [1], t
    engine.dispose()
    _downgrade(db_url, "0009")
    assert database_revision(db_url) == "0009"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        for t in TABLES:
            assert "measurement_version" not in {c["name"] for c in inspect(conn).get_columns(t)}
        assert _counts(conn) == before
    engine.dispose()


def test_the_worker_writes_the_current_version_and_a_plain_row_without_one_too(sqlite_url) -> None:
    from worker import persist

    init_db(sqlite_url)
    factory = make_sessionmaker(make_engine(sqlite_url))
    with factory() as s:
        run_id = persist.save_run(
            s, name="r", family="lstm", task="parity", seed=0, n_layers=1, d_model=8, n_params=1, config_hash="h"
        )
        row = {
            "layer": 0,
            "eval_length": 40,
            "accuracy": 0.9,
            "majority_baseline": 0.5,
            "per_position": [],
            "n_train": 1,
            "n_test": 1,
            "converged": True,
            "n_iter": 3,
            "config_hash": "c",
        }
        persist.replace_probe_results(s, run_id, [row, {**row, "layer": 1, "measurement_version": 1}])
        got = dict(s.execute(text("SELECT layer, measurement_version FROM probe_results")).all())
    assert got == {0: MEASUREMENT_VERSION, 1: 1}
