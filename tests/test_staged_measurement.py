"""A staged suite: `--measure probes` trains and probes every run first; the same suite run again
without it measures the rest, skipping the parts already stored (docs/SCIENCE.md#staged-measurement)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from layerscope_core.registry import MEASURE_PARTS
from science.context import SilentContext
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from worker.job_params import MeasurePart, SuiteParams, TrainParams
from worker.presets import expand_suite
from worker.stored_runs import measured_parts, stored_state


def test_the_part_names_are_one_list():
    from typing import get_args

    from worker.run_measurement import PARTS

    assert get_args(MeasurePart) == MEASURE_PARTS == PARTS


def test_parts_reach_every_run_but_not_the_controls_or_any_hash():
    staged = expand_suite(SuiteParams(preset="paper", name="t", tasks=["parity"], parts=["probes"]))
    whole = expand_suite(SuiteParams(preset="paper", name="t", tasks=["parity"]))
    assert [j.run_hash() for j in staged] == [j.run_hash() for j in whole]
    assert [j.measure.config_hash() for j in staged] == [j.measure.config_hash() for j in whole]
    for j in staged:
        assert measured_parts(j) == ("probes",)
        assert j.parts == (None if j.control else ["probes"])
    # a suite without parts keeps the hash it had before the field existed
    from layerscope_core.hashing import config_hash

    plain = SuiteParams(preset="paper", name="t")
    assert plain.config_hash() != SuiteParams(preset="paper", name="t", parts=["probes"]).config_hash()

    d = plain.model_dump(mode="json")
    d.pop("parts"), d.pop("pretrained"), d.pop("from_config")
    assert plain.config_hash() == config_hash(d)
    assert (
        TrainParams(family="lstm", task="parity", parts=["probes"]).run_config()
        == TrainParams(family="lstm", task="parity").run_config()
    )


def test_a_stacked_family_named_with_family_is_one_cell_not_two():
    jobs = expand_suite(
        SuiteParams(preset="paper", name="t", tasks=["parity"], families=["lstm", "lstm_stack"], controls=False)
    )
    assert [(j.family, j.seed) for j in jobs] == [(f, s) for f in ("lstm", "lstm_stack") for s in (0, 1, 2)]


def _rows(env, run_id: int) -> dict[str, list[int]]:
    with env.session_factory() as s:
        return {
            part: sorted(s.scalars(select(table.id).where(table.run_id == run_id)).all())
            for part, table in zip(MEASURE_PARTS, (ProbeResult, InterventionResult, PatchingResult))
        }


class _ProgressRecorder(SilentContext):
    """Every progress fraction reported, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[float] = []

    def progress(self, fraction: float, message: str = "") -> None:
        self.values.append(fraction)


def test_share_measured_weighs_the_stored_parts():
    from worker.run_measurement import share_measured

    assert share_measured(MEASURE_PARTS, []) == 0.0
    assert share_measured(MEASURE_PARTS, MEASURE_PARTS) == 1.0
    assert share_measured(MEASURE_PARTS, ["probes"]) == pytest.approx(0.3)
    assert share_measured(["probes", "patching"], ["probes"]) == pytest.approx(0.3 / 0.45)
    assert share_measured([], ["probes"]) == 0.0


@pytest.fixture(scope="module")
def staged_env(tmp_path_factory):
    from worker.pipeline import local_env, run_suite

    tmp = tmp_path_factory.mktemp("staged")
    env = local_env(f"sqlite:///{tmp / 'r.db'}", tmp / "store", device="cpu")
    params = SuiteParams(preset="smoke", families=["gru"], tasks=["parity"], seeds=[0], parts=["probes"])
    (run_id,) = run_suite(params, env)
    return env, run_id, params


def test_probes_first_leaves_the_run_trained_with_probe_rows_only(staged_env):
    env, run_id, params = staged_env
    rows = _rows(env, run_id)
    assert rows["probes"] and not rows["interventions"] and not rows["patching"]
    with env.session_factory() as s:
        assert s.get(Run, run_id).status == "trained"  # not complete: two parts are missing
    (job,) = expand_suite(params)
    assert stored_state(job, env) == (run_id, "complete")  # the staged suite skips it on resume
    (whole,) = expand_suite(params.model_copy(update={"parts": None}))
    assert stored_state(whole, env) == (run_id, "trained")  # the whole suite measures the rest


def test_the_whole_suite_then_adds_the_rest_and_keeps_the_probes(staged_env, monkeypatch):
    from science.resume_folder import ResumeFolder
    from worker.pipeline import run_suite

    cleared: list[list[str]] = []
    real_clear = ResumeFolder.clear
    monkeypatch.setattr(ResumeFolder, "clear", lambda f: cleared.append(sorted(os.listdir(f.path))) or real_clear(f))
    env, run_id, params = staged_env
    probes_before = _rows(env, run_id)["probes"]
    with env.session_factory() as s:
        steps_before = s.get(Run, run_id).steps
    bar = _ProgressRecorder()
    assert run_suite(params.model_copy(update={"parts": None}), env, bar) == [run_id]
    # the bar goes on from where the stored probes leave it (training and probes done), never back
    assert bar.values[0] >= 0.5 + 0.5 * 0.3 - 1e-9, bar.values[:3]
    assert bar.values == sorted(bar.values) and bar.values[-1] == 1.0
    rows = _rows(env, run_id)
    assert rows["probes"] == probes_before  # stored before: not fitted again
    assert rows["interventions"] and rows["patching"]
    # the interventions' pieces kept for a resume (science/resume_folder.py) go once they are stored
    measuring = Path(env.store_dir) / "measuring"
    assert len(cleared) == 1 and "rows-L40.pt" in cleared[0] and any(n.startswith("fit-") for n in cleared[0])
    assert measuring.is_dir() and not any(measuring.iterdir())
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert run.status == "complete" and run.steps == steps_before  # measured, not trained again
    (whole,) = expand_suite(params.model_copy(update={"parts": None}))
    assert stored_state(whole, env) == (run_id, "complete")


def test_cli_takes_measure_and_refuses_an_unknown_part(tmp_path, monkeypatch):
    from backend.cli import app

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path))
    bad = CliRunner().invoke(app, ["suite", "--preset", "smoke", "--measure", "probez"])
    assert bad.exit_code == 2 and "probez" in bad.output and "probes" in bad.output
    help_text = CliRunner().invoke(app, ["suite", "--help"], env={"COLUMNS": "200"}).output
    assert "--measure" in help_text


def test_cli_says_what_a_staged_suite_left_to_measure(tmp_path, monkeypatch):
    from backend.cli import app

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path))
    args = ["suite", "--preset", "smoke", "--family", "gru", "--task", "parity", "--seed", "0", "--device", "cpu"]
    staged = CliRunner().invoke(app, [*args, "--measure", "probes"])
    assert staged.exit_code == 0, staged.output
    assert "interventions, patching still to measure: run the same suite without --measure" in staged.output
    whole = CliRunner().invoke(app, args)
    assert whole.exit_code == 0 and "still to measure" not in whole.output
