"""Bundle manifests say how many checkpoints travelled (``weights`` only when all did), the CLI
warns when some had none; a re-export keeps the imported manifest's ``edits_after_export``."""

from __future__ import annotations

import json
import zipfile

import pytest

from backend.bundle import read_bundle
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from store.migrate import init_db
from store.models import Run
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs

CKPT = "a" * 64


def _factory(url: str):
    init_db(url)
    return make_sessionmaker(make_engine(url))


@pytest.fixture
def study(sqlite_url):
    factory = _factory(sqlite_url)
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    return factory


def _weight_names(path) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return [n for n in z.namelist() if n.startswith("weights/")]


def test_weights_asked_but_no_checkpoint_is_not_weights_true(study, tmp_path):
    out = tmp_path / "w.zip"
    with study() as s:
        manifest = export_bundle(s, "study", out, weights=True, store_dir=tmp_path / "store")
    assert not _weight_names(out)
    for m in (manifest, read_bundle(out)[0]):
        assert m["weights"] is False and m["weights_included"] == 0 and m["weights_missing"] == 2


def test_weights_counts_the_checkpoints_included(study, tmp_path):
    store = tmp_path / "store"
    (store / CKPT).mkdir(parents=True)
    (store / CKPT / "weights.safetensors").write_bytes(b"w")
    with study() as s:
        s.query(Run).filter(Run.seed == 0).update({"checkpoint_id": CKPT})
        s.commit()
        some = export_bundle(s, "study", tmp_path / "some.zip", weights=True, store_dir=store)
        s.query(Run).filter(Run.seed == 1).update({"checkpoint_id": "b" * 64})
        (store / ("b" * 64)).mkdir()
        (store / ("b" * 64) / "weights.safetensors").write_bytes(b"w")
        s.commit()
        every = export_bundle(s, "study", tmp_path / "all.zip", weights=True, store_dir=store)
        none = export_bundle(s, "study", tmp_path / "none.zip")
    assert (some["weights"], some["weights_included"], some["weights_missing"]) == (False, 1, 1)
    assert _weight_names(tmp_path / "some.zip") == [f"weights/{CKPT}/weights.safetensors"]
    assert (every["weights"], every["weights_included"], every["weights_missing"]) == (True, 2, 0)
    assert none["weights"] is False and "weights_missing" not in none


def test_cli_export_warns_when_runs_have_no_checkpoint(study, tmp_path, monkeypatch, capsys):
    from backend.cli import main
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_DB_URL", str(study.kw["bind"].url))
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    get_settings.cache_clear()
    try:
        assert main(["export", "--suite", "study", "-o", str(tmp_path / "w.zip"), "--weights"]) == 0
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert "with weights" not in err, err
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "2 of 2 run(s) have no checkpoint" in warning[0], err
    assert "holds no weights" in warning[0]


def test_reexport_keeps_edits_after_export_on_top(study, tmp_path):
    src = tmp_path / "study.zip"
    with study() as s:
        export_bundle(s, "study", src)
    edits = [{"at": "2026-11-30T12:00:00+00:00", "what": "partial.why reworded by hand"}]
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(edited, "w") as b:
        for item in a.infolist():
            data = a.read(item.filename)
            if item.filename == "manifest.json":
                data = json.dumps({**json.loads(data), "edits_after_export": edits}).encode()
            b.writestr(item, data)
    target = _factory(f"sqlite:///{tmp_path / 'target.db'}")
    with target() as s:
        import_bundle(s, edited)
        again = export_bundle(s, "study", tmp_path / "again.zip")
    for m in (again, read_bundle(tmp_path / "again.zip")[0]):
        assert m["edits_after_export"] == edits
        assert m["imported_manifest"]["edits_after_export"] == edits
    with study() as s:  # a suite made here has none
        assert "edits_after_export" not in export_bundle(s, "study", tmp_path / "here.zip")
