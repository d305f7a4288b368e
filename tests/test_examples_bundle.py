"""The study bundle committed under examples/ is what it says it is: it imports, every run says
where it was made, and a study that is not complete is labelled partial with the count of runs
that remain (README "The study in the box")."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from backend.bundle import read_bundle
from backend.bundle_import import import_bundle
from backend.study_parts import preset_run_count
from store.migrate import init_db
from store.models import ProbeResult, Run
from store.session import make_engine, make_sessionmaker

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper.layerscope.zip"


@pytest.fixture(scope="module")
def bundle():
    return read_bundle(BUNDLE)


def test_every_run_says_where_it_was_made(bundle) -> None:
    manifest, tables = bundle
    assert manifest["suite"] == "paper" and tables["runs"]
    assert all(r.get("made_on") for r in tables["runs"])
    assert set(manifest["devices"]) == {r["made_on"] for r in tables["runs"]}
    assert len(manifest["runs"]) == len(tables["runs"])


def test_a_study_that_is_not_complete_is_labelled_partial(bundle) -> None:
    manifest, tables = bundle
    expected = preset_run_count(manifest["suite"], [r["config_hash"] for r in tables["runs"]])
    measured = sum(r["status"] == "complete" for r in tables["runs"])
    if measured >= expected:
        assert "partial" not in manifest
        return
    partial = manifest["partial"]
    assert partial["complete"] is False and partial["preset_runs"] == expected
    assert partial["runs_stored"] == len(tables["runs"]) and partial["runs_measured"] == measured
    assert partial["runs_remaining"] == expected - measured
    assert partial.get("why") or partial.get("notes")


def test_it_imports_once(bundle, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    init_db(url)
    factory = make_sessionmaker(make_engine(url))
    with factory() as s:
        first = import_bundle(s, BUNDLE)
        again = import_bundle(s, BUNDLE)
        runs = s.scalar(select(func.count()).select_from(Run))
        probes = s.scalar(select(func.count()).select_from(ProbeResult))
    manifest, tables = bundle
    assert first["runs_added"] == runs == len(tables["runs"])
    assert first["controls_added"] == sum(bool(r.get("control")) for r in tables["runs"]) > 0  # said apart
    assert probes == len(tables["probe_results"])
    assert again["runs_added"] == 0 and not any(again["rows_added"].values())


def test_the_shipped_bundles_are_at_most_10_mb_without_checkpoints() -> None:
    """Every export of a shipped bundle is paid for by every clone (the paper-steps bundle was 69 MB,
    63.5 MB of it probe weights and removed directions, before `export` left them to --artifacts)."""
    import zipfile

    shipped = sorted(BUNDLE.parent.glob("*.layerscope.zip"))
    assert len(shipped) >= 2
    for path in shipped:
        assert path.stat().st_size <= 10_000_000, path.name
        assert not [n for n in zipfile.ZipFile(path).namelist() if n.startswith("weights/")], path.name
