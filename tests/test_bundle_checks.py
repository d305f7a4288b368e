"""A bundle's rows are checked before anything is imported (backend/bundle_checks.py): a bad one
is refused as a whole, in one line naming the file, the row, the field and why, and the database
is left as it was. A fresh user edited one value of a real export: a wrong type gave a 60-line
traceback in `import`, `report` and `serve BUNDLE`; n_layers -3 or a probe at layer 99 of a
4-layer run imported and then made the API answer 500s; a suite named with control characters
imported and could never be queried."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from backend.bundle import BundleError, read_bundle
from backend.bundle_export import export_bundle
from backend.bundle_import import import_bundle
from backend.cli import main
from store.models import Base
from tests.conftest import seed_runs
from tests.lab.conftest import free_port
from tests.test_bundle import _factory

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _counts(factory) -> dict[str, int]:
    """Rows per table, every table of the schema."""
    with factory() as s:
        return {t.name: s.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A real export (the product's own) of a suite of two 2-block runs."""
    tmp = tmp_path_factory.mktemp("source")
    factory = _factory(f"sqlite:///{tmp / 'source.db'}")
    seed_runs(factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="study", n_layers=2)
    path = tmp / "study.zip"
    with factory() as s:
        export_bundle(s, "study", path)
    return path


@pytest.fixture
def target(tmp_path):
    """A results DB that already holds another suite (an import must leave it as it was)."""
    factory = _factory(f"sqlite:///{tmp_path / 'target.db'}")
    seed_runs(factory, families=("gru",), tasks=("dyck",), seeds=(0,), suite="mine", n_layers=2)
    return factory


def edited(src: Path, dst: Path, table: str, edit: Callable[[list[dict]], object], *, raw: bytes | None = None) -> Path:
    """``src`` with ``tables/<table>.json`` changed by ``edit`` (in place on the rows), or replaced
    by ``raw`` bytes; every other entry as exported."""
    name = f"tables/{table}.json"
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for entry in z.namelist():
            data = z.read(entry)
            if entry == name:
                if raw is None:
                    rows = json.loads(data)
                    edit(rows)
                    data = json.dumps(rows).encode()
                else:
                    data = raw
            out.writestr(entry, data)
    return dst


def _set(column: str, value: object, index: int = 0):
    def edit(rows: list[dict]) -> None:
        rows[index][column] = value

    return edit


def _set_all(column: str, value: object):
    def edit(rows: list[dict]) -> None:
        for r in rows:
            r[column] = value

    return edit


def _drop(column: str):
    def edit(rows: list[dict]) -> None:
        del rows[0][column]

    return edit


def _first_where(column: str, value: object, **changes: object):
    def edit(rows: list[dict]) -> None:
        row = next(r for r in rows if r[column] == value)
        row.update(changes)

    return edit


def _settings(**changes: object):
    def edit(rows: list[dict]) -> None:  # the seeded suite has no settings row: one as export writes it
        row = {"id": 1, "config_hash": "s", "params": {}, "eval_lengths": [40], "patch_eval_length": 40}
        rows.append({**row, "fit_length": 40, "intervention_layers": None, "created_at": "2026-01-01T00:00:00"})
        rows[0].update(changes)

    return edit


