"""A measurement in flight travels in a bundle (``layerscope export --in-flight``,
worker/in_flight_measuring.py): a run whose interventions were killed part-way on one machine is
exported with its finished pieces and its weights, imported on a fresh machine, and the same suite
there resumes the measurement at its next piece, to the rows of a measurement that never stopped.
Why: every session of the study starts on a fresh machine, and a Mamba run's interventions take
longer than what is left of a session (docs/SCIENCE.md#staged-measurement)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlalchemy import select

from backend.bundle import BundleError
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from science.context import JobCancelled
from science.resume_folder import ResumeFolder
from store.models import InterventionResult, Run
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite

PROBES_FIRST = SuiteParams(preset="smoke", families=["gru"], tasks=["parity"], seeds=[0], parts=["probes"])
WHOLE = PROBES_FIRST.model_copy(update={"parts": None})


def _env(tmp_path, name):
    return local_env(f"sqlite:///{tmp_path / (name + '.db')}", tmp_path / name, device="cpu")


def _killed_after_first_length(monkeypatch):
    """The interventions stop (as a kill would) once the first eval length's rows are kept."""
    real_save = ResumeFolder.save

    def save(folder, name, piece):
        real_save(folder, name, piece)
        if name.startswith("rows-L"):
            raise JobCancelled("killed")

    monkeypatch.setattr(ResumeFolder, "save", save)


