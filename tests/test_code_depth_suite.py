"""``layerscope suite`` runs ``code_depth`` on the stdlib corpus for all
five families — through the real CLI entry point, into a temp SQLite DB and model store."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import FAMILIES, METHODS

pytestmark = pytest.mark.slow

EVAL_LENGTHS = {40, 60}  # the smoke preset's


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from backend.cli import main
    from store.session import make_engine, make_sessionmaker
    from store.settings import get_settings

    root = tmp_path_factory.mktemp("code_depth_suite")
    db_url = f"sqlite:///{root / 'results.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_HOME", str(root / "home"))
        mp.setenv("LAYERSCOPE_DB_URL", db_url)
        mp.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{root / 'queue.db'}")
        mp.setenv("LAYERSCOPE_STORE_DIR", str(root / "store"))
        get_settings.cache_clear()
        try:
            rc = main(["suite", "--preset", "smoke", "--task", "code_depth", "--device", "cpu"])
        finally:
            get_settings.cache_clear()
    assert rc == 0
    engine = make_engine(db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def test_five_runs_on_the_stdlib_corpus(suite):
    with suite() as s:
        runs = s.scalars(select(Run)).all()
    assert sorted(r.family for r in runs) == sorted(FAMILIES)
    for r in runs:
        assert r.task == "code_depth" and r.suite == "smoke" and r.status == "complete" and r.checkpoint_id
        assert r.task_params["corpus"] == "stdlib"
        assert r.n_layers == 4
        assert abs(r.n_params - 60_000) <= 6_000  # the smoke preset's code_depth budget, ±10%
        assert {int(k) for k in r.behaviour} == EVAL_LENGTHS


def test_probes_interventions_and_patching_for_every_run(suite):
    with suite() as s:
        for run in s.scalars(select(Run)):
            probes = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run.id)).all()
            assert {(p.layer, p.eval_length) for p in probes} == {
                (layer, L) for layer in range(-1, run.n_layers) for L in EVAL_LENGTHS
            }
            assert all(0.0 <= p.accuracy <= 1.0 for p in probes)

            rows = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run.id)).all()
            methods = {r.method for r in rows}
            assert set(METHODS) <= methods
            assert ("conv1d_removal" in methods) == (run.family in ("mamba", "mamba2"))
            assert {r.eval_length for r in rows} == EVAL_LENGTHS
            assert all(r.refit_acc is not None for r in rows)

            patching = s.scalars(select(PatchingResult).where(PatchingResult.run_id == run.id)).all()
            # every position at the patch length (40), every layer for resid_post (emb included)
            post = [p for p in patching if p.site == "resid_post"]
            assert {(p.layer, p.position) for p in post} == {
                (layer, pos) for layer in range(-1, run.n_layers) for pos in range(40)
            }
