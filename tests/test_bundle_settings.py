"""Bundles carry the measure_settings rows (schema 0003) their result rows point to: imported by
settings hash (ids remapped), idempotently; a bundle written before 0003 (no such table)
imports with settings_id NULL."""

from __future__ import annotations

import io
import json
import zipfile

from sqlalchemy import func, select

from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from science.records import MeasureSettingsRecord
from store.migrate import init_db
from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs
from worker import persist

RESULTS = (ProbeResult, InterventionResult, PatchingResult)


def _factory(url: str):
    init_db(url)
    return make_sessionmaker(make_engine(url))


def _settings(fit_length: int) -> MeasureSettingsRecord:
    return MeasureSettingsRecord(
        params={"n_probe_sequences": 48}, eval_lengths=[60, 40], patch_eval_length=40, fit_length=fit_length
    )


def _source(tmp_path):
    factory = _factory(f"sqlite:///{tmp_path / 'src.db'}")
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    with factory() as s:
        persist.get_or_create_settings(s, _settings(99))  # not referenced: stays out of the bundle
        sid = persist.get_or_create_settings(s, _settings(40))
        for model in RESULTS:
            s.query(model).update({"settings_id": sid})
        s.commit()
    buf = io.BytesIO()
    with factory() as s:
        export_bundle(s, "study", buf)
    return buf.getvalue()


def _target(tmp_path):
    target = _factory(f"sqlite:///{tmp_path / 'dst.db'}")
    with target() as s:  # an unrelated settings row first, so the imported ids differ
        persist.get_or_create_settings(s, _settings(7))
    return target


def test_settings_travel_and_import_once(tmp_path) -> None:
    blob = _source(tmp_path)
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        rows = json.loads(z.read("tables/measure_settings.json"))
    assert [r["fit_length"] for r in rows] == [40] and rows[0]["eval_lengths"] == [40, 60]
    target = _target(tmp_path)
    with target() as s:
        first = import_bundle(s, io.BytesIO(blob))
        second = import_bundle(s, io.BytesIO(blob))
    assert first["settings_added"] == 1 and second["settings_added"] == 0
    assert not any(second["rows_added"].values())
    with target() as s:
        assert s.scalar(select(func.count()).select_from(MeasureSettings)) == 2
        sid = s.scalar(select(MeasureSettings.id).where(MeasureSettings.config_hash == _settings(40).config_hash))
        for model in RESULTS:
            assert set(s.scalars(select(model.settings_id)).all()) == {sid}


def test_a_bundle_without_the_settings_table_still_imports(tmp_path) -> None:
    blob = _source(tmp_path)
    old = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            if name == "tables/measure_settings.json":
                continue
            data = src.read(name)
            if name == "manifest.json":  # a bundle written before 0003 lists no such table
                manifest = json.loads(data)
                del manifest["tables"]["measure_settings"]
                data = json.dumps(manifest).encode()
            if name.startswith("tables/") and name != "tables/profiles.json":
                data = json.dumps(
                    [{k: v for k, v in r.items() if k != "settings_id"} for r in json.loads(data)]
                ).encode()
            dst.writestr(name, data)
    target = _target(tmp_path)
    with target() as s:
        out = import_bundle(s, io.BytesIO(old.getvalue()))
        again = import_bundle(s, io.BytesIO(old.getvalue()))
    assert out["runs_added"] == 2 and out["settings_added"] == 0 and all(out["rows_added"].values())
    assert again["runs_added"] == 0 and not any(again["rows_added"].values())
    with target() as s:
        for model in RESULTS:
            assert set(s.scalars(select(model.settings_id)).all()) == {None}