# (id, table, edit, the refusal's text after the file name: "tables/<table>.json: <table>[i] …")
BAD = [
    (
        "wrong type",
        "probe_results",
        _set("accuracy", "abc"),
        "probe_results[0] (id {id}).accuracy = 'abc': Input should be a valid number",
    ),
    ("bool for int", "runs", _set("seed", True), "runs[0] (id {id}).seed = True: Input should be a valid integer"),
    ("string for int", "runs", _set("steps", "12"), "runs[0] (id {id}).steps = '12': Input should be a valid integer"),
    ("missing column", "probe_results", _drop("accuracy"), "probe_results[0] (id {id}).accuracy: Field required"),
    ("n_layers below 1", "runs", _set("n_layers", -3), "runs[0] (id {id}).n_layers = -3: must be at least 1"),
    (
        "layer past the run's blocks",
        "probe_results",
        _set_all("layer", 99),
        "probe_results[0] (id {id}).layer = 99: not a layer of run",
    ),
    (
        "probe at every layer",
        "probe_results",
        _set("layer", -2),
        "probe_results[0] (id {id}).layer = -2: not a layer of run",
    ),
    (
        "-2 outside conv1d removal",
        "intervention_results",
        _set("layer", -2),
        "intervention_results[0] (id {id}).layer = -2: not a layer of run",
    ),
    (
        "accuracy above 1",
        "probe_results",
        _set("accuracy", 1.5),
        "probe_results[0] (id {id}).accuracy = 1.5: must be within 0.0..1.0",
    ),
    (
        "per-position accuracy below 0",
        "probe_results",
        _set("per_position", [0.5, -0.1]),
        "probe_results[0] (id {id}).per_position = [0.5, -0.1]: must be within 0.0..1.0",
    ),
    (
        "delta past 100 points",
        "intervention_results",
        _set("delta_pp", -250.0),
        "intervention_results[0] (id {id}).delta_pp = -250.0: must be within -100.0..100.0",
    ),
    (
        "p-value above 1",
        "intervention_results",
        _set("p_value", 2.0),
        "intervention_results[0] (id {id}).p_value = 2.0: must be within 0.0..1.0",
    ),
    (
        "held-out accuracy above 1",
        "runs",
        _set("heldout_acc", 99.5),
        "runs[0] (id {id}).heldout_acc = 99.5: must be within 0.0..1.0",
    ),
    (
        "behaviour accuracy above 1",
        "runs",
        _set("behaviour", {"40": {"token_acc": 3.0}}),
        "runs[0] (id {id}).behaviour.40.token_acc = 3.0: must be within 0.0..1.0",
    ),
    (
        "negative count",
        "probe_results",
        _set("n_test", -4),
        "probe_results[0] (id {id}).n_test = -4: must be at least 0",
    ),
    (
        "position past its length",
        "patching_results",
        _set("position", 40),
        "patching_results[0] (id {id}).position = 40: past the end of its eval length 40",
    ),
    (
        "site without the layer",
        "patching_results",
        _first_where("layer", -1, site="resid_pre"),
        "(id {id}).layer = -1: site 'resid_pre' has no layer -1",
    ),
    (
        "unknown site",
        "patching_results",
        _set("site", "mlp_out"),
        "patching_results[0] (id {id}).layer = -1: unknown site 'mlp_out'",
    ),
    (
        "row of no run",
        "probe_results",
        _set("run_id", 4242),
        "probe_results[0] (id {id}).run_id = 4242: no run of the bundle has this id",
    ),
    (
        "two runs, one config hash",
        "runs",
        lambda rows: rows[1].update(config_hash=rows[0]["config_hash"]),
        "runs[1] (id {id1}).config_hash = 'study-lstm-parity-0': runs[0] has this config hash too",
    ),
    (
        "suite with control characters",
        "runs",
        _set("suite", "evil\n\x07suite"),
        "runs[0] (id {id}).suite = 'evil\\n\\x07suite': must not contain control characters (found U+000A",
    ),
    (
        "suite name no URL or file name can hold",
        "runs",
        _set("suite", "a/b"),
        "runs[0] (id {id}).suite = 'a/b': holds '/': a suite name is 1–100 ASCII letters",
    ),
    (
        "tag with control characters",
        "runs",
        _set("tags", ["ok", "bad\x07tag"]),
        "runs[0] (id {id}).tags.1: must not contain control characters (found U+0007",
    ),
    ("lone surrogate", "runs", _set("name", "a\ud800b"), "runs[0] (id {id}).name = 'a\\ud800b': must be valid Unicode"),
    (
        "name longer than its column",
        "runs",
        _set("suite", "s" * 101),
        "runs[0] (id {id}).suite: longer than its column takes (101 > 100 characters)",
    ),
    (
        "integer past 64 bits",
        "runs",
        _set("n_params", 2**70),
        f"runs[0] (id {{id}}).n_params = {2**70}: too large for a database integer",
    ),
    (
        "checkpoint id not a hash",
        "runs",
        _set("checkpoint_id", "../../etc"),
        "runs[0] (id {id}).checkpoint_id = '../../etc': not a checkpoint id (64 hex characters)",
    ),
    (
        "settings eval length 0",
        "measure_settings",
        _settings(eval_lengths=[0, 40]),
        "measure_settings[0] (id 1).eval_lengths = [0, 40]: must be at least 1",
    ),
]


