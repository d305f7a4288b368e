"""Idempotent writes: a re-run replaces its rows, never doubles them; bad rows write nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from store.migrate import init_db
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from store.session import make_engine, make_sessionmaker
from worker.persist import (
    replace_intervention_results,
    replace_patching_results,
    replace_probe_results,
    save_run,
)


@pytest.fixture(params=["sqlite", "postgres"])
def factory(request):
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    init_db(url)
    engine = make_engine(url)
    yield make_sessionmaker(engine)
    engine.dispose()


def run_fields(**kw):
    base = dict(
        name="lstm-parity-0",
        family="lstm",
        task="parity",
        seed=0,
        n_layers=2,
        d_model=8,
        n_params=100,
        config_hash="a" * 64,
        behaviour={"40": {"token_acc": 0.5}},
    )
    base.update(kw)
    return base


def probe_rows(acc: float, lengths=(40, 60)):
    return [
        dict(
            layer=layer,
            eval_length=L,
            accuracy=acc,
            majority_baseline=0.5,
            per_position=[acc] * 3,
            n_train=8,
            n_test=2,
            converged=True,
            n_iter=5,
            config_hash="p",
        )
        for L in lengths
        for layer in (-1, 0, 1)
    ]


def count(s, model) -> int:
    return s.execute(select(func.count()).select_from(model)).scalar_one()


def test_save_run_upserts_by_config_hash(factory) -> None:
    with factory() as s:
        a = save_run(s, **run_fields())
        b = save_run(s, **run_fields(behaviour={"40": {"token_acc": 0.9}}, steps=7))
        assert a == b
        assert count(s, Run) == 1
        run = s.get(Run, a)
        assert run.behaviour == {"40": {"token_acc": 0.9}} and run.steps == 7
        c = save_run(s, **run_fields(config_hash="b" * 64, seed=1))
        assert c != a and count(s, Run) == 2


def test_save_run_rejects_unknown_fields_and_missing_hash(factory) -> None:
    with factory() as s:
        with pytest.raises(ValueError, match="bogus"):
            save_run(s, **run_fields(bogus=1))
        with pytest.raises(ValueError, match="config_hash"):
            save_run(s, **run_fields(config_hash=""))
        assert count(s, Run) == 0


def test_replace_probe_results_is_idempotent(factory) -> None:
    with factory() as s:
        run_id = save_run(s, **run_fields())
        assert replace_probe_results(s, run_id, probe_rows(0.6)) == 6
        assert replace_probe_results(s, run_id, probe_rows(0.8)) == 6
        assert count(s, ProbeResult) == 6
        assert set(s.execute(select(ProbeResult.accuracy)).scalars()) == {0.8}
        # a partial re-run (one eval length) replaces only its keys
        replace_probe_results(s, run_id, probe_rows(0.9, lengths=(40,)))
        accs = dict(
            s.execute(
                select(ProbeResult.eval_length, func.avg(ProbeResult.accuracy)).group_by(ProbeResult.eval_length)
            ).all()
        )
        assert accs[40] == pytest.approx(0.9) and accs[60] == pytest.approx(0.8)
        assert count(s, ProbeResult) == 6


def test_bad_rows_write_nothing(factory) -> None:
    with factory() as s:
        run_id = save_run(s, **run_fields())
        replace_probe_results(s, run_id, probe_rows(0.6))
        rows = probe_rows(0.7)
        rows[-1]["accuracy"] = None  # NOT NULL violation on the last insert
        with pytest.raises(IntegrityError):
            replace_probe_results(s, run_id, rows)
        # the delete was rolled back with the failed insert: the old rows are all still there
        assert count(s, ProbeResult) == 6
        assert set(s.execute(select(ProbeResult.accuracy)).scalars()) == {0.6}
        with pytest.raises(ValueError, match="duplicate key"):
            replace_probe_results(s, run_id, probe_rows(0.7) + probe_rows(0.7)[:1])
        with pytest.raises(ValueError, match="unknown field"):
            replace_probe_results(s, run_id, [dict(probe_rows(0.7)[0], nope=1)])


def test_replace_interventions_and_patching(factory) -> None:
    with factory() as s:
        run_id = save_run(s, **run_fields())
        iv = [
            dict(
                method=m,
                layer=layer,
                eval_length=40,
                base_acc=0.9,
                edited_acc=0.5,
                delta_pp=-40.0,
                n_sequences=10,
                seed=0,
                config_hash="i",
                layer_name=str(layer),
            )
            for m in ("mean", "leace")
            for layer in (0, 1)
        ]
        pt = [
            dict(
                layer=layer,
                position=p,
                eval_length=40,
                recovery=0.5,
                ld_clean=1.0,
                ld_corrupted=-1.0,
                n_pairs=4,
                config_hash="q",
            )
            for layer in (-1, 0, 1)
            for p in (5, 10)
        ]
        for _ in range(2):
            assert replace_intervention_results(s, run_id, iv) == 4
            assert replace_patching_results(s, run_id, pt) == 6
        assert count(s, InterventionResult) == 4 and count(s, PatchingResult) == 6


def test_commit_false_composes_into_one_transaction(factory) -> None:
    with factory() as s:
        run_id = save_run(s, commit=False, **run_fields())
        replace_probe_results(s, run_id, probe_rows(0.6), commit=False)
        s.rollback()
        assert count(s, Run) == 0 and count(s, ProbeResult) == 0
