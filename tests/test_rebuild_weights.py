"""A stored run without weights (imported from a bundle without them) is rebuilt when its suite
resumes: its own config, the wall-clock cap replaced by the step budget it gave the run on the
machine that made it, so the rebuild retraces the run whatever this machine's speed."""

from __future__ import annotations

import pytest
import torch

import worker.pipeline as pipeline
from models_store import ModelConfig, build_model
from science.budget import recorded_step_budget, step_budget
from science.tasks import get_task
from science.training import TrainConfig, train_model
from store.models import ProbeResult, Run
from worker.job_params import SuiteParams
from worker.pipeline import load_run, local_env, run_suite

# max_seconds: the runs are made under a wall-clock cap (far from binding here), as the study's are
ONE = dict(preset="smoke", families=["gru"], tasks=["parity"], max_seconds=600.0)


def _model():
    torch.manual_seed(0)
    return build_model(ModelConfig(family="gru", vocab_size=2, n_classes=2, n_layers=2, d_model=16))


def test_stop_at_step_is_a_prefix_of_the_same_trajectory():
    task = get_task("parity")
    cfg = TrainConfig(
        train_length=10,
        batch_size=16,
        lr=3e-3,
        max_steps=100,
        eval_every=5,
        n_eval_sequences=32,
        warmup_steps=4,
        lr_schedule="cosine",
        early_stop_acc=2.0,
        grad_clip=None,
        curriculum_start=None,
    )
    short = train_model(_model(), task, cfg, seed=3, stop_at_step=7)
    longer = train_model(_model(), task, cfg, seed=3, stop_at_step=12)
    assert short.steps == 7 and longer.steps == 12
    assert [p["loss"] for p in short.loss_curve] == [p["loss"] for p in longer.loss_curve[:7]]
    assert short.loss_curve[-1]["heldout_token_acc"] is not None  # evaluated where it stopped


def test_step_budget_is_what_the_cap_gave_on_the_machine_that_made_the_run():
    # stopped by its 75 s cap after 1,401 steps: those steps
    assert step_budget(1401, 75.2, False, 10_000, 75.0) == 1401
    # early stop at step 700 after 26 s: the cap would have allowed 700 × 75 / 26 = 2,019 steps
    assert step_budget(700, 26.0, True, 10_000, 75.0) == 2019
    assert step_budget(700, 1.0, True, 1000, 75.0) == 1000  # never beyond max_steps
    assert step_budget(700, 26.0, True, 5000, None) == 5000  # no cap: max_steps
    assert step_budget(12, 9.0, False, 12, None) == 12  # stopped by max_steps


def test_a_rebuild_recorded_without_its_budget_gets_it_from_its_first_record():
    first = {"steps": 700, "train_seconds": 26.0, "stopped_early": True}  # rebuilt before budgets were recorded
    assert recorded_step_budget(first, {"max_steps": 10_000, "max_seconds": 75.0}) == 2019
    assert recorded_step_budget({**first, "step_budget": 900}, {"max_steps": 10_000, "max_seconds": 75.0}) == 900


def test_an_early_stopped_run_is_rebuilt_within_its_budget_not_cut_at_its_step(env, monkeypatch):
    """On another device the trajectory differs slightly: an H200 run at 0.991 after 700 steps
    (early stop) was 0.986 after the same 700 CPU steps; the recipe trains on to the criterion."""
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:  # as if it stopped early at step 5 (smoke: 12 steps, no cap)
        s.query(Run).update({"checkpoint_id": None, "status": "trained", "steps": 5, "stopped_early": True})
        s.commit()
    seen: list[dict] = []
    real = pipeline.train_model
    monkeypatch.setattr(pipeline, "train_model", lambda *a, **kw: seen.append({**kw, "config": a[2]}) or real(*a, **kw))
    run_suite(SuiteParams(**ONE), env)
    assert seen[0]["stop_at_step"] == 12 and seen[0]["config"].max_seconds is None
    assert seen[0]["config"].early_stop_acc == 0.99


@pytest.fixture
def env(tmp_path):
    return local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")


def test_weightless_run_is_rebuilt_to_its_recorded_steps_with_the_cap_lifted(env, monkeypatch):
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    _, _, original = load_run(run_id, env)
    with env.session_factory() as s:  # as imported from a bundle without weights, measurements missing
        run = s.get(Run, run_id)
        recorded = run.steps
        run.checkpoint_id, run.status = None, "trained"
        s.query(ProbeResult).delete()
        s.commit()
    seen: list[dict] = []
    real = pipeline.train_model

    def spy(*args, **kw):
        seen.append({**kw, "config": args[2]})
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "train_model", spy)
    assert run_suite(SuiteParams(**ONE), env) == [run_id]
    assert seen[0]["stop_at_step"] == recorded and seen[0]["config"].max_seconds is None
    _, _, rebuilt = load_run(run_id, env)
    for (name, a), b in zip(original.state_dict().items(), rebuilt.state_dict().values()):
        assert torch.equal(a, b), name  # the same seed, data and steps on the same device: the same weights
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.status == "complete" and run.steps == recorded
        assert run.made_with["rebuilt_from"]["steps"] == recorded
        assert run.made_with["git_commit"] == pipeline.code_versions()["git_commit"]