@pytest.mark.parametrize(("table", "edit", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_row_is_refused_before_anything_is_written(exported, target, tmp_path, table, edit, expected) -> None:
    rows = json.loads(zipfile.ZipFile(exported).read(f"tables/{table}.json"))
    path = edited(exported, tmp_path / "bad.zip", table, edit)
    before = _counts(target)
    store = tmp_path / "store"
    with target() as s, pytest.raises(BundleError) as exc:
        import_bundle(s, path, store_dir=store)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{path}: refused as a whole, nothing imported: ")
    ids = {"id": rows[0]["id"] if rows else None, "id1": rows[1]["id"] if len(rows) > 1 else None}
    assert f"tables/{table}.json: " in message and expected.format(**ids) in message, message
    assert _counts(target) == before  # one transaction, and not even begun
    assert not store.exists()  # no artifacts, tasks or weights written either


def test_a_non_finite_number_anywhere_is_refused(exported, target, tmp_path) -> None:
    """NaN in a JSON column (json.loads takes it; PostgreSQL and the API's JSON do not)."""
    raw = zipfile.ZipFile(exported).read("tables/runs.json").replace(b'"loss":1.0', b'"loss":NaN', 1)
    path = edited(exported, tmp_path / "nan.zip", "runs", None, raw=raw)  # type: ignore[arg-type]  # no edit: raw replaces the table
    before = _counts(target)
    with (
        target() as s,
        pytest.raises(BundleError, match=r"runs\[0\] \(id \d+\)\.loss_curve\.0\.loss: must be a finite number"),
    ):
        import_bundle(s, path)
    raw = (
        zipfile.ZipFile(exported)
        .read("tables/patching_results.json")
        .replace(b'"ld_clean":2.0', b'"ld_clean":1e400', 1)
    )
    path = edited(exported, tmp_path / "inf.zip", "patching_results", None, raw=raw)  # type: ignore[arg-type]  # no edit: raw replaces the table
    with (
        target() as s,
        pytest.raises(
            BundleError,
            match=r"patching_results\[0\] \(id \d+\)\.ld_clean = inf: must be a finite number \(not NaN[^)]*\)$",
        ),
    ):
        import_bundle(s, path)
    assert _counts(target) == before


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"{not json", "tables/probe_results.json is not JSON"),
        (b'{"a": 1}', "tables/probe_results.json is not a list of rows"),
    ],
)
def test_a_table_that_is_not_a_list_of_rows_is_refused(exported, tmp_path, raw, expected) -> None:
    path = edited(exported, tmp_path / "bad.zip", "probe_results", None, raw=raw)  # type: ignore[arg-type]  # no edit: raw replaces the table
    with pytest.raises(BundleError, match=expected):
        read_bundle(path)


def test_every_problem_is_counted_the_first_named(exported, tmp_path) -> None:
    path = edited(exported, tmp_path / "bad.zip", "probe_results", _set_all("layer", 99))
    rows = json.loads(zipfile.ZipFile(exported).read("tables/probe_results.json"))
    with pytest.raises(BundleError, match=rf"probe_results\[0\] .*\(and {len(rows) - 1} more problems\)$"):
        read_bundle(path)


def test_a_conv1d_removal_of_every_layer_and_an_older_bundle_import(exported, target, tmp_path) -> None:
    """What the checks must keep taking: -2 on conv1d_removal, and a bundle of an older schema
    (no measure_settings file, rows without the columns added since)."""

    def older(rows: list[dict]) -> None:
        for r in rows:
            for column in ("random_delta_pp", "random_delta_lo", "random_delta_hi", "random_draws", "settings_id"):
                r.pop(column, None)
        rows[0].update(method="conv1d_removal", layer=-2)

    path = edited(exported, tmp_path / "older.zip", "intervention_results", older)
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(tmp_path / "older2.zip", "w") as out:
        for entry in z.namelist():
            if entry != "tables/measure_settings.json":
                out.writestr(entry, z.read(entry))
    with target() as s:
        out = import_bundle(s, tmp_path / "older2.zip")
    assert out["runs_added"] == 2 and out["rows_added"]["intervention_results"] > 0


