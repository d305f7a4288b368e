"""A run trained again (its weights rebuilt) loses the rows of the model it replaces in the
transaction that stores it, and is measured afterwards: meanwhile it is marked ``remeasuring``
and ``layerscope export`` refuses the suite, naming it, unless ``--allow-partial``
(docs/SCIENCE.md#rebuilding-weights). Found in a study: an export made by another process during
that window held the run without probes, and the claims read "not enough data" for its cell."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlalchemy import func, select

import worker.pipeline as pipeline
from backend.bundle_export import RunsBeingRebuilt, export_bundle
from store.models import ProbeResult, Run
from tests.cli_one_line import assert_one_line_error, run_cli
from worker.job_params import SuiteParams
from worker.persist import REMEASURING
from worker.pipeline import local_env, run_suite

ONE = dict(preset="smoke", families=["gru"], tasks=["parity"], max_seconds=600.0, name="rb")


@pytest.fixture
def env(cli_home):
    """The CLI's DB and model store (``cli_home``), so that ``layerscope export`` reads what the suite wrote."""
    return local_env(f"sqlite:///{cli_home / 'cli.db'}", cli_home / "store", device="cpu")


def _weightless(env) -> int:
    """The suite's one run, measured, then as imported from a bundle without weights."""
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        s.get(Run, run_id).checkpoint_id = None
        s.commit()
    return run_id


def _probe_rows(env, run_id: int) -> int:
    with env.session_factory() as s:
        return s.scalar(select(func.count()).select_from(ProbeResult).where(ProbeResult.run_id == run_id))


def test_an_export_while_a_rebuilt_run_is_measured_is_refused(env, tmp_path, monkeypatch):
    run_id = _weightless(env)
    assert _probe_rows(env, run_id) > 0  # the old model's probes
    seen: dict = {}
    real = pipeline.measure_run

    def export_meanwhile(*args, **kw):  # another process exports before the probes are fitted again
        if not seen:
            with env.session_factory() as s:
                seen["status"] = s.get(Run, run_id).status
                with pytest.raises(RunsBeingRebuilt, match=r"gru-parity-s0 \(run \d+\).*wait for the rebuild"):
                    export_bundle(s, "rb", tmp_path / "refused.zip")
                seen["manifest"] = export_bundle(s, "rb", tmp_path / "partial.zip", allow_partial=True)
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "measure_run", export_meanwhile)
    assert run_suite(SuiteParams(**ONE, rebuild_weights=True), env) == [run_id]
    assert seen["status"] == REMEASURING
    assert not (tmp_path / "refused.zip").exists()  # refused before anything is written
    assert [r["status"] for r in seen["manifest"]["runs"]] == [REMEASURING]  # the partial bundle says so
    with zipfile.ZipFile(tmp_path / "partial.zip") as z:
        assert json.loads(z.read("tables/probe_results.json")) == []
    with env.session_factory() as s:  # measured again: complete, and exported as usual
        run = s.get(Run, run_id)
        assert run.status == "complete" and "rebuilt_from" in run.made_with
        manifest = export_bundle(s, "rb", tmp_path / "after.zip")
    assert manifest["tables"]["probe_results"]["rows"] == _probe_rows(env, run_id) > 0


def test_a_rebuild_stopped_before_its_measurements_keeps_the_export_refused_until_it_resumes(env, cli_home):
    run_id = _weightless(env)

    def killed(*args, **kw):
        raise KeyboardInterrupt  # the worker dies after storing the rebuilt run, before any measurement

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "measure_run", killed)
        with pytest.raises(KeyboardInterrupt):
            run_suite(SuiteParams(**ONE, rebuild_weights=True), env)
    with env.session_factory() as s:
        assert s.get(Run, run_id).status == REMEASURING and s.get(Run, run_id).checkpoint_id is not None
    assert _probe_rows(env, run_id) == 0

    bundle = cli_home / "rb.zip"
    line = assert_one_line_error(["export", "--suite", "rb", "-o", str(bundle)], "1 run(s) being rebuilt")
    assert f"gru-parity-s0 (run {run_id})" in line and "--allow-partial" in line and not bundle.exists()
    rc, _, err = run_cli(["export", "--suite", "rb", "-o", str(bundle), "--allow-partial"])
    assert rc == 0 and bundle.is_file(), err
    assert "1 run(s) exported while being rebuilt, without all their results (--allow-partial): gru-parity-s0" in err

    # the suite run again measures the rebuilt weights (not rebuilt a second time) and clears the mark
    (again,) = run_suite(SuiteParams(**ONE), env)
    with env.session_factory() as s:
        assert again == run_id and s.get(Run, run_id).status == "complete"
    assert _probe_rows(env, run_id) > 0
    rc, _, err = run_cli(["export", "--suite", "rb", "-o", str(bundle)])
    assert rc == 0 and "being rebuilt" not in err, err


def test_a_staged_suite_clears_the_mark_once_its_parts_are_stored(env):
    """A staged suite (``parts``) leaves the run ``trained``, not ``remeasuring``, once its parts are stored."""
    run_id = _weightless(env)
    run_suite(SuiteParams(**ONE, parts=["probes"], rebuild_weights=True), env)
    with env.session_factory() as s:
        assert s.get(Run, run_id).status == "trained"
        export_bundle(s, "rb", env.store_dir / "staged.zip")  # not refused
    assert _probe_rows(env, run_id) > 0


def test_the_api_bundle_is_refused_with_409_unless_allow_partial(api):
    from tests.conftest import seed_runs

    first, *_ = seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0, 1), suite="t")
    with api.factory() as s:  # as the pipeline leaves a rebuilt run until it is measured again
        s.get(Run, first).status = REMEASURING
        s.commit()
    refused = api.client.get("/api/suites/t/bundle")
    assert refused.status_code == 409 and "1 run(s) being rebuilt" in refused.json()["detail"]
    assert f"(run {first})" in refused.json()["detail"]
    partial = api.client.get("/api/suites/t/bundle", params={"allow_partial": True})
    assert partial.status_code == 200 and partial.headers["content-type"] == "application/zip"


def test_the_api_counts_runs_being_rebuilt_and_serves_their_bundle_only_when_asked_partial(api):
    from tests.conftest import seed_runs

    _, second = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0, 1), suite="rb")
    assert "n_rebuilding" not in api.client.get("/api/suites").json()[0]  # absent when none
    with api.factory() as s:
        s.get(Run, second).status = REMEASURING
        s.commit()
    (listed,) = api.client.get("/api/suites").json()
    assert listed["n_rebuilding"] == 1 and listed["n_runs"] == 2
    refused = api.client.get("/api/suites/rb/bundle")
    assert refused.status_code == 409 and "lstm-parity-s1" in refused.json()["detail"]
    partial = api.client.get("/api/suites/rb/bundle", params={"allow_partial": "true"})
    assert partial.status_code == 200 and partial.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(partial.content)) as z:
        statuses = {r["name"]: r["status"] for r in json.loads(z.read("manifest.json"))["runs"]}
    assert statuses == {"lstm-parity-s0": "trained", "lstm-parity-s1": REMEASURING}  # as seed_runs stores it
