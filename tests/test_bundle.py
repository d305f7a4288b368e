"""Results bundles: export every column of every result table, import idempotently into
SQLite and PostgreSQL, and the download route."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlalchemy import func, select

from backend.bundle import BundleError, imported_suites, read_bundle
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from store.migrate import init_db
from store.models import InterventionResult, Job, PatchingResult, ProbeResult, Run, row_columns
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs

TABLES = (Run, ProbeResult, InterventionResult, PatchingResult)


def _factory(url: str):
    init_db(url)
    return make_sessionmaker(make_engine(url))


def _counts(factory) -> dict[str, int]:
    with factory() as s:
        return {m.__tablename__: s.scalar(select(func.count()).select_from(m)) for m in TABLES}


@pytest.fixture
def source(sqlite_url, tmp_path):
    factory = _factory(sqlite_url)
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    seed_runs(factory, families=("gru",), tasks=("dyck",), seeds=(0,), suite="other")
    with factory() as s:
        s.query(Run).update({"made_on": "cpu on lab-box", "heldout_acc": 0.995, "early_stop_acc": 0.99})
        s.query(ProbeResult).update({"selectivity": 0.25})
        s.commit()
    path = tmp_path / "study.zip"
    with factory() as s:
        manifest = export_bundle(s, "study", path)
    return factory, path, manifest


def test_bundle_carries_every_column_and_a_manifest(source):
    factory, path, manifest = source
    assert manifest["suite"] == "study" and len(manifest["runs"]) == 2
    assert manifest["devices"] == ["cpu on lab-box"]
    assert manifest["weights"] is False and manifest["torch"]
    first, last = manifest["made_between"]
    assert first <= last
    assert {r["config_hash"] for r in manifest["runs"]} == {"study-lstm-parity-0", "study-lstm-parity-1"}
    with zipfile.ZipFile(path) as z:
        for model in TABLES:
            rows = json.loads(z.read(f"tables/{model.__tablename__}.json"))
            assert rows and list(rows[0]) == [c.key for c in row_columns(model)]
        runs = json.loads(z.read("tables/runs.json"))
        assert all(r["loss_curve"] for r in runs)  # kept in run_curves, carried in the run's row
        assert json.loads(z.read("tables/profiles.json"))  # derived, for readers without layerscope
        assert not [n for n in z.namelist() if n.startswith("weights/")]
    _, tables = read_bundle(path)
    assert {r["suite"] for r in tables["runs"]} == {"study"}  # the other suite stays out
    assert all(r["selectivity"] == 0.25 for r in tables["probe_results"])


def _check_import(factory, path, expected):
    with factory() as s:
        first = import_bundle(s, path, source="study.zip")
    assert first["runs_added"] == 2 and first["runs_present"] == 0
    with factory() as s:  # the import's job row: created and started before it finished
        job = s.execute(select(Job).where(Job.kind == "import")).scalar_one()
        assert job.created_at == job.started_at and job.started_at <= job.finished_at
    after_first = _counts(factory)
    assert after_first == expected
    with factory() as s:
        second = import_bundle(s, path)
        assert imported_suites(s) == {"study"}
        run = s.execute(select(Run).where(Run.config_hash == "study-lstm-parity-1")).scalar_one()
        assert run.made_on == "cpu on lab-box" and run.checkpoint_id is None
        assert s.scalar(select(func.max(ProbeResult.selectivity))) == 0.25
    assert second["runs_added"] == 0 and second["runs_present"] == 2 and not any(second["rows_added"].values())
    assert _counts(factory) == after_first  # importing twice changes nothing


def _expected(source_factory) -> dict[str, int]:
    with source_factory() as s:
        ids = [r for r in s.execute(select(Run.id).where(Run.suite == "study")).scalars()]
        return {
            m.__tablename__: (
                len(ids) if m is Run else s.scalar(select(func.count()).select_from(m).where(m.run_id.in_(ids)))
            )
            for m in TABLES
        }


def test_import_into_sqlite_is_idempotent(source, tmp_path):
    factory, path, _ = source
    _check_import(_factory(f"sqlite:///{tmp_path / 'target.db'}"), path, _expected(factory))


def test_import_into_postgres_is_idempotent(source, pg_url):
    factory, path, _ = source
    target = _factory(pg_url)
    try:
        _check_import(target, path, _expected(factory))
    finally:
        target.kw["bind"].dispose()


def test_import_keeps_rows_already_present_and_adds_the_missing(source, tmp_path):
    factory, path, _ = source
    target = _factory(f"sqlite:///{tmp_path / 'partial.db'}")
    seed_runs(target, families=("lstm",), tasks=("parity",), seeds=(0,), suite="study")  # one run already here
    with target() as s:
        s.query(PatchingResult).delete()
        s.query(Run).update({"heldout_acc": 0.995})  # the same training as the bundle's (same record)
        s.commit()
        out = import_bundle(s, path)
    assert out["runs_added"] == 1 and out["runs_present"] == 1
    assert out["rows_added"]["patching_results"] > 0  # the present run's missing rows are filled in
    assert _counts(target) == _expected(factory)


def test_not_a_bundle_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.zip"
    bad.write_text("hello")
    with pytest.raises(BundleError, match="not a layerscope bundle"):
        read_bundle(bad)
    whole = io.BytesIO()
    with zipfile.ZipFile(whole, "w") as z:
        z.writestr("manifest.json", json.dumps({"format": "layerscope-bundle", "format_version": 1}))
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole.getvalue()[:-30])  # a download that stopped: the zip's directory is lost
    with pytest.raises(BundleError, match="cut short"):
        read_bundle(cut)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("manifest.json", json.dumps({"format": "layerscope-bundle", "format_version": 99}))
    with pytest.raises(BundleError, match="newer"):
        read_bundle(io.BytesIO(buf.getvalue()))
    for version in (0, -1, "1", 1.5, True):  # not a version layerscope writes: refused, not imported
        odd = io.BytesIO()
        with zipfile.ZipFile(odd, "w") as z:
            z.writestr("manifest.json", json.dumps({"format": "layerscope-bundle", "format_version": version}))
        with pytest.raises(BundleError, match="is not one layerscope writes"):
            read_bundle(io.BytesIO(odd.getvalue()))


def test_export_unknown_suite_names_the_known_ones(source):
    factory, _, _ = source
    with factory() as s, pytest.raises(LookupError, match="suites here: other, study"):
        export_bundle(s, "nope", io.BytesIO())


def test_cli_export_then_import(source, tmp_path, monkeypatch, capsys):
    from backend.cli import main
    from store.settings import get_settings

    factory, _, _ = source
    url = str(factory.kw["bind"].url)
    monkeypatch.setenv("LAYERSCOPE_DB_URL", url)
    get_settings.cache_clear()
    out = tmp_path / "cli.zip"
    try:
        assert main(["export", "--suite", "study", "-o", str(out)]) == 0
        assert out.is_file()
        monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli-target.db'}")
        get_settings.cache_clear()
        assert main(["import", str(out)]) == 0
        assert "2 run(s)" in capsys.readouterr().err
        assert main(["import", str(out)]) == 0
        assert "0 run(s) and 0 result row(s) added, 2 run(s) already present" in capsys.readouterr().err
        assert main(["export", "--suite", "nope", "-o", str(out)]) == 1
        assert main(["import", str(tmp_path / "missing.zip")]) == 1
    finally:
        get_settings.cache_clear()


def test_api_lists_suites_and_serves_a_bundle(api):
    seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,), suite="live")
    listed = api.client.get("/api/suites").json()
    # n_complete (runs.status) was replaced by counts read from the data: trained, measured
    assert listed == [
        {
            "name": "live",
            "n_runs": 1,
            "n_trained": 0,
            "n_measured": 1,
            "n_trained_measured": 0,
            "n_controls": 0,
            "imported": False,
            # the lengths its rows were probed, trained and patched at (seed_runs probes at 40 and 60)
            "eval_lengths": [40, 60],
            "train_lengths": [],
            "patch_lengths": [],
        }
    ]
    r = api.client.get("/api/suites/live/bundle")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert 'filename="live.layerscope.zip"' in r.headers["content-disposition"]
    manifest, tables = read_bundle(io.BytesIO(r.content))
    assert manifest["suite"] == "live" and len(tables["runs"]) == 1
    missing = api.client.get("/api/suites/nope/bundle")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    # A suite imported from a bundle is marked as such.
    with api.factory() as s:
        s.query(Run).update({"suite": "elsewhere", "config_hash": "moved"})
        s.commit()
        import_bundle(s, io.BytesIO(r.content))
    by_name = {x["name"]: x["imported"] for x in api.client.get("/api/suites").json()}
    assert by_name == {"elsewhere": False, "live": True}


def _rewrite_manifest(path, out, **changes):
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "manifest.json":
                data = json.dumps({**json.loads(data), **changes}).encode()
            dst.writestr(item, data)


def test_reexport_of_an_imported_suite_keeps_its_provenance(source, tmp_path):
    """Re-exporting used to drop `partial` and replace python/torch/git_commit with the exporter's."""
    _, path, _ = source
    made = tmp_path / "made-elsewhere.zip"
    partial = {"complete": False, "preset_runs": 60, "runs_stored": 2, "why": "stopped at the deadline"}
    _rewrite_manifest(path, made, torch="2.11.0", python="3.12.3", git_commit="abc123", partial=partial)
    target = _factory(f"sqlite:///{tmp_path / 'target.db'}")
    with target() as s:
        import_bundle(s, made)
        out = tmp_path / "again.zip"
        again = export_bundle(s, "study", out)
    stored, _ = read_bundle(out)
    for m in (again, stored):
        assert m["imported_manifest"]["torch"] == "2.11.0" and m["imported_manifest"]["partial"] == partial
        assert m["partial"] == partial
        assert (m["torch"], m["python"], m["git_commit"]) == ("2.11.0", "3.12.3", "abc123")  # where runs were made
        assert m["exported_with"]["python"] != "3.12.3" or m["exported_with"]["torch"] != "2.11.0"
        assert set(m["exported_with"]) >= {"layerscope", "git_commit", "python", "torch", "created_at"}


