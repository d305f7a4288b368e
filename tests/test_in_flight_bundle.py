"""Runs in flight travel in a bundle (``layerscope export --in-flight``, worker/in_flight.py): a run
killed mid-training on one machine, exported with its training state and imported on another,
resumes there to the weights of a run that never stopped (docs/SCIENCE.md#resuming-training)."""

from __future__ import annotations

import zipfile

import pytest

from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from science.context import JobCancelled
from tests.cli_one_line import assert_one_line_error, run_cli
from tests.resume_helpers import CancelAt, assert_resumed_equals_unbroken, fake_state, use_machine
from worker.job_params import TrainParams
from worker.pipeline import local_env, train, training_checkpoint

SMALL = dict(
    family="gru", task="parity", n_layers=2, d_model=16, train_length=12, batch_size=16, max_steps=150,
    eval_every=25, n_eval_sequences=64, warmup_steps=5, curriculum_start=None, early_stop_acc=1.0, lr=1e-4,
)  # fmt: skip


def _env(tmp_path, name):
    return local_env(f"sqlite:///{tmp_path / (name + '.db')}", tmp_path / name, device="cpu")


def test_a_killed_run_resumes_on_another_machine_from_the_bundle(tmp_path):
    here, there = _env(tmp_path, "here"), _env(tmp_path, "there")
    done = TrainParams(**{**SMALL, "max_steps": 30}, seed=1, suite="moving", name="gru-parity-s1")
    flying = TrainParams(**SMALL, seed=0, suite="moving", name="gru-parity-s0")
    other_suite = TrainParams(**SMALL, seed=2, suite="elsewhere", name="gru-parity-s2")
    train(done, here)
    for p in (flying, other_suite):
        with pytest.raises(JobCancelled):
            train(p, here, ctx=CancelAt(130))
    assert training_checkpoint(flying, here).exists() and training_checkpoint(other_suite, here).exists()

    bundle = tmp_path / "moving.layerscope.zip"
    with here.session_factory() as s:
        manifest = export_bundle(s, "moving", bundle, store_dir=here.store_dir, in_flight=True)
    h = flying.run_hash()
    (entry,) = manifest["in_flight"]  # another suite's state stays home
    assert {k: entry[k] for k in ("config_hash", "name", "family", "task", "seed", "step", "resume")} == {
        "config_hash": h, "name": "gru-parity-s0", "family": "gru", "task": "parity", "seed": 0, "step": 100,
        "resume": None,  # a run of no preset: no suite command makes it again
    }  # fmt: skip
    with zipfile.ZipFile(bundle) as z:
        assert sorted(n for n in z.namelist() if n.startswith("training/")) == [
            f"training/{h}.json",
            f"training/{h}.pt",
        ]

    with there.session_factory() as s:
        out = import_bundle(s, bundle, store_dir=there.store_dir)
    assert out["in_flight_restored"] == 1 and training_checkpoint(flying, there).exists()
    run_id = train(flying, there)  # the same run started where the bundle went: resumed
    assert not training_checkpoint(flying, there).exists()

    unbroken = _env(tmp_path, "unbroken")
    want_id = train(flying, unbroken)
    assert_resumed_equals_unbroken(there, run_id, unbroken, want_id, at=[100])


def test_without_the_option_no_state_travels_and_a_stored_run_takes_none(tmp_path):
    here = _env(tmp_path, "here")
    done = TrainParams(**{**SMALL, "max_steps": 30}, seed=1, suite="moving", name="gru-parity-s1")
    flying = TrainParams(**SMALL, seed=0, suite="moving", name="gru-parity-s0")
    train(done, here)
    with pytest.raises(JobCancelled):
        train(flying, here, ctx=CancelAt(130))
    plain, full = tmp_path / "plain.zip", tmp_path / "full.zip"
    with here.session_factory() as s:
        assert "in_flight" not in export_bundle(s, "moving", plain, store_dir=here.store_dir)
        export_bundle(s, "moving", full, store_dir=here.store_dir, in_flight=True)
    with zipfile.ZipFile(plain) as z:
        assert not [n for n in z.namelist() if n.startswith("training/")]

    # the run finished where the bundle goes: its stale state is not written there
    there = _env(tmp_path, "there")
    train(flying, there)
    with there.session_factory() as s:
        out = import_bundle(s, full, store_dir=there.store_dir)
    assert out["in_flight_restored"] == 0 and not training_checkpoint(flying, there).exists()


