"""``worker.queue.live_suite_job``: the suite job ``layerscope demo`` shows instead of submitting
the same suite again — one under way, or one that succeeded with no child failed or cancelled."""

from __future__ import annotations

from store import jobs as J
from worker.job_params import SuiteParams
from worker.queue import live_suite_job


def _add(factory, params, state: str, parent_id: int | None = None) -> int:
    with factory() as s:
        job = J.new_job("suite" if parent_id is None else "train", params, parent_id=parent_id)
        job.state = state
        s.add(job)
        s.commit()
        return job.id


def test_none_without_a_suite_job_of_these_params(db_factory) -> None:
    _, factory = db_factory
    _add(factory, SuiteParams(preset="smoke"), J.SUCCEEDED)
    assert live_suite_job(factory, SuiteParams(preset="quick")) is None


def test_a_queued_or_running_suite_is_live(db_factory) -> None:
    _, factory = db_factory
    params = SuiteParams(preset="quick")
    _add(factory, params, J.FAILED)
    running = _add(factory, params, J.RUNNING)
    assert live_suite_job(factory, params) == running


def test_a_succeeded_suite_counts_only_without_failed_or_cancelled_children(db_factory) -> None:
    _, factory = db_factory
    params = SuiteParams(preset="quick")
    clean = _add(factory, params, J.SUCCEEDED)
    _add(factory, params, J.SUCCEEDED, parent_id=clean)
    assert live_suite_job(factory, params) == clean
    newer = _add(factory, params, J.SUCCEEDED)
    _add(factory, params, J.CANCELLED, parent_id=newer)  # the newer one lost a run: the older one stands
    assert live_suite_job(factory, params) == clean
    _add(factory, params, J.FAILED, parent_id=clean)
    assert live_suite_job(factory, params) is None


def test_demo_says_a_suite_still_under_way_goes_on_rather_than_already_ran(db_factory, capsys) -> None:
    from backend.cli.demo import _submit_unless_ran

    _, factory = db_factory
    params = SuiteParams(preset="quick")
    suite = _add(factory, params, J.SUCCEEDED)  # fanned out; its train jobs are what is left
    for state in (J.SUCCEEDED, J.RUNNING, J.QUEUED):  # a Ctrl-C'd demo: one run done, two to go
        _add(factory, params, state, parent_id=suite)
    _submit_unless_ran(params, False, None, factory, None)
    err = capsys.readouterr().err
    assert f"the quick suite is under way here (job {suite}: 1 of 3 runs done)" in err, err
    assert "already ran" not in err, err


def test_demo_says_a_finished_suite_already_ran(db_factory, capsys) -> None:
    from backend.cli.demo import _submit_unless_ran

    _, factory = db_factory
    params = SuiteParams(preset="quick")
    suite = _add(factory, params, J.SUCCEEDED)
    _add(factory, params, J.SUCCEEDED, parent_id=suite)
    _store_run(factory, "quick")
    _submit_unless_ran(params, False, None, factory, None)
    assert f"the quick suite already ran here (job {suite})" in capsys.readouterr().err


def _store_run(factory, suite: str) -> None:
    from worker import persist

    with factory() as s:
        persist.save_run(
            s, name="r", suite=suite, family="gru", task="parity", seed=0, n_layers=2, d_model=8,
            n_params=100, config_hash=f"h-{suite}", train_config={}, loss_curve=[], behaviour={},
        )  # fmt: skip


def test_demo_runs_a_finished_suite_again_when_its_runs_were_deleted(db_factory, capsys, monkeypatch) -> None:
    """Fresh user: after `suite delete quick`, `demo` said "already ran here" and trained nothing."""
    import worker.queue
    from backend.cli.demo import _submit_unless_ran

    _, factory = db_factory
    params = SuiteParams(preset="quick")
    suite = _add(factory, params, J.SUCCEEDED)
    _add(factory, params, J.SUCCEEDED, parent_id=suite)  # finished; no run of suite 'quick' stored now
    submitted = []
    monkeypatch.setattr(worker.queue, "submit", lambda f, q, kind, p, **kw: submitted.append((kind, p)) or 99)
    settings = type("Settings", (), {"max_attempts": 3})()
    _submit_unless_ran(params, False, settings, factory, None)
    assert submitted == [("suite", params)]
    assert "submitted the quick suite as job 99" in capsys.readouterr().err


def test_demo_rerun_trains_again() -> None:
    """`demo --rerun` submits the suite with force: stored runs are trained afresh, not skipped."""
    from backend.cli.demo import live_params

    assert live_params("quick", rerun=True).force is True
    assert live_params("quick", rerun=False).force is False
