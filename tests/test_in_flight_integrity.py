"""An in-flight training state is checked where a bundle is imported (``layerscope export
--in-flight``, docs/SCIENCE.md#resuming-training): the manifest records each state file's size and
sha256, and a file that differs (cut short, corrupted) refuses the import as a whole, in one line
naming the file, before anything is written. A bundle from before the records still imports."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest
from sqlalchemy import func, select

from backend.bundle import BundleError
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from store.models import Job, Run
from tests.cli_one_line import assert_one_line_error, run_cli
from tests.resume_helpers import fake_state, use_machine
from worker.job_params import TrainParams
from worker.pipeline import train, training_checkpoint

SMALL = dict(
    family="gru", task="parity", n_layers=2, d_model=16, train_length=12, batch_size=16, max_steps=150,
    eval_every=25, n_eval_sequences=64, warmup_steps=5, curriculum_start=None, early_stop_acc=1.0, lr=1e-4,
)  # fmt: skip
STATE = bytes(range(256)) * 40  # stands for a checkpoint: only its bytes matter here


@pytest.fixture
def exported(tmp_path, monkeypatch):
    """A bundle of suite ``moving``: one stored run and one run in flight (its state ``STATE``);
    the CLI then points at an empty machine ``there``. Returns (bundle, the run in flight, there's env)."""
    here = use_machine(monkeypatch, tmp_path / "here")
    train(TrainParams(**{**SMALL, "max_steps": 10}, seed=1, suite="moving", name="gru-parity-s1", measure=None), here)
    flying = TrainParams(**SMALL, seed=0, suite="moving", name="gru-parity-s0")
    fake_state(here, flying, STATE)
    bundle = tmp_path / "moving.layerscope.zip"
    with here.session_factory() as s:
        export_bundle(s, "moving", bundle, store_dir=here.store_dir, in_flight=True)
    return bundle, flying, use_machine(monkeypatch, tmp_path / "there")


def _rewrite(bundle, out, change):
    """``bundle`` copied to ``out`` with ``change(name, data) -> data or None`` (None: left out)."""
    with zipfile.ZipFile(bundle) as z, zipfile.ZipFile(out, "w") as w:
        for name in z.namelist():
            data = change(name, z.read(name))
            if data is not None:
                w.writestr(name, data)
    return out


def _nothing_written(env):
    with env.session_factory() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0
        assert s.scalar(select(func.count()).select_from(Job)) == 0
    assert not (env.store_dir / "training").exists()


def test_the_manifest_records_each_state_files_size_and_sha256(exported):
    bundle, flying, _ = exported
    h = flying.run_hash()
    with zipfile.ZipFile(bundle) as z:
        (entry,) = json.loads(z.read("manifest.json"))["in_flight"]
        files = {n: z.read(n) for n in (f"training/{h}.pt", f"training/{h}.json")}
    assert files[f"training/{h}.pt"] == STATE
    assert entry["files"] == {
        name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()
    }


def test_a_cut_short_state_refuses_the_import_and_writes_nothing(exported, tmp_path):
    bundle, flying, there = exported
    name = f"training/{flying.run_hash()}.pt"
    cut = _rewrite(bundle, tmp_path / "cut.zip", lambda n, data: data[:1000] if n == name else data)
    with there.session_factory() as s, pytest.raises(BundleError) as err:
        import_bundle(s, cut, store_dir=there.store_dir)
    assert name in str(err.value) and "1000 bytes" in str(err.value) and f"{len(STATE)} bytes" in str(err.value)
    _nothing_written(there)

    line = assert_one_line_error(["import", str(cut)], f"{name} is damaged")
    assert "nothing imported" in line
    _nothing_written(there)


def test_a_corrupted_or_missing_state_file_is_refused(exported, tmp_path):
    bundle, flying, there = exported
    h = flying.run_hash()
    flipped = _rewrite(
        bundle, tmp_path / "flipped.zip", lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n == f"training/{h}.pt" else d
    )
    assert_one_line_error(["import", str(flipped)], f"training/{h}.pt is damaged")
    raw = bytearray(bundle.read_bytes())  # a bit flipped in the zip file itself: its CRC-32 says so
    with zipfile.ZipFile(bundle) as z:
        info = z.getinfo(f"training/{h}.pt")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)  # after the local header
    raw[start + info.compress_size // 2] ^= 0x10
    (tmp_path / "bitrot.zip").write_bytes(bytes(raw))
    assert_one_line_error(["import", str(tmp_path / "bitrot.zip")], f"training/{h}.pt is damaged in the zip")
    gone = _rewrite(bundle, tmp_path / "gone.zip", lambda n, d: None if n == f"training/{h}.json" else d)
    assert_one_line_error(["import", str(gone)], f"training/{h}.json is listed in the manifest's in_flight")
    _nothing_written(there)


def test_a_bundle_from_before_the_records_imports_unchecked(exported, tmp_path):
    """No size or sha256 recorded: the states are restored, and the import says they were not checked."""
    bundle, flying, there = exported

    def older(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        for entry in manifest["in_flight"]:
            del entry["files"]
        return json.dumps(manifest).encode()

    old = _rewrite(bundle, tmp_path / "old.zip", older)
    rc, _, err = run_cli(["import", str(old)])
    assert rc == 0, err
    assert training_checkpoint(flying, there).read_bytes() == STATE
    assert "not checked (the bundle records no size or sha256)" in err and "sha256 checked" not in err

    rc, _, err = run_cli(["import", str(bundle)])  # the state is there now: kept, nothing claimed of it
    assert rc == 0 and "sha256 checked" not in err, err


def test_the_check_of_the_records_pairs_and_notes():
    """``check_in_flight`` alone: good records pass, an older bundle's states are checked for pairs
    and notes only, and a malformed record, an unlisted file, a lone file or a note that is no JSON
    object is named."""
    from backend.bundle_checks import check_in_flight
    from worker.in_flight import file_record

    h = "a" * 64
    pt, note = f"training/{h}.pt", f"training/{h}.json"
    files = {pt: STATE, note: b'{"name": "gru-parity-s0"}'}
    good = {n: file_record(data) for n, data in files.items()}

    def check(records, found=files):
        return check_in_flight({"in_flight": [{"config_hash": h, "files": records}]}, found)

    assert check(good) == [] and check_in_flight({"in_flight": [{"config_hash": h}]}, files) == []
    assert check({**good, pt: {"size": str(len(STATE)), "sha256": good[pt]["sha256"]}}) == [
        f"manifest.json: in_flight files entry '{pt}' is not a state file's size and sha256"
    ]
    assert check({pt: good[pt]}) == [f"{note} is in the bundle but not in the manifest's in_flight"]
    assert check_in_flight({}, {pt: STATE}) == [f"{pt} is in the bundle without its {note}"]
    assert check_in_flight({}, {**files, note: b"[1]"}) == [
        f"{note} is not a JSON object (the note naming the run in flight)"
    ]
    assert check_in_flight({"in_flight": {"a": 1}}, files) == ["manifest.json: in_flight must be a list of objects"]
