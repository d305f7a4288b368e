"""What every page reads of ``runs`` comes from the index ``ix_runs_read`` on SQLite, not from the
rows, whose columns past ``loss_curve`` cost a walk through megabytes of overflow pages."""

from __future__ import annotations

from sqlalchemy import select, text

from backend.api import across_seeds, queries
from backend.api.across_seeds import RUN_FIELDS, ResultCache
from store.models import Run


def _plan(session, query) -> str:
    sql = str(query.compile(session.get_bind(), compile_kwargs={"literal_binds": True}))
    return " | ".join(str(r[-1]) for r in session.execute(text("EXPLAIN QUERY PLAN " + sql)))


def test_the_aggregates_runs_and_the_suite_counts_read_the_index(db_factory) -> None:
    _, factory = db_factory
    with factory() as s:
        for flt in (
            queries.RunFilter(suite=["paper"]),
            queries.RunFilter(trained=True),
            queries.RunFilter(controls="only"),
        ):
            assert "COVERING INDEX ix_runs_read" in _plan(s, flt.apply(select(*RUN_FIELDS)))
        suites = select(
            Run.suite, Run.id, Run.heldout_acc, Run.early_stop_acc, Run.status, Run.config_hash, Run.control
        )
        assert "COVERING INDEX ix_runs_read" in _plan(s, suites.where(Run.suite.is_not(None)).order_by(Run.suite))


def test_the_cache_fingerprint_reads_created_at_from_its_index(db_factory) -> None:
    from sqlalchemy import func

    _, factory = db_factory
    with factory() as s:
        assert "ix_runs_created_at" in _plan(s, select(func.max(Run.created_at)))
        assert ResultCache.fingerprint(s) == (None, None, None, None, 0, None)


def test_probe_table_joins_the_runs_it_read(api) -> None:
    from tests.conftest import seed_runs

    ids = seed_runs(api.factory)
    with api.factory() as s:
        rows = across_seeds.probe_table(s, queries.RunFilter(), [40])
        trained = across_seeds.probe_table(s, queries.RunFilter(trained=True), [40])
    assert {r[0] for r in rows} <= set(ids) and rows
    assert all(r[7] == 40 for r in rows) and {r[0] for r in trained} <= {r[0] for r in rows}
    assert all(r[10] for r in trained)