def _intervention_rows(env, run_id):
    with env.session_factory() as s:
        rows = s.scalars(
            select(InterventionResult).where(InterventionResult.run_id == run_id).order_by(InterventionResult.id)
        ).all()
        keep = ("method", "layer", "eval_length", "base_acc", "edited_acc", "refit_acc", "rank_removed", "p_holm")
        return [tuple(getattr(r, k) for k in keep) for r in rows]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A bundle of a run whose interventions were killed after their first eval length."""
    tmp = tmp_path_factory.mktemp("measuring")
    here = _env(tmp, "here")
    run_suite(PROBES_FIRST, here)
    with pytest.MonkeyPatch.context() as mp:
        _killed_after_first_length(mp)
        with pytest.raises(JobCancelled):
            run_suite(WHOLE, here)
    bundle = tmp / "smoke.layerscope.zip"
    with here.session_factory() as s:
        manifest = export_bundle(s, "smoke", bundle, store_dir=here.store_dir, in_flight=True)
    return tmp, here, bundle, manifest


def test_the_pieces_and_their_weights_travel_and_resume_to_the_unbroken_rows(exported, tmp_path, monkeypatch):
    import science.measure as measure

    tmp, here, bundle, manifest = exported
    (entry,) = manifest["measuring"]
    assert (entry["name"], entry["part"], entry["task"], entry["seed"]) == (
        "gru-parity-s0",
        "interventions",
        "parity",
        0,
    )
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
    pieces = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith(f"measuring/{entry['folder']}/"))
    assert "note.json" in pieces and "rows-L40.pt" in pieces and "rows-L60.pt" not in pieces
    assert entry["pieces"] == len(pieces) - 1 and any(p.startswith("fit-") for p in pieces)
    assert entry["weights"] and any(n.startswith(f"weights/{entry['weights']}/") for n in names)

    there = _env(tmp_path, "there")
    run_suite(PROBES_FIRST.model_copy(update={"seeds": [1], "name": "other"}), there)  # ids differ there
    with there.session_factory() as s:
        out = import_bundle(s, bundle, store_dir=there.store_dir)
    assert out["measuring_restored"] == 1 and out["measuring_states"][0]["why_not"] is None
    fits: list[str] = []
    real_fit = measure.fit_edit
    monkeypatch.setattr(measure, "fit_edit", lambda method, *a, **k: fits.append(method) or real_fit(method, *a, **k))
    run_suite(WHOLE, there)
    assert fits == []  # every edit was read back: fitted on the first machine
    with there.session_factory() as s:
        run = s.scalars(select(Run).where(Run.suite == "smoke")).one()
        assert (
            run.id != 1 and run.status == "complete" and "rebuilt_from" not in (run.made_with or {})
        )  # the carried weights
    assert not any((there.store_dir / "measuring").iterdir())  # stored: its pieces are done with

    monkeypatch.undo()
    unbroken = _env(tmp_path, "unbroken")
    run_suite(WHOLE, unbroken)
    assert _intervention_rows(there, run.id) == _intervention_rows(unbroken, 1)


def test_an_import_keeps_a_folder_already_there_and_skips_a_measurement_stored_there(exported, tmp_path):
    _, _, bundle, _ = exported
    there = _env(tmp_path, "there")
    with there.session_factory() as s:
        assert import_bundle(s, bundle, store_dir=there.store_dir)["measuring_restored"] == 1
        again = import_bundle(s, bundle, store_dir=there.store_dir)["measuring_states"]
    assert again[0]["restored"] is False and "here already" in again[0]["why_not"]
    run_suite(WHOLE, there)  # measured in full here: the bundle's pieces are of no use any more
    with there.session_factory() as s:
        (late,) = import_bundle(s, bundle, store_dir=there.store_dir)["measuring_states"]
    assert late["restored"] is False and late["why_not"] == "its run's interventions are stored here"
    assert not any((there.store_dir / "measuring").iterdir())


def _rewritten(bundle, change) -> io.BytesIO:
    """``bundle`` with ``change(name, bytes) -> bytes | None`` applied to each entry (None: left out)."""
    out = io.BytesIO()
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            blob = change(name, src.read(name))
            if blob is not None:
                dst.writestr(name, blob)
    out.seek(0)
    return out


def test_a_damaged_or_unlisted_piece_refuses_the_bundle_and_writes_nothing(exported, tmp_path):
    _, _, bundle, manifest = exported
    folder = manifest["measuring"][0]["folder"]
    cut = _rewritten(bundle, lambda n, b: b[:-7] if n == f"measuring/{folder}/rows-L40.pt" else b)
    extra = _rewritten(bundle, lambda n, b: b)
    with zipfile.ZipFile(extra, "a") as z:
        z.writestr(f"measuring/{folder}/rows-L60.pt", b"not listed")

    def without_note(name, blob):
        if name == f"measuring/{folder}/note.json":
            return None
        if name == "manifest.json":  # nor its record: the pieces alone are left
            m = json.loads(blob)
            m["measuring"][0]["files"].pop(f"measuring/{folder}/note.json")
            return json.dumps(m).encode()
        return blob

    no_note = _rewritten(bundle, without_note)
    there = _env(tmp_path, "there")
    for broken, says in (
        (cut, f"measuring/{folder}/rows-L40.pt is damaged"),
        (extra, f"measuring/{folder}/rows-L60.pt is in the bundle but not in the manifest's measuring"),
        (no_note, f"measuring/{folder}/note.json is missing or not a JSON object"),
    ):
        with there.session_factory() as s, pytest.raises(BundleError, match=says):
            import_bundle(s, broken, store_dir=there.store_dir)
        with there.session_factory() as s:
            assert s.scalars(select(Run)).all() == []
        assert not (there.store_dir / "measuring").exists()


def test_a_folder_stored_meanwhile_is_left_out_whole(exported, tmp_path, monkeypatch):
    """A worker that stores the part between the export's listing and its reading removes the
    folder: the export leaves that measurement out, rather than fail or write half of it."""
    from worker import in_flight_measuring

    _, here, _, _ = exported
    real = in_flight_measuring.suite_folders
    monkeypatch.setattr(
        in_flight_measuring,
        "suite_folders",
        lambda store_dir, suite: {n: {**f, "path": tmp_path / "gone"} for n, f in real(store_dir, suite).items()},
    )
    out = tmp_path / "meanwhile.zip"
    with here.session_factory() as s:
        manifest = export_bundle(s, "smoke", out, store_dir=here.store_dir, in_flight=True)
    assert manifest["measuring"] == []
    with zipfile.ZipFile(out) as z:
        assert not [n for n in z.namelist() if n.startswith("measuring/")]


def test_the_cli_says_what_travelled_and_what_was_restored(exported, tmp_path, monkeypatch):
    from tests.cli_one_line import run_cli
    from tests.resume_helpers import use_machine

    tmp, here, _, manifest = exported
    (entry,) = manifest["measuring"]
    for var, value in (("LAYERSCOPE_DB_URL", f"sqlite:///{tmp / 'here.db'}"), ("LAYERSCOPE_STORE_DIR", here.store_dir)):
        monkeypatch.setenv(var, str(value))
    from store.settings import get_settings

    get_settings.cache_clear()
    try:
        out = tmp_path / "cli.zip"
        rc, _, err = run_cli(["export", "--suite", "smoke", "-o", str(out), "--in-flight"])
        assert (
            rc == 0
            and f"the finished pieces of 1 measurement(s) in flight with their weights (gru-parity-s0's interventions: {entry['pieces']})"
            in err
        )
        use_machine(monkeypatch, tmp_path / "there")
        rc, _, err = run_cli(["import", str(out)])
        assert rc == 0
        assert (
            f"layerscope: measuring: restored gru-parity-s0's interventions ({entry['pieces']} finished pieces): "
            "the same suite resumes it at its next piece"
        ) in err
    finally:
        get_settings.cache_clear()