def test_a_state_already_in_the_store_is_kept(tmp_path):
    """An import never overwrites a local checkpoint (it may be further along than the bundle's)."""
    here = _env(tmp_path, "here")
    train(TrainParams(**{**SMALL, "max_steps": 30}, seed=1, suite="moving", name="gru-parity-s1"), here)
    flying = TrainParams(**SMALL, seed=0, suite="moving", name="gru-parity-s0")
    with pytest.raises(JobCancelled):
        train(flying, here, ctx=CancelAt(130))
    bundle = tmp_path / "b.zip"
    with here.session_factory() as s:
        export_bundle(s, "moving", bundle, store_dir=here.store_dir, in_flight=True)
    there = _env(tmp_path, "there")
    local = training_checkpoint(flying, there)
    local.parent.mkdir(parents=True)
    local.write_bytes(b"local state")
    with there.session_factory() as s:
        assert import_bundle(s, bundle, store_dir=there.store_dir)["in_flight_restored"] == 0
    assert local.read_bytes() == b"local state"


def test_checkpoints_are_found_by_note_or_by_the_presets_hashes(tmp_path):
    """A checkpoint written before notes existed belongs to the suite when its hash is one of the
    suite's preset runs; a stored run's leftover state and a foreign suite's are not the suite's."""
    from worker import in_flight

    folder = tmp_path / "training"
    folder.mkdir()
    noted, preset, stored, foreign = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)
    for h in (noted, preset, stored, foreign):
        (folder / f"{h}.pt").write_bytes(b"x")
    (folder / f"{noted}.json").write_text('{"suite": "s"}')
    (folder / f"{foreign}.json").write_text('{"suite": "t"}')
    (folder / "not-a-hash.pt").write_bytes(b"x")
    found = in_flight.suite_checkpoints(tmp_path, "s", preset_hashes=[preset, stored], stored_hashes=[stored])
    assert sorted(found) == [noted, preset]
    assert found[noted]["note"] == {"suite": "s"} and found[preset]["note"] is None
    assert in_flight.checkpoint_step(folder / f"{noted}.pt") is None  # not a checkpoint: step unknown
    (folder / f"{noted}.pt").write_bytes(b"a training state")  # bytes torch's unpickler fails on otherwise
    with open(folder / f"{noted}.pt", "rb") as file:
        assert (
            in_flight.checkpoint_step(folder / f"{noted}.pt")
            is None
            is in_flight.checkpoint_step(folder / f"{noted}.pt", file)
        )


def test_a_suite_with_no_run_stored_yet_exports_its_runs_in_flight(tmp_path, monkeypatch):
    """The first run of a suite killed before it was stored: ``export --in-flight`` writes a bundle
    of 0 runs and its state (without the option, or with nothing in flight, the refusal stays),
    and the import restores the state."""
    here = use_machine(monkeypatch, tmp_path / "here")
    flying = TrainParams(**SMALL, seed=0, suite="fresh", name="gru-parity-s0")
    state = fake_state(here, flying).read_bytes()
    bundle = tmp_path / "fresh.layerscope.zip"
    assert_one_line_error(["export", "--suite", "fresh", "-o", str(bundle)], "suite 'fresh' has no runs")
    assert_one_line_error(
        ["export", "--suite", "empty", "-o", str(bundle), "--in-flight"], "suite 'empty' has no runs and none in flight"
    )
    rc, _, err = run_cli(["export", "--suite", "fresh", "-o", str(bundle), "--in-flight"])
    assert rc == 0, err
    assert "0 run(s) of suite 'fresh', the training state of 1 run(s) in flight (gru-parity-s0" in err

    there = use_machine(monkeypatch, tmp_path / "there")
    rc, _, err = run_cli(["import", str(bundle)])
    assert rc == 0, err
    assert "0 run(s) and 0 result row(s) added" in err and "training state of 1 run(s) in flight restored" in err
    assert training_checkpoint(flying, there).read_bytes() == state
