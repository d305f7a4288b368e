"""A bundle is hostile input: each hostile kind made from a small real export (two runs
with real checkpoints and a probe's weights) is refused by `layerscope import` in one line naming
the member and the rule, with the database's row counts and the model store's files unchanged;
the zip bombs with the peak memory growth measured (tracemalloc)."""

from __future__ import annotations

import hashlib
import json
import stat
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as st_save
from sqlalchemy import func, select

from backend.bundle import BundleError
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from models_store.artifacts import ArtifactStore
from models_store.checkpoints import CheckpointStore
from models_store.families import build_model
from models_store.model_config import ModelConfig
from store.migrate import init_db
from store.models import InterventionResult, Job, MeasureSettings, PatchingResult, ProbeResult, ResultWeights, Run
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs

TABLES = (Run, ProbeResult, InterventionResult, PatchingResult, ResultWeights, MeasureSettings, Job)
MB = 2**20


def _factory(url: str):
    init_db(url)
    return make_sessionmaker(make_engine(url))


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A real export: an LSTM and a GRU run, each with its checkpoint, and one probe's weights."""
    tmp = tmp_path_factory.mktemp("hostile-source")
    factory = _factory(f"sqlite:///{tmp / 'made.db'}")
    seed_runs(factory, families=("lstm", "gru"), tasks=("parity",), seeds=(0,), suite="study")
    store = CheckpointStore(tmp / "store")
    torch.manual_seed(0)
    with factory() as s:
        for run in s.scalars(select(Run).order_by(Run.id)):
            cfg = ModelConfig(family=run.family, vocab_size=4, n_classes=2, n_layers=2, d_model=8)
            run.checkpoint_id = store.save(build_model(cfg))
            run.model_config = cfg.to_dict()
        aid = ArtifactStore(tmp / "store").save({"W": torch.randn(2, 8)}, {"kind": "probe"})
        first = s.scalar(select(Run).order_by(Run.id))
        s.add(
            ResultWeights(
                run_id=first.id, kind="probe", method="", layer=0, eval_length=40, artifact_id=aid, config_hash="c"
            )
        )
        s.commit()
        export_bundle(s, "study", tmp / "study.zip", weights=True, artifacts=True, store_dir=tmp / "store")
    return tmp / "study.zip"


@pytest.fixture
def target(cli_home):
    """The CLI's database (migrated, empty) and model store; yields (factory, store folder)."""
    factory = _factory(f"sqlite:///{cli_home / 'cli.db'}")
    (cli_home / "store").mkdir()
    return factory, cli_home / "store"


def _state(factory, store: Path) -> tuple[dict[str, int], list[str]]:
    """The row count of every table the import writes, and every path in the model store."""
    with factory() as s:
        counts = {m.__tablename__: s.scalar(select(func.count()).select_from(m)) for m in TABLES}
    return counts, sorted(str(p.relative_to(store)) for p in store.rglob("*"))


def _rewrite(src: Path, dst: Path, *, drop=(), edit=None, add=()) -> Path:
    """``src`` written again as ``dst``: members ``drop``ped, ``edit[name](bytes)`` applied, ``add``
    (ZipInfo or name, bytes) appended, in the exporter's order otherwise."""
    edit = edit or {}
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
        for name in z.namelist():
            if name not in drop:
                out.writestr(name, edit[name](z.read(name)) if name in edit else z.read(name))
        for info, data in add:
            out.writestr(info, data)
    return dst


def _json_edit(fn):
    return lambda data: json.dumps(fn(json.loads(data))).encode()