def test_rebuild_stops_at_a_time_capped_runs_recorded_step(env, monkeypatch):
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:  # a run its wall-clock cap stopped at step 5, weights not kept
        s.query(Run).update(
            {
                "checkpoint_id": None,
                "status": "trained",
                "steps": 5,
                "stopped_early": False,
                "made_on": "cuda (NVIDIA H200) on gpu-box",
            }
        )
        s.commit()
    seen: list[dict] = []
    real = pipeline.train_model
    monkeypatch.setattr(pipeline, "train_model", lambda *a, **kw: seen.append({**kw, "config": a[2]}) or real(*a, **kw))
    run_suite(SuiteParams(**ONE), env)
    assert seen[0]["stop_at_step"] == 5 and seen[0]["config"].max_seconds is None  # the 600 s cap lifted
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.steps == 5 and run.made_with["rebuilt_from"]["steps"] == 5
        assert run.made_with["rebuilt_from"]["step_budget"] == 5


def test_a_second_rebuild_keeps_the_first_record_and_its_budget(env):
    """A rebuild's own seconds were not under the cap: they must not set the next budget."""
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:  # first made on a GPU: early stop at step 4 after 100 s of a 600 s cap
        s.query(Run).update(
            {
                "checkpoint_id": None,
                "status": "trained",
                "steps": 4,
                "stopped_early": True,
                "train_seconds": 100.0,
                "made_on": "cuda (NVIDIA H200) on gpu-box",
            }
        )
        s.commit()
    run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        first = s.get(Run, run_id).made_with["rebuilt_from"]
        assert first["made_on"] == "cuda (NVIDIA H200) on gpu-box" and first["step_budget"] == 12  # min(24, 12)
        s.get(Run, run_id).checkpoint_id = None  # exported without weights again, imported elsewhere
        s.commit()
    run_suite(SuiteParams(**ONE, rebuild_weights=True), env)
    with env.session_factory() as s:
        assert s.get(Run, run_id).made_with["rebuilt_from"] == first


def test_a_corrupted_checkpoint_is_rebuilt_and_replaced(env):
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        ckpt = run.checkpoint_id
        run.status = "trained"  # measurements to finish
        s.query(ProbeResult).delete()
        s.commit()
    weights = next(p for p in env.store.path(ckpt).iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)  # flipped bytes: no longer hash to the id
    assert not env.store.intact(ckpt)
    run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.status == "complete" and env.store.intact(run.checkpoint_id)
    load_run(run_id, env)


def test_rebuild_weights_is_refused_for_train_only_jobs_and_with_force():
    from pydantic import ValidationError

    from worker.job_params import TrainParams

    with pytest.raises(ValidationError, match="rebuild_weights: needs measurements"):
        TrainParams(family="gru", task="parity", measure=None, rebuild_weights=True)
    with pytest.raises(ValidationError, match="not with force"):
        SuiteParams(**ONE, force=True, rebuild_weights=True)


def test_force_trains_afresh_under_the_runs_own_budget(env, monkeypatch):
    run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        s.query(Run).update({"checkpoint_id": None, "status": "trained", "steps": 5})
        s.commit()
    seen: list[dict] = []
    real = pipeline.train_model
    monkeypatch.setattr(pipeline, "train_model", lambda *a, **kw: seen.append({**kw, "config": a[2]}) or real(*a, **kw))
    run_suite(SuiteParams(**ONE, force=True), env)
    assert seen[0]["stop_at_step"] is None and seen[0]["config"].max_seconds == 600.0
    with env.session_factory() as s:
        assert "rebuilt_from" not in s.query(Run).one().made_with


def test_a_complete_run_without_weights_is_skipped_unless_rebuild_weights(env):
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:  # imported complete, without weights
        s.get(Run, run_id).checkpoint_id = None
        s.commit()
    run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        assert s.get(Run, run_id).checkpoint_id is None  # measured already: nothing to do
    run_suite(SuiteParams(**ONE, rebuild_weights=True), env)
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.checkpoint_id is not None and run.status == "complete" and "rebuilt_from" in run.made_with
        created = run.created_at
    _, _, model = load_run(run_id, env)  # the weights are here now: probe/intervene/patch can run
    run_suite(SuiteParams(**ONE, rebuild_weights=True), env)  # weights here: nothing to rebuild
    with env.session_factory() as s:
        assert s.get(Run, run_id).created_at == created


def test_the_missing_weights_message_names_the_rebuild_command(env):
    from worker.run_weights import missing_weights

    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        run.checkpoint_id = None
        msg = missing_weights(run)
    assert "--rebuild-weights" in msg and f"recorded: {run.steps} steps" in msg and "--force" not in msg


def test_a_suite_under_another_name_gets_its_preset_and_name_in_the_command(env):
    from worker.run_weights import retrain_command

    (run_id,) = run_suite(SuiteParams(**ONE, name="smoke-600s"), env)
    with env.session_factory() as s:
        cmd = retrain_command(s.get(Run, run_id))
    assert cmd == (
        "`layerscope suite --preset smoke --name smoke-600s --family gru --task parity --seed 0 "
        "--max-seconds 600 --rebuild-weights`"
    )