def test_export_of_a_suite_made_here_has_no_imported_manifest(source):
    _, _, manifest = source
    assert "imported_manifest" not in manifest and "partial" not in manifest
    assert manifest["exported_with"]["torch"] == manifest["torch"]


def test_api_suites_count_trained_and_measured_from_the_data(api):
    ids = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0, 1, 2), suite="s")
    with api.factory() as s:
        s.query(Run).filter(Run.id == ids[0]).update(
            {"heldout_acc": 0.995, "early_stop_acc": 0.99, "status": "complete"}
        )
        s.query(Run).filter(Run.id == ids[1]).update({"heldout_acc": 0.47, "early_stop_acc": 0.99, "status": "trained"})
        s.query(PatchingResult).filter(PatchingResult.run_id == ids[2]).delete()
        s.commit()
    (row,) = api.client.get("/api/suites").json()
    assert row["n_runs"] == 3 and row["n_trained"] == 1 and row["n_measured"] == 2
    assert "n_complete" not in row


@pytest.mark.usefixtures("cli_home")
@pytest.mark.parametrize("command", ["import", "report"])
def test_a_folder_given_as_a_bundle_is_named_a_folder(tmp_path, command):
    from tests.cli_one_line import assert_one_line_error

    line = assert_one_line_error([command, str(tmp_path)], "a folder, not a results bundle")
    assert "no such file" not in line