def _refused(main_args: list[str], capsys, *expect: str) -> str:
    from backend.cli import main

    assert main(main_args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for e in expect:
        assert e in err, err
    return err


def _import_refused(path: Path, target, capsys, *expect: str) -> str:
    """`layerscope import path` refused in one line naming ``expect``; nothing written."""
    before = _state(*target)
    line = _refused(["import", str(path)], capsys, "refused as a whole, nothing imported", *expect)
    assert _state(*target) == before
    return line


def _names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return z.namelist()


def _checkpoints(path: Path) -> list[str]:
    return sorted({n.split("/")[1] for n in _names(path) if n.startswith("weights/")})


# ------------------------------------------------------------------ the genuine bundle imports


def test_the_genuine_bundle_imports_with_its_weights_verified(good, target, capsys):
    from backend.cli import main

    factory, store = target
    assert main(["import", str(good)]) == 0, capsys.readouterr().err
    counts, files = _state(factory, store)
    assert counts["runs"] == 2 and counts["result_weights"] == 1
    for ckpt in _checkpoints(good):
        assert CheckpointStore(store).intact(ckpt)
    assert not [f for f in files if f.startswith(".import-")]  # the staging folder went


# ------------------------------------------------------------------ zip bombs (memory measured)


def _bomb_member(size: int) -> tuple[bytes, int]:
    """``size`` zero bytes deflated (raw, as a zip member holds them) and their CRC-32, made in chunks."""
    comp, crc, chunk = zlib.compressobj(9, zlib.DEFLATED, -15), 0, bytes(16 * MB)
    parts = []
    for _ in range(size // len(chunk)):
        parts.append(comp.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    parts.append(comp.flush())
    return b"".join(parts), crc


def _zip_with_raw_member(src: Path, dst: Path, name: str, deflated: bytes, crc: int, declared: int) -> Path:
    """``src`` with member ``name`` replaced by ``deflated`` data whose directory entry states
    ``declared`` bytes uncompressed (the truth or a lie): written by hand after the others."""
    _rewrite(src, dst, drop=(name,))
    data = bytearray(dst.read_bytes())
    with zipfile.ZipFile(dst) as z:
        start_dir = z.start_dir
        infos = z.infolist()
    offset, raw_name = start_dir, name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(deflated), declared, len(raw_name), 0)
    entry = local + raw_name + deflated
    central = bytes(data[start_dir:])
    end = central.rfind(b"PK\x05\x06")
    cd_entries = central[:end]
    new_cd = (
        cd_entries
        + struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            8,
            0,
            0x21,
            crc,
            len(deflated),
            declared,
            len(raw_name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        + raw_name
    )
    eocd = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(infos) + 1, len(infos) + 1, len(new_cd), offset + len(entry), 0
    )
    dst.write_bytes(bytes(data[:start_dir]) + entry + new_cd + eocd)
    return dst


def _peak_growth(fn) -> int:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    print(f"peak traced memory growth: {peak / MB:.2f} MB")  # shown with -s (BENCHMARKS.md)
    return peak


@pytest.fixture(scope="module")
def gib_of_zeros():
    return _bomb_member(1024 * MB)


def test_a_zip_bomb_is_refused_by_its_ratio_before_it_is_inflated(good, target, capsys, tmp_path, gib_of_zeros):
    deflated, crc = gib_of_zeros
    ckpt = _checkpoints(good)[0]
    name = f"weights/{ckpt}/weights.safetensors"
    bomb = _zip_with_raw_member(good, tmp_path / "bomb.zip", name, deflated, crc, 1024 * MB)
    assert bomb.stat().st_size < 5 * MB  # 1 GiB in a few MB
    peak = _peak_growth(lambda: _import_refused(bomb, target, capsys, name, "over the 200:1", "zip bomb"))
    assert peak < 100 * MB, f"peak memory growth {peak / MB:.1f} MB"


def test_a_zip_bomb_lying_about_its_size_is_read_no_further_than_it_states(
    good, target, capsys, tmp_path, gib_of_zeros
):
    """The directory says 64 KiB; the data inflates to 1 GiB: read up to 64 KiB, its CRC-32 fails."""
    deflated, crc = gib_of_zeros
    ckpt = _checkpoints(good)[0]
    name = f"weights/{ckpt}/weights.safetensors"
    bomb = _zip_with_raw_member(good, tmp_path / "liar.zip", name, deflated, crc, 64 * 1024)
    peak = _peak_growth(lambda: _import_refused(bomb, target, capsys, name, "damaged in the zip"))
    assert peak < 100 * MB, f"peak memory growth {peak / MB:.1f} MB"


def test_a_json_member_lying_about_its_size_is_refused(good, target, capsys, tmp_path, gib_of_zeros):
    deflated, crc = gib_of_zeros
    bomb = _zip_with_raw_member(good, tmp_path / "liar.zip", "tables/runs.json", deflated, crc, 1000)
    peak = _peak_growth(lambda: _import_refused(bomb, target, capsys, "tables/runs.json", "damaged in the zip"))
    assert peak < 100 * MB, f"peak memory growth {peak / MB:.1f} MB"


# ------------------------------------------------------------------ names and member kinds


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("../evil.json", "a '..' path component"),
        ("tables/../../evil.json", "a '..' path component"),
        ("/etc/cron.d/evil", "an absolute path"),
        ("C:/evil.json", "an absolute path"),
        ("notes/readme.txt", "not a member the exporter writes"),
        ("tables/", "a folder entry"),
    ],
    ids=["traversal", "nested traversal", "absolute", "drive", "outside the layout", "folder"],
)
def test_a_path_out_of_the_layout_is_refused(good, target, capsys, tmp_path, name, rule):
    bad = _rewrite(good, tmp_path / "bad.zip", add=[(name, b"{}")])
    _import_refused(bad, target, capsys, name, rule)


