"""Migration 0012 (loss curves in ``run_curves``): the upgrade moves every run's curve out of
``runs``, unchanged, and the downgrade puts each back (``[]`` for a run left without one) and
drops the table, on SQLite and PostgreSQL; on SQLite the column returns to its old place. The
application reads and writes a curve through ``Run.loss_curve`` as before, and deleting a run
deletes its curve."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, text

from store.migrate import database_revision, init_db
from store.session import make_engine, make_sessionmaker
from tests.fixtures.populated_db import populate
from tests.test_db_migration_0003 import _downgrade


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _curve_sql(conn) -> str:
    """The curve column as text on either database."""
    return "CAST(loss_curve AS TEXT)" if conn.dialect.name == "postgresql" else "loss_curve"


def _curves(conn, table: str, key: str) -> dict[int, list]:
    rows = conn.execute(text(f"SELECT {key}, {_curve_sql(conn)} FROM {table} ORDER BY {key}")).all()
    return {k: json.loads(v) for k, v in rows}


def _columns(conn, table: str) -> list[str]:
    return [c["name"] for c in inspect(conn).get_columns(table)]


def test_0012_moves_each_curve_to_run_curves_and_the_downgrade_puts_it_back(db_url) -> None:
    init_db(db_url, revision="0011")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        populate(conn)
        # a long curve (SQLite stores it in overflow pages) and an empty one travel as they are
        long = [{"step": s, "loss": 1.0 / (s + 1), "heldout_token_acc": None} for s in range(20_000)]
        conn.execute(text("UPDATE runs SET loss_curve = :c WHERE id = 1"), {"c": json.dumps(long)})
        conn.execute(text("UPDATE runs SET loss_curve = '[]' WHERE id = 2"))
        before = _curves(conn, "runs", "id")
        order = _columns(conn, "runs")
        n_runs = conn.execute(text("SELECT count(*) FROM runs")).scalar()
    engine.dispose()
    assert before[1] == long and before[2] == [] and len(before) == n_runs > 2

    assert init_db(db_url, revision="0012") == "0012"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert "loss_curve" not in _columns(conn, "runs")
        assert _curves(conn, "run_curves", "run_id") == before
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == n_runs
        assert {ix["name"] for ix in inspect(conn).get_indexes("runs")} >= {"ix_runs_read", "ix_runs_created_at"}
    with engine.begin() as conn:  # a run whose curve row is gone reads [] after the downgrade
        conn.execute(text("DELETE FROM run_curves WHERE run_id = 3"))
    engine.dispose()

    _downgrade(db_url, "0011")
    assert database_revision(db_url) == "0011"
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert "run_curves" not in inspect(conn).get_table_names()
        assert _curves(conn, "runs", "id") == {**before, 3: []}
        if conn.dialect.name == "sqlite":
            assert _columns(conn, "runs") == order  # back after stopped_early
        else:
            assert sorted(_columns(conn, "runs")) == sorted(order)
        default = next(c for c in inspect(conn).get_columns("runs") if c["name"] == "loss_curve")["default"]
        assert default is None  # as 0001 made it
    engine.dispose()
    assert init_db(db_url) is not None  # and up again
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert _curves(conn, "run_curves", "run_id") == {**before, 3: []}
    engine.dispose()


def test_run_loss_curve_reads_and_writes_run_curves_and_goes_with_its_run(sqlite_url) -> None:
    from backend.housekeeping import delete_runs
    from store.models import Run, RunCurve
    from worker import persist

    init_db(sqlite_url)
    factory = make_sessionmaker(make_engine(sqlite_url))
    base = dict(family="lstm", task="parity", seed=0, n_layers=1, d_model=8, n_params=1)
    with factory() as s:
        a = persist.save_run(s, name="a", config_hash="a", loss_curve=[{"step": 1, "loss": 2.0}], **base)
        b = persist.save_run(s, name="b", config_hash="b", **base)  # no curve given
        s.add(Run(name="c", config_hash="c", loss_curve=[{"step": 5, "loss": 0.5}], **base))
        s.commit()
        c = s.query(Run.id).filter(Run.name == "c").scalar()
    with factory() as s:
        assert s.get(Run, a).loss_curve == [{"step": 1, "loss": 2.0}]
        assert s.get(Run, b).loss_curve == [] and s.get(Run, b).curve is None
        assert s.get(Run, c).loss_curve == [{"step": 5, "loss": 0.5}]
        # saved again with a new curve: replaced; saved again without one: kept
        persist.save_run(s, name="a", config_hash="a", loss_curve=[{"step": 9, "loss": 0.1}], **base)
        persist.save_run(s, name="a2", config_hash="a", **base)
        run = s.get(Run, a)
        assert run.name == "a2" and run.loss_curve == [{"step": 9, "loss": 0.1}]
        run.loss_curve = [{"step": 10, "loss": 0.05}]  # through the ORM
        s.commit()
    with factory() as s:
        assert s.get(Run, a).loss_curve == [{"step": 10, "loss": 0.05}]
        assert s.query(RunCurve).count() == 2
        delete_runs(s, [a], None)
        assert s.query(RunCurve.run_id).all() == [(c,)]
        s.delete(s.get(Run, c))
        s.commit()
        assert s.query(RunCurve).count() == 0
