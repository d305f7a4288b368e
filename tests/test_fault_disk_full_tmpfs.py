"""Disk full for real: the results DB on a 4 MB tmpfs, the disk then filled. Writes
answer 507 saying the disk is full, nothing is half-written, reads and /api/health still answer.
Needs permission to mount a tmpfs (root in a container that allows it): skipped, with the
reason, where the machine does not allow it."""

from __future__ import annotations

import subprocess

import pytest
from fastapi.testclient import TestClient

from backend.api.main import create_app
from store.migrate import init_db
from store.models import SavedView
from store.session import make_engine, make_sessionmaker


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(res.stderr or res.stdout).strip() or res.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_writes_on_a_full_disk_answer_507(small_disk, make_settings) -> None:
    settings = make_settings(db_url=f"sqlite:///{small_disk / 'layerscope.db'}", home=small_disk)
    init_db(settings.resolved_db_url)
    with open(small_disk / "filler", "wb") as f:  # fill the disk to the last block
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    engine = make_engine(settings.resolved_db_url)
    app = create_app(settings, make_sessionmaker(engine), background=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        answers = [
            c.post("/api/views", json={"title": "t", "page": "/curves", "state": {"k": "v" * 50_000}}) for _ in range(5)
        ]
        codes = [r.status_code for r in answers]
        assert set(codes) <= {201, 507} and 507 in codes, [(r.status_code, r.text[:200]) for r in answers]
        assert all("disk is full" in r.json()["detail"] for r in answers if r.status_code == 507)
        for path in ("/api/health", "/api/runs"):  # a read may still work, or say why not: never a 500
            r = c.get(path)
            assert r.status_code in (200, 503, 507) and (r.status_code == 200 or r.json()["detail"]), r.text
    (small_disk / "filler").unlink()  # space freed: the DB opens again, holding exactly the 201s
    with make_sessionmaker(engine)() as s:
        assert s.query(SavedView).count() == codes.count(201)
    engine.dispose()


def test_an_export_on_a_full_disk_leaves_the_previous_bundle_untouched(small_disk, cli_home, capsys) -> None:
    """Re-exporting over a bundle on a full disk once left a partial zip that imported.
    Now the bundle is written beside under a temporary name and renamed: the old one stays, whole,
    and the one-line error names the path and the space the export needed."""
    import torch
    from sqlalchemy import select

    from backend.cli import main
    from models_store.checkpoints import CheckpointStore
    from models_store.families import build_model
    from models_store.model_config import ModelConfig
    from store.models import Run
    from tests.conftest import seed_runs

    factory = make_sessionmaker(make_engine(f"sqlite:///{cli_home / 'cli.db'}"))
    init_db(f"sqlite:///{cli_home / 'cli.db'}")
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    store = CheckpointStore(cli_home / "store")
    torch.manual_seed(0)
    with factory() as s:
        for run in s.scalars(select(Run)):
            cfg = ModelConfig(family="lstm", vocab_size=4, n_classes=2, n_layers=2, d_model=64)
            run.checkpoint_id, run.model_config = store.save(build_model(cfg)), cfg.to_dict()
        s.commit()
    out = small_disk / "study.zip"
    assert main(["export", "--suite", "study", "-o", str(out)]) == 0  # the previous bundle: no weights
    before = out.read_bytes()
    capsys.readouterr()
    with open(small_disk / "filler", "wb") as f:  # the disk filled to the last block
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    assert main(["export", "--suite", "study", "-o", str(out), "--weights"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for part in (f"{out}: export failed (No space left on device)", "the previous bundle there is untouched"):
        assert part in err, err
    assert "it needs up to " in err and " MB (uncompressed), " in err and " MB free there" in err, err
    assert out.read_bytes() == before  # whole, as it was
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "study.zip"]  # no temporary file left