def test_a_dotdot_member_inside_a_checkpoint_is_refused_before_any_row(good, target, capsys, tmp_path):
    name = f"weights/{_checkpoints(good)[0]}/.."
    bad = _rewrite(good, tmp_path / "dotdot.zip", add=[(name, b"x")])
    _import_refused(bad, target, capsys, name, "a '..' path component")


def test_a_duplicate_member_is_refused(good, target, capsys, tmp_path):
    with pytest.warns(UserWarning, match="Duplicate name"):  # zipfile warns as it writes the second
        bad = _rewrite(good, tmp_path / "dup.zip", add=[("tables/runs.json", b"[]")])
    _import_refused(bad, target, capsys, "tables/runs.json", "a duplicate member name")


def test_a_symlink_member_is_refused(good, target, capsys, tmp_path):
    link = zipfile.ZipInfo("tables/profiles.json")
    link.create_system = 3  # Unix: the mode is in the high 16 bits
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    bad = _rewrite(good, tmp_path / "link.zip", drop=("tables/profiles.json",), add=[(link, b"/etc/passwd")])
    _import_refused(bad, target, capsys, "tables/profiles.json", "a symbolic link")


def test_too_many_members_is_refused_by_the_setting(good, target, capsys, monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_BUNDLE_MAX_MEMBERS", "5")
    get_settings.cache_clear()
    _import_refused(good, target, capsys, f"{len(_names(good))} members, more than the 5")


def test_a_member_over_the_size_limit_is_refused(good, target, capsys, monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_BUNDLE_MAX_MEMBER_BYTES", "1000")
    get_settings.cache_clear()
    _import_refused(good, target, capsys, "uncompressed, over the 0.0 MiB a member may hold")


# ------------------------------------------------------------------ a manifest that lies


@pytest.mark.parametrize(
    ("lie", "expect"),
    [
        (
            lambda m: {**m, "tables": {**m["tables"], "runs": {**m["tables"]["runs"], "rows": 15}}},
            "the manifest says 15 row(s), the bundle holds 2",
        ),
        (lambda m: {**m, "suite": "another"}, "is of suite 'study', the manifest's is 'another'"),
        (lambda m: {**m, "runs": m["runs"][:1]}, "runs lists 1 run(s) that are not the 2"),
        (lambda m: {**m, "parts": [{**m["parts"][0], "runs": 1}]}, "parts count 1 run(s), tables/runs.json holds 2"),
        (lambda m: {**m, "weights_included": 3}, "weights_included says 3, the bundle holds 2"),
        (lambda m: {**m, "artifacts_included": 0}, "artifacts_included says 0, the bundle holds 1"),
    ],
    ids=["counts", "suite", "runs", "parts", "weights", "artifacts"],
)
def test_a_lying_manifest_is_refused(good, target, capsys, tmp_path, lie, expect):
    bad = _rewrite(good, tmp_path / "lie.zip", edit={"manifest.json": _json_edit(lie)})
    _import_refused(bad, target, capsys, expect)


def test_a_result_row_naming_settings_not_in_the_bundle_is_refused(good, target, capsys, tmp_path):
    def orphan(rows):
        rows[0]["settings_id"] = 999
        return rows

    bad = _rewrite(good, tmp_path / "orphan.zip", edit={"tables/probe_results.json": _json_edit(orphan)})
    _import_refused(bad, target, capsys, "tables/probe_results.json: row 0: settings_id 999 is not in")


# ------------------------------------------------------------------ weights: forged, swapped, cut short


def test_a_forged_weight_is_refused(good, target, capsys, tmp_path):
    ckpt = _checkpoints(good)[0]
    name = f"weights/{ckpt}/weights.safetensors"

    def forge(data: bytes) -> bytes:  # the same tensors' shapes, other values
        from safetensors.torch import load

        return st_save({k: torch.randn_like(v) for k, v in load(data).items()})

    bad = _rewrite(good, tmp_path / "forged.zip", edit={name: forge})
    _import_refused(bad, target, capsys, name, "not to the checkpoint id its folder names")


def test_a_forged_artifact_is_refused(good, target, capsys, tmp_path):
    (name,) = [n for n in _names(good) if n.startswith("artifacts/")]
    bad = _rewrite(good, tmp_path / "forged.zip", edit={name: lambda d: d[:-4] + b"\0\0\0\0"})
    _import_refused(bad, target, capsys, name, "hash to", "not to its name")


def test_swapped_checkpoint_ids_are_refused(good, target, capsys, tmp_path):
    def swap(rows):
        rows[0]["checkpoint_id"], rows[1]["checkpoint_id"] = rows[1]["checkpoint_id"], rows[0]["checkpoint_id"]
        return rows

    bad = _rewrite(good, tmp_path / "swapped.zip", edit={"tables/runs.json": _json_edit(swap)})
    _import_refused(bad, target, capsys, "its config is not its run's: family = ")


@pytest.mark.parametrize(("column", "config"), [("family", "model_config"), ("task", "train_config")])
def test_a_run_renamed_away_from_its_own_config_is_refused(good, target, capsys, tmp_path, column, config):
    """A run whose family or task is not the one its configs record would be read as another
    model's, in a cell of its own."""

    def rename(rows):
        recorded = rows[0].get(config) or {}
        assert recorded.get(column, rows[0][column]) == rows[0][column]
        rows[0][config] = {**recorded, column: rows[0][column]}  # recorded, as a worker's runs have it
        rows[0][column] = "nosuch"
        return rows

    bad = _rewrite(good, tmp_path / "renamed.zip", edit={"tables/runs.json": _json_edit(rename)})
    _import_refused(bad, target, capsys, f"{column}", f"not the {column} its {config} records")


def test_a_checkpoint_whose_tensors_are_not_its_configs_shapes_is_refused(good, target, capsys, tmp_path):
    """Self-consistent (its id is the hash of its files) but built for another width."""
    ckpt = _checkpoints(good)[0]
    with zipfile.ZipFile(good) as z:
        config = z.read(f"weights/{ckpt}/config.json")
    wider = ModelConfig.from_dict({**json.loads(config), "d_model": 16})
    weights = st_save({k: v.contiguous() for k, v in build_model(wider).state_dict().items()})
    forged = hashlib.sha256(weights + b"\0" + config).hexdigest()

    def point(rows):
        for r in rows:
            r["checkpoint_id"] = forged if r["checkpoint_id"] == ckpt else r["checkpoint_id"]
        return rows

    drop = [n for n in _names(good) if n.startswith(f"weights/{ckpt}/")]
    bad = _rewrite(
        good,
        tmp_path / "shapes.zip",
        drop=drop,
        edit={"tables/runs.json": _json_edit(point)},
        add=[(f"weights/{forged}/weights.safetensors", weights), (f"weights/{forged}/config.json", config)],
    )
    _import_refused(bad, target, capsys, f"weights/{forged}/", "in the weights", "in the model its config builds")


def test_a_partial_export_is_refused(good, target, capsys, tmp_path):
    """What a full disk left before exports were atomic: some checkpoints and no artifact."""
    ckpt = _checkpoints(good)[1]
    drop = [n for n in _names(good) if n.startswith(f"weights/{ckpt}/") or n.startswith("artifacts/")]
    bad = _rewrite(good, tmp_path / "partial.zip", drop=drop)
    _import_refused(bad, target, capsys, "weights_included says 2, the bundle holds 1")


def test_a_damaged_store_file_is_replaced_by_the_next_good_import(good, target):
    factory, store = target
    with factory() as s:
        import_bundle(s, good, store_dir=store)
    ckpt = _checkpoints(good)[0]
    (store / ckpt / "weights.safetensors").write_bytes(b"poison")
    aid = next(n for n in _names(good) if n.startswith("artifacts/")).split("/")[1].removesuffix(".safetensors")
    ArtifactStore(store).path(aid).write_bytes(b"poison")
    with factory() as s:
        again = import_bundle(s, good, store_dir=store)
    assert again["runs_added"] == 0  # the rows were there: only the files are mended
    assert CheckpointStore(store).intact(ckpt)
    assert ArtifactStore(store).read_bytes(aid)  # hashes to its id again


# ------------------------------------------------------------------ one transaction over DB and store


def test_a_failure_after_the_files_are_placed_leaves_no_rows_and_no_new_files(good, target, monkeypatch):
    from backend import bundle_import

    factory, store = target
    before = _state(factory, store)

    def fails(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle_import, "_store_measuring", fails)  # the last writer before the commit
    with factory() as s, pytest.raises(OSError, match="No space left"):
        import_bundle(s, good, store_dir=store)
    assert _state(factory, store) == before


def test_a_run_whose_checkpoint_is_another_models_is_refused_at_load(good, target, tmp_path):
    """A database edited after the import: the weights are checked against the run before measuring."""
    from worker.pipeline import CheckpointNotItsRun, load_run, local_env

    factory, store = target
    with factory() as s:
        import_bundle(s, good, store_dir=store)
        a, b = s.scalars(select(Run).order_by(Run.id)).all()
        a.checkpoint_id, b.checkpoint_id = b.checkpoint_id, a.checkpoint_id
        s.commit()
        run_id = a.id
    env = local_env(str(factory.kw["bind"].url), store, device="cpu")
    with pytest.raises(CheckpointNotItsRun, match=f"run {run_id}: its checkpoint .* is refused: its config is not"):
        load_run(run_id, env)


# ------------------------------------------------------------------ serve BUNDLE.zip: the same checks


def test_serving_a_hostile_bundle_is_refused_by_the_same_checks(good, tmp_path):
    from backend.bundle_db import open_bundle

    bad = _rewrite(good, tmp_path / "bad.zip", add=[("../evil.json", b"{}")])
    with pytest.raises(BundleError, match=r"\.\./evil\.json: a '\.\.' path component"):
        open_bundle(bad)


def test_a_killed_imports_staging_folder_is_removed_by_a_later_import(good, target):
    import os
    import time

    factory, store = target
    old, running = store / ".import-killed", store / ".import-running"
    for folder in (old, running):
        folder.mkdir()
        (folder / "weights.safetensors").write_bytes(b"half")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    with factory() as s:
        import_bundle(s, good, store_dir=store)
    assert not old.exists() and running.is_dir()  # an import still running keeps its folder
