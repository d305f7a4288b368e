"""The CLI's read and housekeeping commands: runs list/show/tag/note/delete, suite delete,
jobs list/cancel/logs, views list/delete, and --debug / LAYERSCOPE_DEBUG."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from backend.cli import main
from store.models import InterventionResult, Job, PatchingResult, ProbeResult, Run, SavedView
from store.session import make_engine, make_sessionmaker
from store.settings import get_settings
from tests.conftest import seed_runs

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper.layerscope.zip"


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("LAYERSCOPE_DEBUG", raising=False)
    get_settings.cache_clear()
    assert main(["db", "upgrade"]) == 0
    yield tmp_path
    get_settings.cache_clear()


def factory(tmp_path):
    return make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'cli.db'}"))


def _checkpoint(tmp_path: Path, f, run_id: int, ckpt: str) -> Path:
    folder = tmp_path / "store" / ckpt
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w")
    with f() as s:
        s.get(Run, run_id).checkpoint_id = ckpt
        s.commit()
    return folder


def test_runs_list_json_lists_the_shipped_study(cli_env, capsys) -> None:
    assert main(["import", str(BUNDLE)]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--suite", "paper", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 60 and {r["suite"] for r in runs} == {"paper"}
    assert all(r["control"] is None for r in runs)
    # the random-init controls are left out by default, and the listing says how many
    assert main(["runs", "list", "--suite", "paper", "--controls", "only", "--json"]) == 0
    controls = json.loads(capsys.readouterr().out)
    assert controls and all(r["control"] == "init" for r in controls)
    assert main(["runs", "list", "--suite", "paper", "--search", "init"]) == 0
    err = capsys.readouterr().err
    assert f"0 run(s) ({len(controls)} random-init control(s) matching left out: --controls include)" in err
    assert main(["runs", "list", "--suite", "paper", "--controls", "include", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert sorted(r["id"] for r in both) == sorted(r["id"] for r in runs + controls)
    assert sum(r["trained"] for r in runs) == 42
    assert main(["runs", "list", "--suite", "paper", "--task", "dyck", "--family", "gru", "--trained"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["id", "suite", "family"] and len(lines) == 1 + 3


@pytest.mark.parametrize(
    "args, said",
    [
        (["--task", "dyk"], "task 'dyk' unknown; one of parity, s3, dyck"),
        (["--family", "lstmm"], "family 'lstmm' unknown; one of transformer"),
        (["--suite", "papr"], "suite 'papr' not found; suites here: 's'"),
    ],
)
def test_runs_list_refuses_a_typo_in_one_line_rather_than_listing_nothing(cli_env, capsys, args, said) -> None:
    seed_runs(factory(cli_env), families=("lstm",), tasks=("parity",), seeds=(0,), suite="s")
    assert main(["runs", "list", *args]) == 1
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err


def test_a_run_is_tagged_found_shown_and_deleted_with_its_rows_and_checkpoint(cli_env, capsys, monkeypatch) -> None:
    f = factory(cli_env)
    ids = seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="t")
    folder = _checkpoint(cli_env, f, ids[0], "a" * 64)
    assert main(["runs", "tag", str(ids[0]), "baseline", "keep"]) == 0
    assert main(["runs", "note", str(ids[0]), "lr too high?"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--search", "BASELINE", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in found] == [ids[0]] and found[0]["tags"] == ["baseline", "keep"]
    assert main(["runs", "list", "--search", "too high", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids[0]]
    assert main(["runs", "show", str(ids[0]), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["notes"] == "lr too high?" and shown["result_rows"]["probe_results"] > 0
    assert main(["runs", "show", str(ids[0])]) == 0  # the text view: why it stopped, what it was built from
    text = {line.split()[0]: line.split(None, 1)[1] for line in capsys.readouterr().out.splitlines() if line.split()}
    assert {"stop_reason", "best_heldout_acc", "from_config", "control"} <= text.keys()
    assert text["stop_reason"] == str(shown["stop_reason"] or "-")
    assert text["precision"] == "fp32" and set(shown["result_precisions"]["patching_results"]) == {"fp32"}
    _one_row_at_bf16(f, ids[1])  # a re-measure at bf16 of one row: the run's rows now mix precisions
    assert main(["runs", "show", str(ids[1])]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("precision"))
    n = shown["result_rows"]["patching_results"]
    assert "mixed: probe_results " in line and f"patching_results 1 bf16 + {n - 1} fp32" in line
    assert "SCIENCE.md#precision" in line
    from backend.cli.remeasure import _warn_other_precision

    _warn_other_precision(f, ids[1], "patching_results", "bf16")  # said before another re-measure
    assert "measured at fp32; these are measured at bf16" in capsys.readouterr().err
    _warn_other_precision(f, ids[0], "probe_results", "fp32")
    assert capsys.readouterr().err == ""
    assert main(["runs", "tag", str(ids[0]), "keep", "--remove"]) == 0

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["runs", "delete", str(ids[0])]) == 1  # answered no: nothing deleted
    assert "nothing deleted" in capsys.readouterr().err
    assert folder.exists()
    assert main(["runs", "delete", str(ids[0]), "--yes"]) == 0
    assert "1 runs" in capsys.readouterr().out
    with f() as s:
        assert s.get(Run, ids[0]) is None and s.get(Run, ids[1]) is not None
        for model in (ProbeResult, InterventionResult, PatchingResult):
            assert s.scalar(select(func.count()).select_from(model).where(model.run_id == ids[0])) == 0
            assert s.scalar(select(func.count()).select_from(model).where(model.run_id == ids[1])) > 0
    assert not folder.exists() and not list((cli_env / "store").iterdir())
    assert main(["runs", "show", str(ids[0])]) == 1
    assert f"run {ids[0]} not found" in capsys.readouterr().err


def _one_row_at_bf16(f, run_id: int) -> None:
    from store.models import MeasureSettings

    with f() as s:
        settings = MeasureSettings(config_hash="b" * 64, params={"precision": "bf16"})
        s.add(settings)
        s.flush()
        row = s.scalars(select(PatchingResult).where(PatchingResult.run_id == run_id).limit(1)).one()
        row.settings_id = settings.id
        s.commit()


def test_suite_delete_exports_first_then_removes_every_run(cli_env, capsys) -> None:
    f = factory(cli_env)
    seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="a")
    keep = seed_runs(f, families=("gru",), tasks=("dyck",), seeds=(0,), suite="b")
    assert main(["suite", "tag", "a", "first-try"]) == 0
    bundle = cli_env / "a.layerscope.zip"
    assert main(["suite", "delete", "a", "--export", str(bundle), "--yes"]) == 0
    assert bundle.is_file() and bundle.stat().st_size > 0
    with f() as s:
        assert set(s.execute(select(Run.id)).scalars()) == set(keep)
    assert main(["suite", "delete", "nope", "--yes"]) == 1
    assert "suite 'nope' not found" in capsys.readouterr().err
    assert main(["import", str(bundle)]) == 0  # the export holds what was deleted
    with f() as s:
        assert s.scalar(select(func.count()).select_from(Run).where(Run.suite == "a")) == 2


def test_export_says_which_folders_it_made_and_a_refused_one_leaves_none(cli_env, capsys) -> None:
    """-o a/b/x.zip makes a and b (a study's layout) and says so, so that a mistyped path is seen;
    an export refused (no such suite) leaves no empty folders behind."""
    seed_runs(factory(cli_env), families=("lstm",), tasks=("parity",), seeds=(0,), suite="s")
    capsys.readouterr()
    assert main(["export", "--suite", "nope", "-o", str(cli_env / "n" / "m" / "x.zip")]) == 1
    assert not (cli_env / "n").exists()
    assert main(["export", "--suite", "s", "-o", str(cli_env / "a" / "b" / "x.zip")]) == 0
    err = capsys.readouterr().err
    assert (cli_env / "a" / "b" / "x.zip").is_file()
    assert err.strip().endswith(f"; made the folder(s) {cli_env / 'a'}, {cli_env / 'a' / 'b'}"), err
    assert main(["export", "--suite", "s", "-o", str(cli_env / "a" / "b" / "y.zip")]) == 0
    assert "made the folder" not in capsys.readouterr().err  # they are there now


def test_suite_move_takes_a_cells_runs_and_their_rows_to_another_suite(cli_env, capsys) -> None:
    """A revised cell's superseded runs leave the suite (docs/SCIENCE.md#budgets): with their
    result rows, the other cells stay; a clash (one run per seed) or a bad name moves nothing."""
    f = factory(cli_env)
    s3 = seed_runs(f, families=("lstm", "gru"), tasks=("s3",), seeds=(0, 1), suite="study")
    seed_runs(f, families=("lstm",), tasks=("dyck",), seeds=(0,), suite="study")
    with f() as s:
        probes = s.scalar(select(func.count()).select_from(ProbeResult).where(ProbeResult.run_id.in_(s3[:2])))
    assert probes > 0
    assert main(["suite", "move", "study", "--to", "study-s3-6k", "--task", "s3", "--family", "lstm"]) == 0
    out = capsys.readouterr().out
    assert "moved 2 run(s)" in out and "lstm × s3" in out and "'study-s3-6k'" in out
    with f() as s:
        moved = dict(s.execute(select(Run.id, Run.suite)).all())
        assert {moved[i] for i in s3[:2]} == {"study-s3-6k"} and {moved[i] for i in s3[2:]} == {"study"}
        assert sum(v == "study" for v in moved.values()) == 3
        assert s.scalar(select(func.count()).select_from(ProbeResult).where(ProbeResult.run_id.in_(s3[:2]))) == probes
    assert main(["runs", "list", "--suite", "study-s3-6k", "--json"]) == 0
    assert {r["suite"] for r in json.loads(capsys.readouterr().out)} == {"study-s3-6k"}
    # refused in one line, nothing moved: a clash with a run of the same cell and seed, a bad name,
    # no run matching, the same suite, an unknown one
    seed_runs(f, families=("gru",), tasks=("s3",), seeds=(0,), suite="other")
    for args, said in [
        (["study", "--to", "other", "--family", "gru"], "already holds a run of the same cell and seed"),
        (["study", "--to", "bad name"], "the name holds"),
        (["study", "--to", "x", "--task", "parity"], "has no run of the given families, tasks and seeds"),
        (["study", "--to", "study"], "in that suite already"),
        (["nope", "--to", "x"], "suite 'nope' not found"),
    ]:
        assert main(["suite", "move", *args]) == 1
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
    with f() as s:
        assert s.scalar(select(func.count()).select_from(Run).where(Run.suite == "study")) == 3


def test_jobs_list_cancel_logs(cli_env, capsys) -> None:
    f = factory(cli_env)
    assert main(["jobs", "list"]) == 0  # nothing yet: said, not a bare header
    assert capsys.readouterr().err.strip() == "layerscope: no jobs here"
    assert main(["views", "list"]) == 0
    assert capsys.readouterr().err.strip() == "layerscope: no saved views here"
    with f() as s:
        s.add_all(
            [
                Job(kind="train", state="queued", config_hash="x", params={}, log="step 1\nstep 2\n"),
                Job(kind="probe", state="succeeded", config_hash="y", params={}),
            ]
        )
        s.commit()
        queued = s.execute(select(Job.id).where(Job.state == "queued")).scalar_one()
    assert main(["jobs", "list", "--state", "queued", "--json"]) == 0
    assert [j["id"] for j in json.loads(capsys.readouterr().out)] == [queued]
    assert main(["jobs", "logs", str(queued), "--tail", "1"]) == 0
    assert capsys.readouterr().out.strip() == "step 2"
    with f() as s:
        silent = s.execute(select(Job.id).where(Job.state == "succeeded")).scalar_one()
    assert main(["jobs", "logs", str(silent)]) == 0  # no log: said, not an empty answer
    said = capsys.readouterr()
    assert said.out == "" and f"job {silent} (succeeded) has no log" in said.err
    with f() as s:  # a suite job that fanned out: its state is its runs' (as jobs list says it)
        suite = Job(kind="suite", state="succeeded", config_hash="z", params={})
        s.add(suite)
        s.flush()
        s.add_all(
            [
                Job(kind="train", state=st, config_hash=st, params={}, parent_id=suite.id)
                for st in ("failed", "succeeded")
            ]
        )
        s.commit()
        suite_id, kids = suite.id, sorted(j.id for j in s.scalars(select(Job).where(Job.parent_id == suite.id)))
    assert main(["jobs", "logs", str(suite_id)]) == 0
    err = capsys.readouterr().err
    assert f"job {suite_id} (failed) has no log; its runs' jobs: {kids[0]}, {kids[1]}" in err
    assert main(["jobs", "cancel", str(queued)]) == 0
    with f() as s:
        assert s.get(Job, queued).state == "cancelled"
    assert main(["jobs", "cancel", str(queued)]) == 1  # already finished: one line
    assert "already cancelled" in capsys.readouterr().err
    assert main(["jobs", "list", "--state", "bogus"]) == 2


def test_jobs_list_shows_a_suite_by_its_runs(cli_env, capsys) -> None:
    """A suite job succeeds once it has queued its train jobs: the list says how many are done."""
    f = factory(cli_env)
    with f() as s:
        suite = Job(kind="suite", state="succeeded", config_hash="s", params={}, progress=1.0, message="succeeded")
        s.add(suite)
        s.flush()
        s.add_all(
            [
                Job(kind="train", state=state, config_hash=str(i), params={}, parent_id=suite.id, progress=p)
                for i, (state, p) in enumerate([("succeeded", 1.0), ("running", 0.5), ("queued", 0.0)])
            ]
        )
        s.commit()
        suite_id = suite.id
    assert main(["jobs", "list", "--kind", "suite"]) == 0
    out = capsys.readouterr().out
    assert "1/3 runs done (1 queued, 1 running)" in out and "0.5" in out
    assert main(["jobs", "list", "--kind", "suite", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == suite_id and row["children"] == {"succeeded": 1, "running": 1, "queued": 1}
    assert row["message"] == "succeeded" and row["children_progress"] == 0.5  # JSON keeps the job's own fields
    # one state everywhere: its runs still run, so it reads running, and --state running finds it
    assert row["state"] == "running" and row["job_state"] == "succeeded"
    assert main(["jobs", "list", "--state", "running", "--kind", "suite", "--json"]) == 0
    assert [j["id"] for j in json.loads(capsys.readouterr().out)] == [suite_id]
    assert main(["jobs", "list", "--state", "succeeded", "--kind", "suite", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_views_list_and_delete(cli_env, capsys) -> None:
    f = factory(cli_env)
    with f() as s:
        s.add(SavedView(slug="abcdefgh", title="dyck curves", page="/curves", state={"task": "dyck"}))
        s.commit()
    assert main(["views", "list", "--json"]) == 0
    views = json.loads(capsys.readouterr().out)
    assert [(v["slug"], v["page"]) for v in views] == [("abcdefgh", "/curves")]
    assert main(["views", "delete", "abcdefgh", "--yes"]) == 0
    assert main(["views", "delete", "abcdefgh", "--yes"]) == 1
    assert "view abcdefgh not found" in capsys.readouterr().err


def test_debug_prints_the_traceback(cli_env, capsys, monkeypatch) -> None:
    assert main(["runs", "show", "999"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert main(["--debug", "runs", "show", "999"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == "layerscope: error: run 999 not found"
    monkeypatch.setenv("LAYERSCOPE_DEBUG", "1")
    assert main(["runs", "show", "999"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, said",
    [
        (["runs", "note", "{rid}", "a\nb"], "notes 'a\\u000ab': must not contain control characters (found U+000A"),
        (["runs", "tag", "{rid}", "bad\x07tag"], "tag 'bad\\u0007tag': must not contain control characters"),
        (["suite", "note", "t", "two\nlines"], "notes 'two\\u000alines': must not contain control characters"),
        (["suite", "tag", "t", "ok", "x\ty"], "tag 'x\\u0009y': must not contain control characters"),
    ],
)
def test_runs_and_suite_notes_and_tags_follow_the_apis_text_rule(cli_env, args, said) -> None:
    from tests.cli_one_line import assert_one_line_error

    f = factory(cli_env)
    rid = seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0,), suite="t")[0]
    assert_one_line_error([a.replace("{rid}", str(rid)) for a in args], said)
    with f() as s:  # nothing stored
        run = s.get(Run, rid)
        assert not run.tags and not run.notes


def test_token_list_json_never_shows_a_token(cli_env) -> None:
    from tests.cli_one_line import run_cli

    assert run_cli(["token", "create", "--name", "ci"])[0] == 0
    token = run_cli(["token", "create", "--name", "bot"])[1].strip()
    assert run_cli(["token", "revoke", "ci"])[0] == 0
    rc, out, err = run_cli(["token", "list", "--json"])
    rows = json.loads(out)
    assert rc == 0 and [(r["name"], r["revoked"]) for r in rows] == [("ci", True), ("bot", False)], err
    assert set(rows[0]) == {"id", "name", "created_at", "revoked"} and token not in out
    rc, out, _ = run_cli(["token", "list"])
    assert rc == 0 and out.splitlines()[1].endswith("\tactive") and "bot" in out
