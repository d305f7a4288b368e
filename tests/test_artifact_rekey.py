"""`layerscope db rekey-artifacts` (backend/artifact_rekey.py): kept weights written before their
bytes were deterministic (flat metadata in hash-map order; an edit with its eval length, so five
files for one fit) are written again as `keep_weights` writes them now, the rows point at the
new ids, and the old files go. Found in the paper-steps study: such copies were half its bundle."""

from __future__ import annotations

import torch
from safetensors.torch import save as st_save
from sqlalchemy import select

from backend.artifact_rekey import rekey_artifacts
from models_store.artifacts import ArtifactStore, id_of
from store.migrate import init_db
from store.models import ResultWeights
from store.session import make_engine, make_sessionmaker
from tests.cli_one_line import assert_one_line_error, run_cli
from tests.conftest import seed_runs
from worker.learned import artifact_metadata

LENGTHS = (40, 60, 80, 100, 120)
EDIT = {"center": torch.arange(6.0), "removed": torch.randn(2, 6), "left": torch.randn(6, 2)}


def _old_file(store: ArtifactStore, tensors: dict, meta: dict) -> str:
    """An artifact as written before the format was fixed: flat string metadata."""
    data = st_save({k: v.contiguous() for k, v in tensors.items()}, metadata={k: str(v) for k, v in meta.items()})
    aid = id_of(data)
    store.dir.mkdir(parents=True, exist_ok=True)
    store.path(aid).write_bytes(data)
    return aid


def _setup(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    init_db(url)
    factory = make_sessionmaker(make_engine(url))
    (run_id,) = seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0,), suite="s")
    store = ArtifactStore(tmp_path / "store")
    probes = {n: {"W": torch.randn(2, 6) * n, "b": torch.zeros(2)} for n in (40, 60)}
    rows = []
    for n in LENGTHS:  # one INLP fit applied at five lengths: five old files
        meta = {"kind": "edit", "method": "inlp", "layer": 1, "eval_length": n}
        rows.append(dict(meta, artifact_id=_old_file(store, EDIT, meta)))
    for n, t in probes.items():
        meta = {"kind": "probe", "method": "", "layer": 0, "eval_length": n}
        rows.append(dict(meta, artifact_id=_old_file(store, t, meta)))
    rows.append({"kind": "edit", "method": "leace", "layer": 2, "eval_length": 40, "artifact_id": "ab" * 32})
    with factory() as s:
        s.add_all(ResultWeights(run_id=run_id, config_hash="h", **r) for r in rows)
        s.commit()
    return factory, store, probes


def _ids(factory) -> dict[tuple, str]:
    with factory() as s:
        return {(w.kind, w.method, w.eval_length): w.artifact_id for w in s.scalars(select(ResultWeights))}


def test_old_artifacts_are_rekeyed_to_todays_bytes_and_the_copies_removed(tmp_path):
    factory, store, probes = _setup(tmp_path)
    before = _ids(factory)
    files = sorted(p.name for p in store.dir.iterdir())
    assert len(files) == 7

    with factory() as s:
        dry = rekey_artifacts(s, store, dry_run=True)
    assert (dry.rows, dry.rows_rekeyed, dry.files_before, dry.files_after) == (8, 7, 8, 4)
    assert dry.missing == ["ab" * 32] and _ids(factory) == before  # nothing written or deleted
    assert sorted(p.name for p in store.dir.iterdir()) == files

    with factory() as s:
        r = rekey_artifacts(s, store)
    assert (r.rows_rekeyed, r.files_after, len(r.removed)) == (7, 4, 7) and r.bytes_removed > 0
    after = _ids(factory)
    edit_ids = {after[("edit", "inlp", n)] for n in LENGTHS}
    assert len(edit_ids) == 1  # one file for the fit, named as keep_weights names it today
    (edit_id,) = edit_ids
    assert edit_id == store.save(EDIT, artifact_metadata("edit", "inlp", 1, 40))
    assert torch.equal(store.load(edit_id)["removed"], EDIT["removed"])
    assert store.metadata(edit_id) == {"kind": "edit", "method": "inlp", "layer": "1"}
    for n, t in probes.items():  # a probe stays one file per length, with its length
        aid = after[("probe", "", n)]
        assert aid != before[("probe", "", n)] and store.metadata(aid)["eval_length"] == str(n)
        assert torch.equal(store.load(aid)["W"], t["W"])
    assert after[("edit", "leace", 40)] == "ab" * 32  # missing here: left as it was
    assert len(list(store.dir.iterdir())) == 3 and not any(store.path(a).exists() for a in r.removed)

    with factory() as s:
        again = rekey_artifacts(s, store)
    assert again.rows_rekeyed == 0 and again.removed == [] and _ids(factory) == after


def test_the_command_says_what_it_did_in_one_line(cli_home):
    _setup(cli_home)
    rc, _, err = run_cli(["db", "rekey-artifacts", "--dry-run"])
    assert rc == 0 and "would re-key 7 of 8 kept-weight row(s): 8 file(s) named before, 4 after" in err, err
    assert "1 file(s) named but not in this store" in err
    rc, _, err = run_cli(["db", "rekey-artifacts"])
    assert rc == 0 and "re-keyed 7 of 8" in err and "7 old file(s) removed" in err, err
    # a damaged file: one line, nothing changed
    victim = next(p for p in (cli_home / "store" / "artifacts").iterdir())
    data = victim.read_bytes()
    victim.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    assert_one_line_error(["db", "rekey-artifacts"], "is damaged")
