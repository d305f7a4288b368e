"""One entry path for measurements (worker.run_measurement.measure_run): a run trained at a length
other than 40 gets the same intervention edits whether measured by the suite pipeline
(``train`` → ``run_measurements``) or by a follow-up ``intervene`` job — both fit at the run's
``train_length`` — and both record that fit length in their ``measure_settings`` row."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult
from worker.job_params import InterveneParams, MeasureParams, TrainParams
from worker.pipeline import intervene, local_env, train

TRAIN_LENGTH = 12  # not the default 40 the suite path used to fit at
MEASURE = dict(
    eval_lengths=[TRAIN_LENGTH, 16],
    n_probe_sequences=40,
    methods=["mean", "project_out"],
    conv1d=False,
    n_permutations=100,
)
# columns the two paths must agree on (config_hash names the requesting params, settings_id its row)
SAME = (
    "method",
    "layer",
    "eval_length",
    "k",
    "base_acc",
    "edited_acc",
    "delta_pp",
    "drop_rel_chance",
    "refit_acc",
    "refit_majority",
    "rank_removed",
    "n_fit_sequences",
    "p_value",
    "p_holm",
    "significant",
    "n_sequences",
    "seed",
)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("entry")
    env = local_env(f"sqlite:///{root / 'r.db'}", root / "store", device="cpu")
    params = TrainParams(
        family="gru",
        task="parity",
        seed=3,
        n_layers=2,
        d_model=16,
        train_length=TRAIN_LENGTH,
        max_steps=8,
        batch_size=16,
        eval_every=4,
        n_eval_sequences=32,
        warmup_steps=0,
        curriculum_start=None,
        measure=MeasureParams(
            **MEASURE, patch_eval_length=TRAIN_LENGTH, n_patch_pairs=8, patch_positions=[2], patch_sites=["resid_post"]
        ),
    )
    run_id = train(params, env)
    return env, run_id, params


def _rows(env, run_id: int) -> dict[tuple, dict]:
    with env.session_factory() as s:
        rows = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run_id)).all()
        return {(r.method, r.layer, r.eval_length): {c: getattr(r, c) for c in SAME} for r in rows}


def _fit_lengths(env, run_id: int) -> set[int]:
    with env.session_factory() as s:
        ids = s.scalars(select(InterventionResult.settings_id).where(InterventionResult.run_id == run_id)).all()
        return set(s.scalars(select(MeasureSettings.fit_length).where(MeasureSettings.id.in_(ids))).all())


def test_suite_and_intervene_job_fit_the_same_edits_at_the_train_length(measured) -> None:
    env, run_id, params = measured
    suite_rows = _rows(env, run_id)
    assert suite_rows and _fit_lengths(env, run_id) == {TRAIN_LENGTH}
    job = InterveneParams(
        run_id=run_id,
        methods=MEASURE["methods"],
        eval_lengths=MEASURE["eval_lengths"],
        n_probe_sequences=MEASURE["n_probe_sequences"],
        conv1d=False,
        n_permutations=MEASURE["n_permutations"],
    )
    assert intervene(job, env) == run_id
    job_rows = _rows(env, run_id)
    assert _fit_lengths(env, run_id) == {TRAIN_LENGTH}
    assert job_rows.keys() == suite_rows.keys()
    assert job_rows == suite_rows  # same fit data, same edits, same effects


def test_every_result_row_points_at_one_settings_row_written_once(measured) -> None:
    env, run_id, params = measured
    with env.session_factory() as s:
        ids = {
            model: set(s.scalars(select(model.settings_id).where(model.run_id == run_id)).all())
            for model in (ProbeResult, PatchingResult)
        }
        assert all(len(v) == 1 and None not in v for v in ids.values())
        (sid,) = ids[ProbeResult]
        row = s.get(MeasureSettings, sid)
        assert row.fit_length == TRAIN_LENGTH and row.eval_lengths == [TRAIN_LENGTH, 16]
        assert row.patch_eval_length == TRAIN_LENGTH and row.params == params.measure.model_dump(mode="json")
        assert ids[PatchingResult] == {sid}
        n = len(s.scalars(select(MeasureSettings)).all())
    train(params.model_copy(update={"force": True}), env)  # same settings again: no second row
    with env.session_factory() as s:
        assert len(s.scalars(select(MeasureSettings)).all()) == n
