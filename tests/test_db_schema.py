"""Migrations create exactly the ORM schema, on SQLite and Postgres; round trip of every table."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, select

from store.migrate import head_revision, init_db
from store.models import (
    ApiToken,
    Base,
    InterventionResult,
    Job,
    PatchingResult,
    ProbeResult,
    Run,
    SavedView,
)
from store.session import make_engine, make_sessionmaker, session_scope

TABLES = {"runs", "probe_results", "intervention_results", "patching_results", "jobs", "views", "api_tokens"}


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def test_init_db_creates_every_table_and_matches_models(db_url: str) -> None:
    assert init_db(db_url) == head_revision()
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) >= TABLES
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == [], f"migration and models differ: {diff}"
    assert init_db(db_url) == head_revision()  # idempotent


def test_init_db_stamps_a_create_all_database(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    Base.metadata.create_all(engine)
    assert init_db(sqlite_url) == head_revision()
    engine.dispose()


def test_round_trip_every_table(db_url: str) -> None:
    init_db(db_url)
    engine = make_engine(db_url)
    factory = make_sessionmaker(engine)
    with session_scope(factory) as s:
        run = Run(
            name="r",
            family="lstm",
            task="parity",
            seed=1,
            n_layers=4,
            d_model=128,
            n_params=830_000,
            config_hash="h" * 64,
            loss_curve=[{"step": 1, "loss": 0.5}],
            behaviour={"40": {"token_acc": 0.9}},
        )
        s.add(run)
        s.flush()
        s.add(
            ProbeResult(
                run_id=run.id,
                layer=-1,
                eval_length=40,
                accuracy=0.5,
                majority_baseline=0.5,
                per_position=[0.5, 0.6],
                n_train=8,
                n_test=2,
                converged=True,
                n_iter=3,
                config_hash="p",
            )
        )
        s.add(
            InterventionResult(
                run_id=run.id,
                method="mean",
                layer=0,
                eval_length=40,
                base_acc=0.9,
                edited_acc=0.5,
                delta_pp=-40.0,
                n_sequences=10,
                seed=0,
                config_hash="i",
            )
        )
        s.add(
            PatchingResult(
                run_id=run.id,
                layer=0,
                position=3,
                eval_length=40,
                recovery=1.0,
                ld_clean=2.0,
                ld_corrupted=-2.0,
                n_pairs=4,
                config_hash="q",
            )
        )
        s.add(Job(kind="train", params={"family": "lstm"}, config_hash="c", run_id=run.id))
        s.add(SavedView(slug="abc", title="<b>t</b>", page="/curves", state={"task": ["parity"]}))
        s.add(ApiToken(name="n", token_hash="0" * 64))
    with session_scope(factory) as s:
        run = s.execute(select(Run)).scalar_one()
        assert run.loss_curve == [{"step": 1, "loss": 0.5}] and run.behaviour["40"]["token_acc"] == 0.9
        assert s.execute(select(ProbeResult.per_position)).scalar_one() == [0.5, 0.6]
        job = s.execute(select(Job)).scalar_one()
        assert job.state == "queued" and job.attempt == 0 and job.max_attempts == 3 and job.cancel_requested is False
        assert s.execute(select(SavedView.title)).scalar_one() == "<b>t</b>"
        # deleting a run cascades to its results
        s.delete(run)
    with session_scope(factory) as s:
        for model in (ProbeResult, InterventionResult, PatchingResult):
            assert s.execute(select(model)).first() is None
        assert s.execute(select(Job.run_id)).scalar_one() is None
    engine.dispose()
