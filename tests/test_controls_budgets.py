"""Random-init controls, step budgets per cell, the plateau rule, learned positions and the
stacked RNNs (docs/SCIENCE.md#controls, #budgets, #plateau, #positions, #stacked-rnns)."""

from __future__ import annotations

import pytest
import torch
from sqlalchemy import select

from models_store import ModelConfig, build_model
from science.training import TrainConfig, plateaued, train_model
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import SuiteParams, TrainParams
from worker.presets import expand_suite


def test_plateau_rule_reads_the_last_k_evaluations():
    assert not plateaued([0.5] * 5, window=5, min_gain=0.01)  # needs window + 1 evaluations
    assert plateaued([0.5] * 6, window=5, min_gain=0.01)
    assert not plateaued([0.5, 0.5, 0.5, 0.5, 0.5, 0.52], window=5, min_gain=0.01)
    assert plateaued([0.5, 0.6, 0.6, 0.605, 0.6, 0.6, 0.6], window=5, min_gain=0.01)
    assert not plateaued([0.5, 0.6], window=0, min_gain=0.01)


def test_gap_share_plateau_rule_lets_a_run_near_its_target_creep():
    # Mamba-2 x parity seed 0 of the paper-steps study: 0.976 before, 0.9864 at best in the last 20
    creeping = [0.97, 0.976] + [0.98] * 19 + [0.9834]
    assert plateaued(creeping, window=20, min_gain=0.01)  # the fixed 1 pp rule stops it
    # a fifth of the gap left to 0.99 (0.2 x 0.014 = 0.0028) is gained: not a plateau
    assert not plateaued(creeping, window=20, min_gain=0.01, target=0.99, gap_share=0.2)
    # far from the target the least gain stays 1 pp (capped): a stuck run still stops
    stuck = [0.5] + [0.505] * 20
    assert plateaued(stuck, window=20, min_gain=0.01, target=0.99, gap_share=0.2)
    # no gain at all near the target is still a plateau
    assert plateaued([0.985] * 21, window=20, min_gain=0.01, target=0.99, gap_share=0.2)
    # the gap-share rule never stops a run the fixed rule would not (the least gain is capped)
    for accs in (creeping, stuck, [0.3, 0.9] + [0.94] * 20, [0.9] * 10 + [0.93] * 11):
        if plateaued(accs, 20, 0.01, target=0.95, gap_share=0.2):
            assert plateaued(accs, 20, 0.01)


def _untrainable_lstm_run(**config):
    """A tiny LSTM on parity trained with lr ~0 (nothing is learned, so the held-out accuracy never
    moves), evaluated every 2 steps on 32 sequences."""
    from science.tasks import get_task

    base = dict(lr=1e-12, max_steps=200, eval_every=2, n_eval_sequences=32, batch_size=8, curriculum_start=None)
    return train_model(
        build_model(ModelConfig(family="lstm", vocab_size=2, n_classes=2, d_model=8), seed=0),
        get_task("parity"),
        TrainConfig(**{**base, **config}),
        seed=0,
    )


def test_a_run_that_stops_learning_stops_at_a_plateau():
    r = _untrainable_lstm_run(plateau_evals=3, plateau_min_gain=0.01)
    assert r.stop_reason == "plateau" and r.steps == 8  # 4 evaluations: the first + 3 without gain
    assert r.best_heldout_acc == pytest.approx(r.final_heldout_acc) and r.best_step is not None
    r2 = _untrainable_lstm_run(max_steps=6)
    assert r2.stop_reason == "budget" and r2.steps == 6
    # the gap-share rule, in the curriculum (target: the stage's threshold) and far from it: the
    # least gain is capped at 1 pp, so a model that learns nothing stops where it did
    for start in (None, 8):
        r3 = _untrainable_lstm_run(plateau_evals=3, plateau_gap_share=0.2, curriculum_start=start)
        assert r3.stop_reason == "plateau" and r3.steps == 8
        assert r3.stop_length == (8 if start else 40)


