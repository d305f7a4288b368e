"""A bundle made from a real (smoke) run: `make demo`'s import step and `layerscope report`."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from backend.bundle import imported_suites
from backend.bundle_export import export_bundle
from backend.cli import main
from backend.cli.demo import demo_bundle
from backend.report import AGREEMENT, build_report
from store.models import ProbeResult, Run
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite


@pytest.fixture(scope="module")
def smoke_bundle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smoke-bundle")
    env = local_env(f"sqlite:///{tmp / 'made.db'}", tmp / "store", device="cpu")
    run_suite(
        SuiteParams(preset="smoke", families=["lstm", "transformer"], tasks=["parity", "dyck"], name="study"), env
    )
    path = tmp / "study.layerscope.zip"
    with env.session_factory() as s:
        export_bundle(s, "study", path)
        export_bundle(s, "study", tmp / "with-weights.zip", weights=True, store_dir=tmp / "store")
    return path


def _fresh(tmp_path):
    env = local_env(f"sqlite:///{tmp_path / 'demo.db'}", tmp_path / "store", device="cpu")
    return env.session_factory


def test_demo_imports_the_study_once(smoke_bundle, tmp_path):
    factory = _fresh(tmp_path)
    first, suite = demo_bundle(factory, smoke_bundle, tmp_path / "store")
    assert suite == "study" and first.startswith("imported study 'study'") and "4 run(s)" in first
    with factory() as s:
        runs = s.scalar(select(func.count()).select_from(Run))
        probes = s.scalar(select(func.count()).select_from(ProbeResult))
        assert imported_suites(s) == {"study"}
    assert runs == 4 and probes > 0
    again, suite = demo_bundle(factory, smoke_bundle, tmp_path / "store")
    assert "already imported (4 runs)" in again and suite == "study"
    with factory() as s:
        assert s.scalar(select(func.count()).select_from(ProbeResult)) == probes


def test_demo_goes_on_without_a_bundle(tmp_path):
    factory = _fresh(tmp_path)
    assert demo_bundle(factory, tmp_path / "examples" / "none.zip", tmp_path / "store") == (
        f"no study bundle at {tmp_path / 'examples' / 'none.zip'} (absent); showing the live suite only",
        None,
    )
    empty = tmp_path / "empty.zip"
    empty.write_bytes(b"")
    assert "(empty)" in demo_bundle(factory, empty, tmp_path / "store")[0]
    junk = tmp_path / "junk.zip"
    junk.write_text("not a zip")
    line, suite = demo_bundle(factory, junk, tmp_path / "store")
    assert "not a layerscope bundle" in line and suite is None


def test_report_states_each_claim_with_numbers_and_figures(smoke_bundle, tmp_path):
    out = tmp_path / "docs" / "RESULTS.md"
    result = build_report(smoke_bundle, out)
    text = out.read_text()
    assert len(result["claims"]) == 6
    for c in result["claims"]:
        assert f"## Claim {c['id']}:" in text
        assert f"**This reproduction**: {AGREEMENT[c['verdict']]} (verdict: {c['verdict']})" in text
    assert text.count("**The study**:") == 6
    # "complete" (runs.status) became counts read from the data: stored, trained, measured
    # the suite "study" holds smoke runs: it is read as the smoke preset's (backend.study_parts.suite_preset)
    assert "| parity | lstm |" in text and "- runs: 4 stored of the preset's 15" in text and "4 measured" in text
    assert result["figures_error"] is None, result["figures_error"]
    pngs = sorted((tmp_path / "docs" / "figures").glob("*.png"))
    assert {p.name for p in pngs} == {
        "layer_curves_L40.png",
        "reversal_late_concentration.png",
        "behaviour_by_length.png",
    }
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert "](figures/layer_curves_L40.png)" in text


def test_cli_report(smoke_bundle, tmp_path, capsys):
    out = tmp_path / "R.md"
    assert main(["report", str(smoke_bundle), "-o", str(out), "--no-figures"]) == 0
    assert "figures turned off" in capsys.readouterr().err and out.is_file()
    assert main(["report", str(tmp_path / "missing.zip"), "-o", str(out)]) == 1


def test_cli_report_without_output_writes_beside_where_it_runs_not_the_repository_pages(
    smoke_bundle, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "RESULTS.md").write_text("the shipped page")
    assert main(["report", str(smoke_bundle), "--no-figures"]) == 0
    stem = smoke_bundle.name.removesuffix(".zip").removesuffix(".layerscope")
    assert (tmp_path / f"{stem}-results.md").is_file()
    assert (tmp_path / "docs" / "RESULTS.md").read_text() == "the shipped page"


def test_weights_travel_only_when_asked_and_load_after_import(smoke_bundle, tmp_path):
    import zipfile

    from worker.pipeline import load_run

    with zipfile.ZipFile(smoke_bundle) as z:
        assert not [n for n in z.namelist() if n.startswith("weights/")]
    env = local_env(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "store", device="cpu")
    with env.session_factory() as s:
        from backend.bundle_import import import_bundle

        import_bundle(s, smoke_bundle.parent / "with-weights.zip", store_dir=env.store_dir)
        run_id = s.execute(select(Run.id).where(Run.checkpoint_id.is_not(None)).limit(1)).scalar_one()
    params, task, model = load_run(run_id, env)  # the checkpoint came with the bundle
    assert params.suite is None and model.n_params > 0
