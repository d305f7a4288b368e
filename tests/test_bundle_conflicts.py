"""Importing a bundle never mixes the results of two trainings of one config: a run stored here
that was trained again or rebuilt (another training record) keeps its own rows unless --replace.
A fresh user imported a bundle made after rebuilding run 22 on top of the original study: 6 rows
of the rebuilt model landed beside the original model's."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from backend.cli import main
from store.migrate import init_db
from store.models import ProbeResult, Run
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs


def _factory(url: str):
    init_db(url)
    return make_sessionmaker(make_engine(url))


@pytest.fixture
def two_trainings(tmp_path):
    """A DB holding a study, and a bundle of the same study where one run was trained again."""
    here = _factory(f"sqlite:///{tmp_path / 'here.db'}")
    seed_runs(here, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    elsewhere = _factory(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    seed_runs(elsewhere, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    with elsewhere() as s:  # seed 1 rebuilt there: another training record, other probe numbers
        run = s.execute(select(Run).where(Run.seed == 1)).scalar_one()
        run.steps, run.heldout_acc = run.steps + 50, 0.9931
        s.query(ProbeResult).where(ProbeResult.run_id == run.id).update({"selectivity": 0.5})
        s.query(ProbeResult).where(ProbeResult.run_id == run.id, ProbeResult.layer == 0).delete()
        s.commit()
        rebuilt_hash, rebuilt_rows = (
            run.config_hash,
            s.scalar(select(func.count()).select_from(ProbeResult).where(ProbeResult.run_id == run.id)),
        )
    path = tmp_path / "study.zip"
    with elsewhere() as s:
        export_bundle(s, "study", path)
    with here() as s:  # the layer-0 row of seed 1 exists here only: a merge would add the bundle's others
        s.query(ProbeResult).where(ProbeResult.layer != 0).delete()
        s.commit()
    return here, path, rebuilt_hash, rebuilt_rows


def _probe_rows(factory, config_hash):
    with factory() as s:
        run = s.execute(select(Run).where(Run.config_hash == config_hash)).scalar_one()
        return run, s.execute(select(ProbeResult).where(ProbeResult.run_id == run.id)).scalars().all()


def test_a_run_of_another_training_keeps_its_rows_and_is_reported(two_trainings):
    here, path, rebuilt_hash, _ = two_trainings
    _, before = _probe_rows(here, rebuilt_hash)
    with here() as s:
        out = import_bundle(s, path)
    (c,) = out["runs_conflicting"]
    assert c["config_hash"] == rebuilt_hash and c["bundle"]["heldout_acc"] == 0.9931
    run, after = _probe_rows(here, rebuilt_hash)
    assert [r.id for r in after] == [r.id for r in before]  # none of the other model's rows added
    assert run.heldout_acc != 0.9931 and out["runs_present"] == 1 and out["runs_replaced"] == 0


def test_replace_takes_the_bundles_run_and_rows_only(two_trainings):
    here, path, rebuilt_hash, rebuilt_rows = two_trainings
    with here() as s:
        out = import_bundle(s, path, replace=True)
    assert out["runs_replaced"] == 1 and out["runs_conflicting"] == []
    run, rows = _probe_rows(here, rebuilt_hash)
    assert run.heldout_acc == 0.9931 and len(rows) == rebuilt_rows
    assert {r.selectivity for r in rows} == {0.5} and 0 not in {r.layer for r in rows}
    with here() as s:  # importing it again now changes nothing
        again = import_bundle(s, path)
    assert again["runs_present"] == 2 and not any(again["rows_added"].values())


def test_cli_import_names_the_conflict_and_the_replace_command(two_trainings, tmp_path, monkeypatch, capsys):
    here, path, _, _ = two_trainings
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'here.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    from store.settings import get_settings

    get_settings.cache_clear()
    assert main(["import", str(path)]) == 0
    err = capsys.readouterr().err
    assert "1 run(s) kept as stored, the bundle's left out" in err and f"import --replace {path}" in err
    assert main(["import", "--replace", str(path)]) == 0
    assert "1 replaced by the bundle's" in capsys.readouterr().err
    get_settings.cache_clear()


# --- what "the same training" is: the weights' hash, steps, held-out accuracy and loss curve ----------------------


@pytest.fixture
def stored_study(tmp_path):
    """A DB holding a study whose runs record their weights' hash, and its own export."""
    here = _factory(f"sqlite:///{tmp_path / 'here.db'}")
    seed_runs(here, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study")
    with here() as s:
        for run in s.execute(select(Run)).scalars():
            run.checkpoint_id, run.train_seconds = f"{run.seed:064x}", 75.05
            run.steps, run.heldout_acc = 1000, 0.26015624
            run.loss_curve = [{"step": 100, "loss": 0.5, "heldout_token_acc": 0.26015624}]
        s.commit()
    path = tmp_path / "study.zip"
    with here() as s:
        export_bundle(s, "study", path)
    return here, path


def _with_run(src, dst, **changes):
    """``src`` with its first run changed (``changes``: column → value, or a function of the row)."""
    import json
    import zipfile

    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for entry in z.namelist():
            data = z.read(entry)
            if entry == "tables/runs.json":
                rows = json.loads(data)
                for k, v in changes.items():
                    rows[0][k] = v(rows[0]) if callable(v) else v
                data = json.dumps(rows).encode()
            out.writestr(entry, data)
    return dst


def _cli_import(tmp_path, monkeypatch, capsys, path) -> str:
    """``layerscope import PATH`` into ``here.db`` (exit 0); its stderr."""
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'here.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    from store.settings import get_settings

    get_settings.cache_clear()
    try:
        assert main(["import", str(path)]) == 0
    finally:
        get_settings.cache_clear()
    return capsys.readouterr().err


def test_a_resumed_run_with_the_same_weights_is_the_same_training(stored_study, tmp_path, monkeypatch, capsys):
    """A fresh user imported the export of a run killed at step 306 and resumed (bit for bit the
    unbroken run: docs/SCIENCE.md#resuming-training) into a home holding the unbroken run; import
    called it "another training (steps or held-out accuracy differ)", though neither differed."""
    here, path = stored_study
    resumed = _with_run(
        path,
        tmp_path / "resumed.zip",
        train_seconds=108.2,
        made_with=lambda r: {**(r["made_with"] or {}), "resumed_at_steps": [306]},
    )
    with here() as s:
        out = import_bundle(s, resumed)
    assert out["runs_present"] == 2 and out["runs_conflicting"] == [] and not any(out["rows_added"].values())
    err = _cli_import(tmp_path, monkeypatch, capsys, resumed)
    assert "2 run(s) already present" in err and "kept as stored" not in err


@pytest.mark.parametrize(
    ("changes", "differs", "said"),
    [
        ({"steps": 1200}, {"steps": (1000, 1200)}, "differs in steps: 1000 here, 1200 in the bundle)"),
        (
            {"heldout_acc": 0.3},
            {"heldout_acc": (0.26015624, 0.3)},
            "differs in held-out accuracy: 0.260156 here, 0.3 in the bundle)",
        ),
        (
            {"checkpoint_id": "ab" * 32},
            {"checkpoint_id": (f"{0:064x}", "ab" * 32)},
            "differs in weights: checkpoint 000000000000 here, abababababab in the bundle)",
        ),
        (
            {"loss_curve": [{"step": 100, "loss": 0.51, "heldout_token_acc": 0.26015624}]},
            {"loss_curve": (1, 1)},
            "differs in loss curve)",
        ),
    ],
    ids=["steps", "held-out accuracy", "weights", "loss curve"],
)
def test_the_refusal_says_which_field_differs(stored_study, tmp_path, monkeypatch, capsys, changes, differs, said):
    here, path = stored_study
    other = _with_run(path, tmp_path / "other.zip", **changes)
    with here() as s:
        out = import_bundle(s, other)
    (c,) = out["runs_conflicting"]
    assert c["differs"] == differs and out["runs_present"] == 1
    err = _cli_import(tmp_path, monkeypatch, capsys, other)
    assert f"stored here from another training of the same config: {c['name']} ({said}" in err
    assert "steps or held-out accuracy differ" not in err