def test_paper_preset_budgets_by_cell_and_adds_controls_and_stacked_rnns():
    jobs = expand_suite(SuiteParams(preset="paper", name="t"))
    trained = [j for j in jobs if j.control is None]
    controls = [j for j in jobs if j.control == "init"]
    assert len(trained) == 5 * 4 * 3 + 2 * 2 * 3 and len(controls) == len(trained)
    assert jobs[: len(controls)] == controls  # controls first
    by = {(j.family, j.task, j.seed): j for j in trained}
    assert by["transformer", "parity", 0].max_steps == 5000 and by["mamba", "s3", 1].max_steps == 20_000
    assert by["lstm", "dyck", 2].max_steps == 3000 and by["lstm", "dyck", 2].curriculum_start is None
    assert by["transformer", "dyck", 0].learned_positions == 256 and by["mamba", "dyck", 0].learned_positions == 0
    assert all(j.plateau_evals == 20 for j in trained)
    # revision 2: the S3 cells of the Transformer and the SSMs and Mamba-2 x parity get longer budgets,
    # the gap-share plateau rule and a 48 h safety cap; every other cell keeps its settings and hash
    revised = {
        ("transformer", "s3"): 40_000,
        ("mamba", "s3"): 20_000,
        ("mamba2", "s3"): 25_000,
        ("mamba2", "parity"): 8_000,
    }
    for j in trained:
        if (j.family, j.task) in revised:
            # revision 3 of the plateau rule replaced revision 2 in these cells (docs/SCIENCE.md#plateau)
            assert j.max_steps == revised[j.family, j.task] and j.plateau_revision == 3 and j.max_seconds == 172_800.0
            assert j.plateau_gap_share is None
        else:
            assert j.plateau_gap_share is None and j.plateau_revision is None and j.max_seconds == 14_400.0
            assert "plateau_gap_share" not in j.run_config() and "plateau_revision" not in j.run_config()
    assert {(j.family, j.task) for j in trained if j.family.endswith("_stack")} == {
        (f, t) for f in ("lstm_stack", "gru_stack") for t in ("parity", "s3")
    }
    # a control is its run's twin: the same model config, its own hash
    twin = next(c for c in controls if (c.family, c.task, c.seed) == ("transformer", "parity", 0))
    assert twin.learned_positions == 256 and twin.run_hash() != by["transformer", "parity", 0].run_hash()
    only = expand_suite(SuiteParams(preset="paper", name="t", controls="only", tasks=["dyck"]))
    assert only and all(j.control == "init" for j in only)
    assert all(j.control is None for j in expand_suite(SuiteParams(preset="smoke")))


def test_fields_added_later_leave_old_run_hashes_alone():
    p = TrainParams(family="lstm", task="parity")
    assert not {"learned_positions", "plateau_evals", "plateau_min_gain", "control"} & set(p.run_config())
    assert "plateau_evals" in TrainParams(family="lstm", task="parity", plateau_evals=5).run_config()


def test_learned_positions_are_added_to_the_embedding_and_counted():
    cfg = ModelConfig(
        family="transformer", vocab_size=2, n_classes=2, d_model=32, start_token=True, learned_positions=64
    )
    model = build_model(cfg, seed=0)
    assert (
        cfg.n_params
        == model.n_params
        == ModelConfig(family="transformer", vocab_size=2, n_classes=2, d_model=32, start_token=True).n_params + 64 * 32
    )
    from models_store.capture import run_with_states

    tokens = torch.ones(2, 10, dtype=torch.long)  # a constant prefix: positions tell them apart
    _, states = run_with_states(model, tokens)
    emb = states[-1]
    assert not torch.allclose(emb[:, 3], emb[:, 4])
    with pytest.raises(ValueError, match="learned position table"):
        model(torch.ones(1, 64, dtype=torch.long))  # 64 + START > 64 positions
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(family="mamba", vocab_size=2, n_classes=2, learned_positions=8)
    with pytest.raises(ValueError, match="attention"):
        TrainParams(family="lstm", task="parity", learned_positions=8)


@pytest.mark.parametrize("family,rnn", [("lstm_stack", torch.nn.LSTM), ("gru_stack", torch.nn.GRU)])
def test_stacked_rnn_is_what_nn_rnn_num_layers_computes(family, rnn):
    cfg = ModelConfig(family=family, vocab_size=2, n_classes=2, d_model=12)
    model = build_model(cfg, seed=0).eval()
    assert cfg.n_params == model.n_params
    ref = rnn(12, 12, num_layers=3 + 1, batch_first=True)
    with torch.no_grad():  # copy the per-layer weights into one stacked module
        for i, block in enumerate(model.blocks):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l{i}").copy_(getattr(block.rnn, f"{name}_l0"))
    x = torch.randint(0, 2, (3, 9))
    from models_store.capture import run_with_states

    _, states = run_with_states(model, x)
    want, _ = ref(model.embed(x))
    assert torch.allclose(states[3], want, atol=1e-6)  # the last layer = nn.RNN(num_layers=4)'s output


