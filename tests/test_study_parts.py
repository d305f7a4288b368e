"""A study made in parts: the manifest says how far it has come and where each part was made."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from backend import study_parts as P
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from store.migrate import init_db
from store.models import Run
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs


def _runs(*specs):
    return [
        {"config_hash": h, "train_seconds": t, "status": st, "made_on": on, "created_at": at}
        for h, t, st, on, at in specs
    ]


def test_progress_counts_against_the_preset() -> None:
    runs = _runs(
        ("a", 1.0, "complete", "gpu", "1"), ("b", 2.0, "trained", "gpu", "2"), ("c", 3.0, "complete", "cpu", "3")
    )
    assert P.progress(runs, 5) == {
        "complete": False,
        "preset_runs": 5,
        "runs_stored": 3,
        "runs_measured": 2,
        "runs_stored_not_measured": 1,
        "runs_not_started": 2,
        "runs_remaining": 3,
    }
    assert P.progress(runs[:1] + runs[2:], 2)["complete"] is True
    assert P.progress(runs, None) is None


def test_preset_run_count_expands_the_preset() -> None:
    assert P.preset_run_count("paper") == 60 + 12  # 5 × 4 × 3 + stacked RNNs 2 × 2 × 3 (controls counted apart)
    assert P.preset_run_count("paper-75s") == 60  # the first study: 5 families × 4 tasks × 3 seeds
    assert P.preset_run_count("smoke") == 15
    assert P.preset_run_count("my-suite") is None


def test_partial_keeps_the_reasons_and_adds_the_note() -> None:
    now = P.progress(_runs(("a", 1.0, "complete", "gpu", "1")), 4)
    imported = {"partial": {"complete": False, "runs_stored": 1, "why": "one GPU lease", "notes": ["first"]}}
    block = P.partial_block(now, imported, "resumed on a CPU")
    assert block["why"] == "one GPU lease" and block["notes"] == ["first", "resumed on a CPU"]
    assert block["runs_remaining"] == 3 and block["runs_stored"] == 1  # today's counts, not the old ones
    done = P.progress(_runs(("a", 1.0, "complete", "gpu", "1")), 1)
    assert P.partial_block(done, imported, "x") is None  # a complete study is not partial
    # a suite that is no preset: nothing to count, the bundle's block stays
    assert P.partial_block(None, imported, None) == imported["partial"]
    assert P.partial_block(None, None, None) is None


def test_parts_split_runs_by_where_they_were_made() -> None:
    imported = {
        "created_at": "2026-11-30",
        "git_commit": "gpu-commit",
        "torch": "2.11.0",
        "runs": [{"config_hash": "a", "train_seconds": 1.0}, {"config_hash": "b", "train_seconds": 2.0}],
    }
    runs = _runs(
        ("a", 1.0, "complete", "cuda on h200", "1"),
        ("b", 9.5, "complete", "cpu on vm", "5"),  # b came in unmeasured and was trained again here
        ("c", 3.0, "complete", "cpu on vm", "4"),
    )
    out = P.parts(runs, {"git_commit": "cpu-commit", "torch": "2.13.0", "created_at": "2026-12-01"}, imported)
    assert [p["source"] for p in out] == ["made for the export of 2026-11-30", "made for the export of 2026-12-01"]
    assert (out[0]["runs"], out[0]["git_commit"], out[0]["devices"]) == (1, "gpu-commit", ["cuda on h200"])
    assert (out[1]["runs"], out[1]["git_commit"], out[1]["torch"]) == (2, "cpu-commit", "2.13.0")
    assert out[1]["made_between"] == ["4", "5"]
    # a bundle that already has parts keeps them; the new part follows
    again = P.parts(
        runs + _runs(("d", 4.0, "complete", "cpu on box", "9")),
        {"git_commit": "later"},
        {
            **imported,
            "parts": out,
            "runs": [{"config_hash": h, "train_seconds": t} for h, t in (("a", 1.0), ("b", 9.5), ("c", 3.0))],
        },
    )
    assert [p["runs"] for p in again] == [1, 2, 1] and again[-1]["git_commit"] == "later"


def test_parts_follow_the_code_recorded_with_each_run() -> None:
    gpu = {"layerscope": "0.1.0", "git_commit": "aaa", "python": "3.12", "torch": "2.11.0", "transformers": "5"}
    cpu = {**gpu, "git_commit": "bbb", "python": "3.11", "torch": "2.13.0"}
    runs = _runs(
        ("a", 1.0, "complete", "cuda on h200", "1"),
        ("b", 2.0, "complete", "cuda on h200", "2"),
        ("c", 3.0, "complete", "cpu on vm", "3"),
    )
    for r, made_with in zip(runs, (gpu, gpu, cpu)):
        r["made_with"] = made_with
    exporter = {**cpu, "git_commit": "ccc", "created_at": "2026-12-01"}
    imported = {"parts": [{"git_commit": "what the old export said", "runs": 3}], "runs": []}
    out = P.parts(runs, exporter, imported)  # every run knows its code: the old parts are not needed
    assert [(p["git_commit"], p["runs"], p["devices"], p["torch"]) for p in out] == [
        ("aaa", 2, ["cuda on h200"], "2.11.0"),
        ("bbb", 1, ["cpu on vm"], "2.13.0"),
    ]
    # a run without a record (made before schema 0004) is put with the exporter's code
    runs.append({**_runs(("d", 4.0, "trained", "cpu on vm", "4"))[0]})
    out = P.parts(runs, exporter, None)
    assert [(p["git_commit"], p["runs"]) for p in out] == [("aaa", 2), ("bbb", 1), ("ccc", 1)]


def test_a_trained_run_records_the_code_that_made_it(tmp_path) -> None:
    from layerscope_core.provenance import VERSION_KEYS, code_versions
    from worker.job_params import SuiteParams
    from worker.pipeline import local_env, run_suite

    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    (run_id,) = run_suite(SuiteParams(preset="smoke", families=["gru"], tasks=["parity"], seeds=[0], max_steps=2), env)
    with env.session_factory() as s:
        made_with = s.get(Run, run_id).made_with
    assert set(made_with) == set(VERSION_KEYS) and made_with == code_versions()
    assert made_with["torch"] and made_with["python"]


def test_reexport_after_resuming_counts_and_names_both_parts(sqlite_url, tmp_path) -> None:
    init_db(sqlite_url)
    factory = make_sessionmaker(make_engine(sqlite_url))
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="paper")
    with factory() as s:
        s.query(Run).update({"made_on": "cuda (NVIDIA H200) on gpu-box", "status": "complete"})
        s.commit()
        first = tmp_path / "first.zip"
        m1 = export_bundle(s, "paper", first, note="one GPU lease")
    assert m1["progress"]["runs_measured"] == 2 and m1["partial"]["runs_remaining"] == 70
    assert m1["partial"]["notes"] == ["one GPU lease"] and len(m1["parts"]) == 1

    url2 = f"sqlite:///{tmp_path / 'resumed.db'}"
    init_db(url2)
    target = make_sessionmaker(make_engine(url2))
    with target() as s:
        import_bundle(s, first)
    seed_runs(target, families=("gru",), tasks=("dyck",), seeds=(0,), suite="paper")  # made here, on a CPU
    with target() as s:
        s.query(Run).filter(Run.family == "gru").update({"made_on": "cpu on vm", "status": "complete"})
        s.commit()
        m2 = export_bundle(s, "paper", tmp_path / "second.zip", note="resumed on a CPU")
    assert m2["progress"]["runs_measured"] == 3 and m2["partial"]["runs_remaining"] == 69
    assert m2["partial"]["notes"] == ["one GPU lease", "resumed on a CPU"]
    assert [(p["runs"], p["devices"]) for p in m2["parts"]] == [
        (2, ["cuda (NVIDIA H200) on gpu-box"]),
        (1, ["cpu on vm"]),
    ]
    with zipfile.ZipFile(tmp_path / "second.zip") as z:
        assert json.loads(z.read("manifest.json"))["parts"] == m2["parts"]


def test_a_completed_study_keeps_the_notes_of_every_export(sqlite_url, tmp_path) -> None:
    """Finishing a study dropped the ``partial`` block and with it how the parts were made."""
    from backend.report import _markdown

    init_db(sqlite_url)
    factory = make_sessionmaker(make_engine(sqlite_url))
    families = ("gru", "lstm", "mamba", "mamba2", "transformer")
    seed_runs(factory, families=families[:-1], tasks=("parity", "s3", "dyck"), seeds=(0,), suite="smoke")
    with factory() as s:
        s.query(Run).update({"status": "complete"})
        s.commit()
        first = export_bundle(s, "smoke", tmp_path / "first.zip", note="made on a GPU lease")
    assert first["partial"]["notes"] == ["made on a GPU lease"] and first["notes"] == ["made on a GPU lease"]
    with zipfile.ZipFile(tmp_path / "first.zip") as z:  # as a bundle made before `notes` existed
        manifest = json.loads(z.read("manifest.json"))
        manifest.pop("notes")
        manifest["partial"]["why"] = "one GPU lease, stopped at its deadline"
        blobs = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    with zipfile.ZipFile(tmp_path / "first.zip", "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for n, b in blobs.items():
            z.writestr(n, b)
    url2 = f"sqlite:///{tmp_path / 'resumed.db'}"  # resumed elsewhere from the first bundle
    init_db(url2)
    target = make_sessionmaker(make_engine(url2))
    with target() as s:
        import_bundle(s, tmp_path / "first.zip")
    seed_runs(target, families=families[-1:], tasks=("parity", "s3", "dyck"), seeds=(0,), suite="smoke")
    with target() as s:
        s.query(Run).update({"status": "complete"})
        s.commit()
        done = export_bundle(s, "smoke", tmp_path / "done.zip", note="finished on a CPU")
    assert done["progress"]["complete"] and "partial" not in done
    assert done["notes"] == ["one GPU lease, stopped at its deadline", "made on a GPU lease", "finished on a CPU"]
    text = _markdown(done, [], set(), [], "figures", "figures turned off", "done.zip")
    assert "- the notes of its exports:\n  - one GPU lease, stopped at its deadline\n  - made on a GPU lease" in text


def test_the_first_study_is_read_as_the_preset_that_made_it() -> None:
    """The shipped bundle's suite is named "paper", but its 60 runs are the first study's
    (75 s, 10,000 steps): their config hashes are paper-75s's, not today's paper preset's."""
    from backend.bundle import read_bundle

    _, tables = read_bundle(Path(__file__).parents[1] / "examples" / "paper.layerscope.zip")
    hashes = [r["config_hash"] for r in tables["runs"]]
    assert P.suite_preset("paper", hashes) == "paper-75s"
    assert P.preset_run_count("paper", hashes) == 60
    assert P.suite_preset("paper", ["not-a-hash"]) == "paper"  # nothing matches: the preset it is named after
    assert P.suite_preset("mine", []) is None


