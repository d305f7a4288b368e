"""End to end: the smoke suite trains, measures and stores 5 families × 3 tasks in SQLite."""

import pytest
from sqlalchemy import func, select

from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import SuiteParams
from worker.pipeline import load_run, local_env, run_suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    root = tmp_path_factory.mktemp("smoke")
    env = local_env(f"sqlite:///{root / 'results.db'}", root / "store", device="cpu")
    ids = run_suite(SuiteParams(preset="smoke"), env)
    return env, ids


def test_every_family_and_task_is_stored(smoke):
    env, ids = smoke
    assert len(ids) == 15
    with env.session_factory() as s:
        runs = s.scalars(select(Run)).all()
        assert {(r.family, r.task) for r in runs} == {
            (f, t) for f in ("transformer", "mamba", "mamba2", "lstm", "gru") for t in ("parity", "s3", "dyck")
        }
        assert all(r.status == "complete" and r.checkpoint_id for r in runs)
        assert all(set(r.behaviour) == {"40", "60"} for r in runs)


def test_probes_cover_every_layer_and_eval_length(smoke):
    env, ids = smoke
    with env.session_factory() as s:
        for run in s.scalars(select(Run)):
            rows = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run.id)).all()
            assert {(r.layer, r.eval_length) for r in rows} == {
                (layer, L) for layer in range(-1, run.n_layers) for L in (40, 60)
            }
            assert all(0.0 <= r.accuracy <= 1.0 and len(r.per_position) == r.eval_length for r in rows)
            # balanced accuracy stored beside accuracy; the control task (token type × position
            # bucket) and selectivity for every task; accuracy per token type where the task has types
            assert all(0.0 <= r.balanced_accuracy <= 1.0 for r in rows)
            assert all(0.0 <= r.control_accuracy <= 1.0 for r in rows)
            assert all(abs(r.selectivity - (r.accuracy - r.control_accuracy)) < 1e-9 for r in rows)
            if run.task == "dyck":
                assert all(set(r.type_accuracy) == {"open", "close"} for r in rows)
            else:
                assert all(r.type_accuracy is None for r in rows)


def test_interventions_with_refit_and_conv1d_for_mamba_families(smoke):
    env, _ = smoke
    with env.session_factory() as s:
        for run in s.scalars(select(Run)):
            rows = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run.id)).all()
            methods = {r.method for r in rows}
            assert {"project_out", "inlp", "leace", "pca_top_k", "mean"} <= methods
            assert ("conv1d_removal" in methods) == (run.family in ("mamba", "mamba2"))
            assert all(r.p_holm is not None and r.p_holm >= r.p_value - 1e-12 for r in rows)
            assert all(r.refit_acc is not None for r in rows if r.method != "conv1d_removal")
            # the fitting-set rule (≥ 64 tokens per dimension at L = 40) and INLP's report
            fitted = [r for r in rows if r.method != "conv1d_removal"]
            assert all(r.n_fit_sequences >= -(-64 * run.d_model // 40) for r in fitted)
            inlp = [r for r in rows if r.method == "inlp"]
            assert inlp and all(r.inlp_converged is not None and r.inlp_rounds >= 0 for r in inlp)
            assert all(r.inlp_converged is None for r in rows if r.method != "inlp")
            # the rank-matched random removal beside every row that removes a rank
            for r in fitted:
                if r.rank_removed:
                    assert r.random_draws == (1 if r.rank_removed == run.d_model else 5)
                    assert r.random_delta_lo <= r.random_delta_pp <= r.random_delta_hi
                else:
                    assert r.random_delta_pp is None
            # the mean ablation removes the whole width: its random twin is the same edit
            for r in (r for r in fitted if r.method == "mean"):
                assert abs(r.random_delta_pp - r.delta_pp) < 1e-3  # pp; float32 rounding of the two edits
            # LEACE/INLP fitted on the base size or a doubling of it (the fit-size rule)
            base = max(r.n_fit_sequences for r in fitted if r.method == "pca_top_k")
            assert all(r.n_fit_sequences in (base, 2 * base, 4 * base) for r in fitted if r.method in ("leace", "inlp"))


def test_patching_grid_for_every_run(smoke):
    env, ids = smoke
    with env.session_factory() as s:
        n = s.scalar(select(func.count(func.distinct(PatchingResult.run_id))))
        assert n == len(ids)


def test_rerun_replaces_rather_than_doubles(smoke):
    env, ids = smoke
    with env.session_factory() as s:
        before = s.scalar(select(func.count()).select_from(ProbeResult))
    run_suite(SuiteParams(preset="smoke", families=["lstm"], tasks=["parity"]), env)
    with env.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(ProbeResult)) == before
        assert s.scalar(select(func.count()).select_from(Run)) == len(ids)


def test_checkpoint_loads_back_for_follow_up_jobs(smoke):
    env, ids = smoke
    params, task, model = load_run(ids[0], env)
    assert model.n_layers == params.n_layers and task.name == params.task