@pytest.mark.parametrize("family", ["lstm_stack", "gru_stack"])
def test_stacked_rnn_state_patching_twin_matches_forward(family):
    from models_store.states import stateful

    model = build_model(ModelConfig(family=family, vocab_size=2, n_classes=2, d_model=10, start_token=True), seed=1)
    model.eval()
    x = torch.randint(0, 2, (2, 7))
    twin = stateful(model)
    assert twin is not None
    trace = twin.trace(x)
    with torch.no_grad():
        assert torch.allclose(trace.last, model(x)[:, -1], atol=1e-5)
        # resuming from the traced state at step 3 gives the same last logits (no residual added)
        t0 = 4
        again = twin.resume(trace, 1, t0, trace.inputs[1][:, t0:], twin.state_at(trace, 1, t0 - 1))
        assert torch.allclose(again, trace.last, atol=1e-5)


@pytest.fixture(scope="module")
def control_env(tmp_path_factory):
    from worker.pipeline import local_env, run_suite

    tmp = tmp_path_factory.mktemp("controls")
    env = local_env(f"sqlite:///{tmp / 'r.db'}", tmp / "store", device="cpu")
    ids = run_suite(SuiteParams(preset="smoke", families=["gru"], tasks=["dyck"], controls=True), env)
    return env, ids


def test_a_control_run_is_untrained_probed_only_and_keyed_apart(control_env):
    env, ids = control_env
    assert len(ids) == 2
    with env.session_factory() as s:
        runs = {r.control: r for r in s.scalars(select(Run).where(Run.id.in_(ids)))}
        ctrl, trained = runs["init"], runs[None]
        assert ctrl.steps == 0 and ctrl.stop_reason is None and ctrl.status == "complete"
        assert trained.steps > 0 and trained.stop_reason in ("trained", "budget", "plateau")
        assert ctrl.model_config == trained.model_config  # the same architecture
        assert ctrl.seed == trained.seed and ctrl.config_hash != trained.config_hash
        for model, want in ((ProbeResult, True), (InterventionResult, False), (PatchingResult, False)):
            n = len(s.scalars(select(model).where(model.run_id == ctrl.id)).all())
            assert (n > 0) == want
    # the control is the trained run's initialisation: the same seed builds the same weights
    from worker.pipeline import load_run

    _, _, m_ctrl = load_run(ctrl.id, env)
    p = TrainParams(**trained.train_config)
    from science.tasks import get_task
    from worker.pipeline import build_model_of

    fresh = build_model_of(p, get_task(p.task))
    for a, b in zip(m_ctrl.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a.cpu(), b)


def test_aggregates_keep_controls_apart_and_read_profiles_against_them(control_env):
    from backend.api import across_seeds
    from backend.api.queries import RunFilter, list_runs

    env, ids = control_env
    with env.session_factory() as s:
        runs, total = list_runs(s, RunFilter(controls="include"), None)
        assert total == 2 and {r["control"] for r in runs} == {None, "init"}
        assert list_runs(s, RunFilter(), None)[1] == 1  # aggregates and verdicts never see the control
        points = across_seeds.curves(s, RunFilter(controls="include"), [40])
        assert {p["control"] for p in points} == {None, "init"}
        assert all(p["control"] is None for p in across_seeds.curves(s, RunFilter(), [40]))
        (prof,) = across_seeds.profiles(s, RunFilter(), [40])
        against = prof["against_control"]
        assert against is not None and against["seeds"] == prof["seeds"] == [0]
        assert against["profile_class"] in ("early", "late", "gradual", "not above control")
        assert against["stability"]["of"] == 81 and prof["stability"]["of"] == 81
        claims = across_seeds.claims(s, RunFilter(suite=["smoke"]))
        assert claims[1]["numbers"]["cells_short_of_seeds"]  # one seed: no verdict, but no error either


def test_suites_and_bundles_count_controls_apart(control_env, tmp_path):
    from backend.bundle_export import export_bundle
    from backend.study_parts import progress

    env, _ = control_env
    with env.session_factory() as s:
        manifest = export_bundle(s, "smoke", tmp_path / "b.zip")
    assert manifest["progress"]["runs_stored"] == 1 and manifest["progress"]["controls_stored"] == 1
    p = progress([{"status": "complete"}, {"status": "complete", "control": "init"}], 3)
    assert p["runs_stored"] == 1 and p["runs_measured"] == 1 and p["runs_remaining"] == 2 and p["controls_stored"] == 1