def test_a_run_in_flight_counts_as_started() -> None:
    """A run whose training state travels in the bundle (export --in-flight) is no run 'never
    started' (the paper-steps bundle of 2026-12-03 said '1 never started' of its run in flight)."""
    from backend.report import _bundle_section

    runs = _runs(("a", 1.0, "complete", "cpu", "1"), ("b", 2.0, "trained", "cpu", "2"))
    now = P.progress(runs, 4, in_flight=1)
    assert (now["runs_in_flight"], now["runs_not_started"], now["runs_remaining"]) == (1, 1, 3)
    assert "runs_in_flight" not in P.progress(runs, 4)
    for r in runs:
        r.update(id=r.get("id", r["config_hash"]), control=None, heldout_acc=1.0, early_stop_acc=0.99)
    manifest = {"suite": "s", "in_flight": [{"run_hash": "h"}]}
    lines = _bundle_section(manifest, runs, set(), [], "b.zip", "out.md", {"runs": 4})
    assert any("2 stored of the preset's 4 (1 in flight, 1 never started)" in line for line in lines)
    lines = _bundle_section({"suite": "s", "in_flight": [{}, {}]}, runs, set(), [], "b.zip", "out.md", {"runs": 4})
    assert any("2 stored of the preset's 4 (2 in flight)" in line for line in lines)


def test_a_filtered_suite_plans_the_runs_it_asked_for():
    """A bundle of ``suite --preset smoke --family mamba --family mamba2 --task parity --name fam``
    said "2 of the preset's 15 runs measured"; its progress counts the suite job's own runs."""
    from worker.job_params import SuiteParams

    params = SuiteParams(preset="smoke", name="fam", families=["mamba", "mamba2"], tasks=["parity"]).model_dump(
        mode="json"
    )
    assert P.planned_run_count(params, "fam") == 2
    assert P.planned_run_count(None, "smoke") == 15  # no suite job here: the preset's count
    assert P.planned_run_count({**params, "controls": "only"}, "smoke") == 15
