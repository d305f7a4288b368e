"""The ``layerscope`` CLI: commands, and one-line errors with a non-zero exit (no traceback)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from backend.cli import main
from backend.core.security import hash_token
from store.models import ApiToken, Job, MeasureSettings, ProbeResult
from store.session import make_engine, make_sessionmaker
from store.settings import get_settings
from tests.conftest import FAKE_EXECUTOR


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("LAYERSCOPE_WORKER_POLL_SECONDS", "0.02")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def factory(tmp_path):
    return make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'cli.db'}"))


def one_line_error(capsys, rc: int, expected_rc: int, *needles: str) -> str:
    out = capsys.readouterr()
    assert rc == expected_rc, out
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("layerscope: error: "), out.err
    assert "Traceback" not in out.err + out.out
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "argv, rc, needles",
    [
        (["suite", "--preset", "huge"], 2, ["--preset", "huge"]),
        (["suite"], 2, ["--preset"]),
        # --family/--task/--method are choices, so the error lists the valid names
        (["suite", "--preset", "smoke", "--family", "rnn"], 2, ["--family", "rnn", "transformer", "gru"]),
        (["suite", "--preset", "smoke", "--task", "chess"], 2, ["--task", "chess", "parity", "code_depth"]),
        (["probe", "abc"], 2, ["run_id"]),
        (["probe", "0"], 2, ["run_id"]),
        (["probe", "42"], 1, ["run 42 not found"]),
        (["intervene", "42"], 1, ["run 42 not found"]),
        (["intervene", "42", "--method", "nope"], 2, ["--method", "nope", "leace"]),
        (["patch", "42"], 1, ["run 42 not found"]),
        (["worker", "--device", "gpu9"], 2, ["--device"]),
        (["serve", "--port", "99999"], 2, ["--port"]),
        (["frobnicate"], 2, ["frobnicate"]),
        (["token", "create"], 2, ["--name"]),
        (["token", "revoke", "nobody"], 1, ["nobody"]),
    ],
)
def test_wrong_arguments_give_one_line(cli_env, capsys, argv, rc, needles) -> None:
    one_line_error(capsys, main(argv), rc, *needles)


def test_unreachable_db_is_one_line(cli_env, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_DB_URL", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    get_settings.cache_clear()
    one_line_error(capsys, main(["db", "upgrade"]), 1, "database not reachable")


def test_help_and_db_upgrade(cli_env, capsys) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    from store.migrate import head_revision

    assert f"at revision {head_revision()}" in capsys.readouterr().out
    assert (cli_env / "cli.db").exists()


def test_token_create_prints_once_and_stores_the_hash(cli_env, capsys) -> None:
    assert main(["token", "create", "--name", "alice"]) == 0
    out = capsys.readouterr()
    token = out.out.strip()
    assert token.startswith("lsk_") and "shown only now" in out.err
    with factory(cli_env)() as s:
        row = s.execute(select(ApiToken)).scalar_one()
        assert row.name == "alice" and row.token_hash == hash_token(token)
    assert main(["token", "list"]) == 0
    listed = capsys.readouterr().out
    assert "alice" in listed and token not in listed
    assert main(["token", "revoke", "alice"]) == 0


def test_worker_runs_a_queued_job(cli_env, capsys) -> None:
    from worker.job_params import TrainParams
    from worker.queue import JobQueue, submit

    assert main(["db", "upgrade"]) == 0
    settings = get_settings()
    f = factory(cli_env)
    job_id = submit(
        f,
        JobQueue.from_settings(settings),
        "train",
        TrainParams(family="gru", task="dyck", n_layers=1, max_steps=2, measure={"eval_lengths": [40]}),
    )
    assert main(["worker", "--name", "cli-w", "--executor", FAKE_EXECUTOR, "--max-jobs", "1"]) == 0
    with f() as s:
        job = s.get(Job, job_id)
        assert (job.state, job.worker) == ("succeeded", "cli-w")
        assert len(s.execute(select(ProbeResult)).all()) == 2


@pytest.mark.slow
def test_suite_then_probe_intervene_patch_on_the_real_pipeline(cli_env, capsys) -> None:
    argv = ["suite", "--preset", "smoke", "--family", "gru", "--task", "parity", "--name", "cli"]
    assert main(argv) == 0
    run_id = int(capsys.readouterr().out.strip().rsplit(" ", 1)[-1])
    assert main(["probe", str(run_id), "--eval-length", "40", "--n-sequences", "24"]) == 0
    assert (
        main(
            [
                "intervene",
                str(run_id),
                "--method",
                "mean",
                "--layer",
                "0",
                "--eval-length",
                "40",
                "--n-permutations",
                "100",
            ]
        )
        == 0
    )
    assert main(["patch", str(run_id), "--position", "3", "--n-pairs", "8"]) == 0
    with factory(cli_env)() as s:
        assert s.execute(select(ProbeResult).where(ProbeResult.run_id == run_id)).first() is not None
        n_settings = s.scalar(select(func.count()).select_from(MeasureSettings))
    capsys.readouterr()
    # found by a fresh user: a failed measurement left a settings row; a patch whose every site the
    # family lacks stored nothing and said "stored"
    for argv, needle in (
        (["intervene", str(run_id), "--layer", "99"], "out of range"),
        (["patch", str(run_id), "--site", "state:ssm", "--n-pairs", "8"], "gru has no such state"),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err  # (after the progress bar)
        assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("layerscope: error: ")
        assert needle in err.strip().splitlines()[-1]
    with factory(cli_env)() as s:
        assert s.scalar(select(func.count()).select_from(MeasureSettings)) == n_settings


@pytest.mark.parametrize("command", ["probe", "intervene", "patch"])
@pytest.mark.parametrize("checkpoint_id", [None, "0" * 64])  # none stored / recorded but not in the store
def test_run_without_weights_says_how_to_get_them(cli_env, capsys, command, checkpoint_id) -> None:
    """Imported runs used to fail with 'run 1 has no checkpoint to load'."""
    from store.models import Run
    from tests.conftest import seed_runs

    main(["db", "upgrade"])
    capsys.readouterr()
    f = factory(cli_env)
    (run_id,) = seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0,), suite="paper")
    with f() as s:
        s.query(Run).update({"checkpoint_id": checkpoint_id})
        s.commit()
    line = one_line_error(capsys, main([command, str(run_id)]), 1, f"run {run_id} has no model weights here")
    assert "layerscope suite --preset paper" in line and "--weights" in line


def test_worker_job_on_a_run_without_weights_says_how_to_get_them(cli_env) -> None:
    """A probe/intervene/patch job submitted through the API reads the same guidance."""
    from tests.conftest import seed_runs
    from worker.pipeline import WorkerEnv, load_run

    main(["db", "upgrade"])
    f = factory(cli_env)
    (run_id,) = seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0,), suite="paper")
    with pytest.raises(Exception, match=f"run {run_id} has no model weights here.*--weights"):
        load_run(run_id, WorkerEnv(f, cli_env / "store"))


@pytest.mark.parametrize("args, shown", [(["intervene", "-3"], "-3"), (["probe", "-1.5"], "-1.5")])
def test_a_negative_number_reads_as_a_bad_value_not_an_unknown_option(capsys, args, shown) -> None:
    """click reads a token starting with '-' as an option: `intervene -3` said 'No such option: -3'."""
    line = one_line_error(capsys, main(args), 2, f"{shown} is not a valid value here")
    assert "No such option" not in line


def test_a_mistyped_option_still_names_the_option(capsys) -> None:
    one_line_error(capsys, main(["intervene", "3", "--methd", "x"]), 2, "No such option: --methd")


def test_version_prints_the_version_and_commit(capsys) -> None:
    from layerscope_core.provenance import code_versions

    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"layerscope {code_versions()['layerscope']}") and "torch" in out


def test_export_to_a_folder_names_a_file_instead(cli_env, capsys) -> None:
    main(["db", "upgrade"])
    capsys.readouterr()
    one_line_error(
        capsys,
        main(["export", "--suite", "s", "-o", str(cli_env)]),
        1,
        "is a folder",
        str(cli_env / "s.layerscope.zip"),
    )


@pytest.mark.parametrize(
    "run_ids, said",
    [([2], "layerscope: stored run id 2\n"), ([2, 5], "layerscope: stored run ids 2, 5\n"), ([], "stored no run")],
)
def test_a_suite_says_its_run_ids_as_ids(cli_env, capsys, monkeypatch, run_ids, said) -> None:
    """It said "stored run(s) 2", which reads like a count of 2."""
    import backend.cli.common as C

    monkeypatch.setattr(C, "run_here", lambda *args, **kwargs: {"run_ids": run_ids})
    assert main(["suite", "--preset", "smoke", "--family", "gru", "--task", "parity", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert said in out and "run(s)" not in out, out


@pytest.mark.slow
def test_a_stored_run_is_measured_again_with_its_own_settings(cli_env, capsys) -> None:
    """Found by a fresh user: `probe RUN_ID` on a `smoke` run used the job defaults (500 sequences),
    so its probe and intervention rows came from different settings and nothing said so."""
    argv = ["suite", "--preset", "smoke", "--family", "gru", "--task", "parity", "--name", "own"]
    assert main(argv) == 0
    run_id = int(capsys.readouterr().out.strip().rsplit(" ", 1)[-1])
    with factory(cli_env)() as s:
        before = s.scalar(select(ProbeResult.settings_id).where(ProbeResult.run_id == run_id).limit(1))
        own = s.get(MeasureSettings, before).params["n_probe_sequences"]
    assert main(["probe", str(run_id), "--eval-length", "40"]) == 0
    with factory(cli_env)() as s:
        after = s.scalar(select(ProbeResult.settings_id).where(ProbeResult.run_id == run_id).limit(1))
        assert s.get(MeasureSettings, after).params["n_probe_sequences"] == own != 500


def test_an_error_after_a_progress_bar_starts_its_own_line(capsys) -> None:
    # a new user's trial: "intervene: 0%|…| layerscope: error: …" on one line
    import sys

    from tqdm import tqdm

    from backend.cli.entry import _err

    bar = tqdm(total=10, file=sys.stderr, desc="intervene")
    bar.update(3)
    _err("it broke")
    err = capsys.readouterr().err
    assert "\nlayerscope: error: it broke" in err and "intervene" in err
    assert not tqdm._instances  # closed