@pytest.mark.parametrize(
    ("suite", "expected"),
    [("a/b", "holds '/'"), ("..", "starts with '.'"), (" paper", "holds ' '"), (7, "must be a string")],
)
def test_a_manifest_suite_name_breaking_the_rule_is_refused(exported, target, tmp_path, suite, expected) -> None:
    """The name the import job records and the suite picker shows: a URL path segment and a file name."""
    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(exported) as z, zipfile.ZipFile(path, "w") as out:
        for entry in z.namelist():
            data = z.read(entry)
            if entry == "manifest.json":
                data = json.dumps({**json.loads(data), "suite": suite}).encode()
            out.writestr(entry, data)
    before = _counts(target)
    with target() as s, pytest.raises(BundleError, match=rf"manifest.json: suite = .*: {expected}"):
        import_bundle(s, path, store_dir=tmp_path / "store")
    assert _counts(target) == before and not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    "name", ["paper.layerscope.zip", "paper-steps.layerscope.zip", "paper-steps-rev1.layerscope.zip"]
)
def test_the_shipped_bundles_pass_the_checks(name) -> None:
    manifest, tables = read_bundle(EXAMPLES / name)  # read_bundle runs every check
    assert tables["runs"] and manifest["suite"] in name


def test_the_shipped_steps_bundle_imports(tmp_path) -> None:
    """paper.layerscope.zip imports in tests/test_examples_bundle.py; the steps study too."""
    factory = _factory(f"sqlite:///{tmp_path / 'r.db'}")
    with factory() as s:
        out = import_bundle(s, EXAMPLES / "paper-steps.layerscope.zip", store_dir=tmp_path / "store")
    _, tables = read_bundle(EXAMPLES / "paper-steps.layerscope.zip")
    assert out["runs_added"] == len(tables["runs"]) and out["runs_conflicting"] == []
    assert out["rows_added"]["probe_results"] == len(tables["probe_results"])


def test_the_superseded_cells_bundle_holds_revision_1s_runs_beside_the_steps_study(tmp_path) -> None:
    """paper-steps-rev1: the cells revision 2 of the paper preset retrains (docs/SCIENCE.md#budgets),
    moved out of paper-steps with their controls; it imports into the same database as paper-steps
    without a clash, each run keeping its suite."""
    manifest, tables = read_bundle(EXAMPLES / "paper-steps-rev1.layerscope.zip")
    runs = tables["runs"]
    trained = [r for r in runs if not r.get("control")]
    assert manifest["suite"] == "paper-steps-rev1" and {r["suite"] for r in runs} == {"paper-steps-rev1"}
    cells = {(r["family"], r["task"]) for r in trained}
    assert cells == {("transformer", "s3"), ("mamba", "s3"), ("mamba2", "s3"), ("mamba2", "parity")}
    assert len(trained) == 12 and len(runs) == 24  # 3 seeds each, with their random-init controls
    s3 = [r for r in trained if r["task"] == "s3"]
    assert {r["train_config"]["max_steps"] for r in s3} == {6_000}
    assert all(not r["train_config"].get("plateau_gap_share") for r in trained)  # revision 1's rule
    factory = _factory(f"sqlite:///{tmp_path / 'r.db'}")
    _, steps = read_bundle(EXAMPLES / "paper-steps.layerscope.zip")
    with factory() as s:
        b = import_bundle(s, EXAMPLES / "paper-steps-rev1.layerscope.zip", store_dir=tmp_path / "store")
        a = import_bundle(s, EXAMPLES / "paper-steps.layerscope.zip", store_dir=tmp_path / "store")
    assert b["runs_added"] == 24 and b["runs_conflicting"] == []
    assert a["runs_added"] == len(steps["runs"]) and a["runs_conflicting"] == []


# serve on a free port: the default 8050 may be taken on the machine (the port is checked first)
@pytest.mark.parametrize(
    "command", [["import"], ["report", "-o", "{tmp}/RESULTS.md", "--no-figures"], ["serve", "--port", "{port}"]]
)
def test_cli_refuses_a_bad_bundle_in_one_line(exported, tmp_path, monkeypatch, capsys, command) -> None:
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    from store.settings import get_settings

    get_settings.cache_clear()
    path = edited(exported, tmp_path / "badrows.zip", "probe_results", _set("accuracy", "abc"))
    argv = [command[0], str(path), *(a.format(tmp=tmp_path, port=free_port()) for a in command[1:])]
    try:
        assert main(argv) == 1
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "badrows.zip: refused as a whole, nothing imported: tables/probe_results.json: probe_results[0]" in err[0]
    assert "accuracy = 'abc': Input should be a valid number" in err[0]
    assert not (tmp_path / "RESULTS.md").exists()
