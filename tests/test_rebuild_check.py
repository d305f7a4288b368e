"""`layerscope runs rebuild-weights RUN_ID`: a run imported without weights gets them again,
checked against its record; on agreement every stored result and its suite's claims stay as they
were (before, while and after the rebuild trains), and an intervene job then works on it; on
disagreement nothing is stored and the line says by how much, or the rebuild goes to another suite."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

import worker.pipeline as pipeline
from store.models import InterventionResult, PatchingResult, ProbeResult, ResultWeights, Run
from worker.job_params import InterveneParams, RebuildParams, SuiteParams
from worker.pipeline import local_env, run_suite
from worker.rebuild_check import RebuildDisagrees, RebuildRefused, rebuild_weights

ONE = dict(preset="smoke", families=["gru"], tasks=["parity"], max_seconds=600.0)
TABLES = (ProbeResult, InterventionResult, PatchingResult, ResultWeights)


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")


@pytest.fixture
def imported(env) -> int:
    """A measured run of suite ``smoke`` whose weights are not here (as imported from a bundle)."""
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        s.get(Run, run_id).checkpoint_id = None
        s.commit()
    return run_id


def _rows(env, run_id: int) -> dict[str, list[tuple]]:
    """Every result row of the run, every column."""
    with env.session_factory() as s:
        return {
            t.__tablename__: [
                tuple(getattr(r, c.key) for c in t.__table__.columns)
                for r in s.scalars(select(t).where(t.run_id == run_id).order_by(t.id))
            ]
            for t in TABLES
        }


def _record(env, run_id: int) -> tuple:
    with env.session_factory() as s:
        r = s.get(Run, run_id)
        return (r.status, r.steps, r.heldout_acc, json.dumps(r.loss_curve), json.dumps(r.behaviour), r.created_at)


def _claims(env, suite: str = "smoke") -> str:
    from backend.api.across_seeds import claims
    from backend.api.queries import RunFilter

    with env.session_factory() as s:
        return json.dumps(claims(s, RunFilter(suite=[suite])), sort_keys=True, default=str)


def test_an_agreeing_rebuild_keeps_every_result_and_the_suites_claims(env, imported, monkeypatch):
    rows, record, claims = _rows(env, imported), _record(env, imported), _claims(env)
    assert sum(map(len, rows.values())) > 0
    during: list[tuple] = []
    real = pipeline.train_model

    def train_and_look(*args, **kw):  # what the pages read while the rebuild trains
        during.append((_rows(env, imported), _claims(env)))
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "train_model", train_and_look)
    out = rebuild_weights(RebuildParams(run_id=imported), env)
    assert out["agrees"] and out["run_id"] == imported
    assert during == [(rows, claims)]
    assert _rows(env, imported) == rows and _record(env, imported) == record and _claims(env) == claims
    with env.session_factory() as s:
        run = s.get(Run, imported)
        assert run.checkpoint_id == out["checkpoint_id"] and env.store.exists(run.checkpoint_id)
        check = run.made_with["weights_rebuilt"]
        assert check["steps"] == [run.steps, run.steps] and check["loss_max_diff"] <= check["loss_tolerance"]
    # the weights are there: an intervene job on the run works, its other results untouched
    monkeypatch.setattr(pipeline, "train_model", real)
    pipeline.intervene(InterveneParams(run_id=imported, methods=["leace"], n_permutations=100), env)
    after = _rows(env, imported)
    assert {r[0] for r in after["probe_results"]} == {r[0] for r in rows["probe_results"]}
    with env.session_factory() as s:
        methods = set(s.scalars(select(InterventionResult.method).where(InterventionResult.run_id == imported)))
    assert "leace" in methods


def test_a_disagreeing_rebuild_stores_nothing_and_says_by_how_much(env, imported, tmp_path, monkeypatch, capsys):
    from backend.cli import main
    from store.settings import get_settings

    with env.session_factory() as s:  # a record another training left: 30 pp apart, the loss 1 nat higher
        run = s.get(Run, imported)
        run.heldout_acc = max(0.0, (run.heldout_acc or 0.0) - 0.3) if (run.heldout_acc or 0) >= 0.3 else 0.9
        run.loss_curve = [{**p, "loss": p["loss"] + 1.0} for p in run.loss_curve]
        s.commit()
    rows, record, claims = _rows(env, imported), _record(env, imported), _claims(env)
    folders = sorted(p.name for p in (tmp_path / "store").iterdir())
    with pytest.raises(RebuildDisagrees, match=r"held-out accuracy .* pp, tolerance 1 pp\).*apart by up to 1\.0"):
        rebuild_weights(RebuildParams(run_id=imported), env)
    assert _rows(env, imported) == rows and _record(env, imported) == record and _claims(env) == claims
    with env.session_factory() as s:
        assert s.get(Run, imported).checkpoint_id is None
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == folders  # no checkpoint written

    # the CLI says it in one line (exit 1) ...
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'r.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("LAYERSCOPE_DEBUG", raising=False)
    get_settings.cache_clear()
    try:
        assert main(["runs", "rebuild-weights", str(imported)]) == 1
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"run {imported}: the rebuild disagrees" in err and "nothing stored" in err and "Traceback" not in err
        # ... and, asked to, stores the rebuild as a new run of another suite, the run unchanged
        assert main(["runs", "rebuild-weights", str(imported), "--as-suite", "smoke-rebuilt"]) == 0
        assert "stored as run" in capsys.readouterr().out
    finally:
        get_settings.cache_clear()
    with env.session_factory() as s:
        (new,) = s.scalars(select(Run).where(Run.suite == "smoke-rebuilt"))
        assert new.status == "trained" and env.store.exists(new.checkpoint_id) and new.id != imported
        assert new.made_with["rebuild_of"]["run_id"] == imported and new.made_with["rebuild_of"]["differs"]
    assert _rows(env, imported) == rows and _record(env, imported) == record and _claims(env) == claims
    with pytest.raises(RebuildRefused, match="holds the rebuild of run"):
        rebuild_weights(RebuildParams(run_id=imported, as_suite="smoke-rebuilt"), env)


def test_a_rebuild_is_refused_where_it_has_nothing_to_do(env):
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with pytest.raises(RebuildRefused, match="has its weights here"):
        rebuild_weights(RebuildParams(run_id=run_id), env)
    with pytest.raises(RebuildRefused, match="run 999 not found"):
        rebuild_weights(RebuildParams(run_id=999), env)
    with env.session_factory() as s:
        s.get(Run, run_id).checkpoint_id = None
        s.commit()
    with pytest.raises(RebuildRefused, match="the run's own suite"):
        rebuild_weights(RebuildParams(run_id=run_id, as_suite="smoke"), env)


def test_a_rebuild_job_queues_its_follow_up_once_the_weights_agree(db_factory):
    """The jobs form's "rebuild, then intervene": the intervene job is queued by the rebuild job,
    as its child, when the weights agree; not when they disagree."""
    from store.models import Job
    from tests.conftest import seed_runs
    from worker.queue import JobQueue, submit
    from worker.runner import Runner

    settings, factory = db_factory
    (run_id,) = seed_runs(factory, families=("gru",), tasks=("parity",), seeds=(0,))
    queue = JobQueue.from_settings(settings)
    queue.flush()
    agrees = {"value": True}

    def executor(kind, params, ctx, env):
        if kind == "rebuild" and not agrees["value"]:
            raise ValueError("the rebuild disagrees with the run's record")
        return {"run_id": params.run_id, "agrees": True} if kind == "rebuild" else {"run_id": params.run_id}

    runner = Runner(settings, device="cpu", name="w", executor=executor, session_factory=factory, queue=queue)
    then = {"kind": "intervene", "params": {"run_id": run_id, "methods": ["leace"]}}
    job_id = submit(factory, queue, "rebuild", RebuildParams(run_id=run_id, then=then), priority=5)
    assert runner.run_one(job_id) == "succeeded"
    with factory() as s:
        (child,) = s.scalars(select(Job).where(Job.parent_id == job_id))
        assert child.kind == "intervene" and child.params["methods"] == ["leace"] and child.priority == 5
        assert s.get(Job, job_id).result["then_job_id"] == child.id
    assert child.id in queue.pending_ids()
    agrees["value"] = False
    failed = submit(factory, queue, "rebuild", RebuildParams(run_id=run_id, then=then))
    assert runner.run_one(failed) == "failed"
    with factory() as s:
        assert not list(s.scalars(select(Job).where(Job.parent_id == failed)))
