"""What a state in flight needs to be resumed travels with it (docs/SCIENCE.md#resuming-training):
the note beside a checkpoint records the suite command, overrides included, that resumes the run;
the import says it for each state it restores and why it left any out; and a suite run that
starts the same run (suite, name, seed) with other settings warns that it leaves that state
unused, naming the command that would resume it."""

from __future__ import annotations

import json
import shlex

import pytest
from sqlalchemy import select

from science.context import JobCancelled
from store.models import Run
from tests.cli_one_line import run_cli
from tests.resume_helpers import CancelAt, use_machine
from worker import in_flight
from worker.job_params import SuiteParams
from worker.pipeline import train, training_checkpoint
from worker.presets import expand_suite

SUITE = dict(preset="smoke", name="steps-moved", families=["gru"], tasks=["parity"], seeds=[0])
RESUME = "layerscope suite --preset smoke --name steps-moved --family gru --task parity --seed 0 --max-steps 150"


def test_the_note_names_the_command_that_resumes_the_run(tmp_path, monkeypatch):
    here = use_machine(monkeypatch, tmp_path / "here")
    (run,) = expand_suite(SuiteParams(**SUITE, max_steps=150))
    with pytest.raises(JobCancelled):  # smoke's blocks of 6 steps: the state of step 102 is left
        train(run, here, ctx=CancelAt(125))
    ckpt = training_checkpoint(run, here)
    note = json.loads(in_flight.note_path(ckpt).read_text())
    assert note["preset"] == "smoke" and note["overrides"] == {"max_steps": 150} and note["resume"] == RESUME
    assert note["run_config"] == run.run_config()  # every setting its config hash is made of

    # the same run (suite, name, seed) started with other settings: warned, with the command that resumes the other
    other = run.twin(max_steps=160)
    ctx = CancelAt(1)
    with pytest.raises(JobCancelled):
        train(other, here, ctx=ctx)
    (warning,) = [line for line in ctx.lines if line.startswith("warning:")]
    assert f"training/{run.run_hash()}.pt" in warning and "max_steps 150 there, 160 now" in warning
    assert f"`{RESUME}` resumes it" in warning
    ctx = CancelAt(1)
    with pytest.raises(JobCancelled):  # the run itself resumes its state; the other left none (killed at step 1)
        train(run, here, ctx=ctx)
    assert not [line for line in ctx.lines if line.startswith("warning:")]

    bundle = tmp_path / "steps-moved.layerscope.zip"
    rc, _, err = run_cli(["export", "--suite", "steps-moved", "-o", str(bundle), "--in-flight"])
    assert rc == 0, err

    there = use_machine(monkeypatch, tmp_path / "there")
    rc, _, err = run_cli(["import", str(bundle)])
    assert rc == 0, err
    assert f"restored gru-parity-s0 (step 102; size and sha256 checked): resume it with `{RESUME}`" in err
    rc, _, err = run_cli(["import", str(bundle)])
    assert rc == 0 and "not restored: gru-parity-s0: a training state of this run is here already (kept)" in err, err

    rc, _, err = run_cli([*shlex.split(RESUME)[1:], "--device", "cpu"])  # the command as the note says it
    assert rc == 0, err
    with there.session_factory() as s:
        stored = s.scalars(select(Run)).one()
        assert (stored.config_hash, stored.made_with["resumed_at_steps"]) == (run.run_hash(), [102])
    rc, _, err = run_cli(["import", str(bundle)])
    assert rc == 0 and "not restored: gru-parity-s0: its run is stored here (its training is over)" in err, err
    assert not training_checkpoint(run, there).exists()


def test_a_run_outside_any_preset_has_no_suite_command():
    """A lone train job's note keeps its settings; no suite command resumes it."""
    (run,) = expand_suite(SuiteParams(**SUITE))
    lone = run.twin(d_model=24, param_target=1000)
    note = in_flight.note_of(lone, lone.run_hash())
    assert note["resume"] is None and note["preset"] is None and note["run_config"] == lone.run_config()
    assert in_flight.note_of(run, run.run_hash())["resume"] == RESUME.removesuffix(" --max-steps 150")


@pytest.mark.parametrize(
    "suite",
    [
        dict(preset="paper", name="paper-steps", families=["mamba"], tasks=["s3"], seeds=[2], max_seconds=300.5),
        dict(preset="paper", families=["gru"], tasks=["parity"], seeds=[1], controls="only", max_steps=77),
        dict(preset="quick", families=["lstm"], tasks=["dyck"], seeds=[3]),
    ],
)
def test_the_command_as_the_cli_reads_it_makes_the_same_run(suite, tmp_path, monkeypatch):
    """Each run's ``resume`` line, read by the CLI (submitted, not run), is a suite that makes that very run."""
    from store.models import Job

    use_machine(monkeypatch, tmp_path)
    for run in expand_suite(SuiteParams(**suite)):
        resume = in_flight.note_of(run, run.run_hash())["resume"]
        rc, out, err = run_cli([*shlex.split(resume)[1:], "--submit"])
        assert rc == 0, err
        with use_machine(monkeypatch, tmp_path).session_factory() as s:
            params = SuiteParams(**s.get(Job, int(out.split()[-1])).params)
        assert run.run_hash() in {j.run_hash() for j in expand_suite(params)}, resume
