"""A suite job whose measurement cannot fit ``LAYERSCOPE_MEASURE_MEMORY_GB`` is refused before it
trains (the worker's own bound can be smaller than the submitting process's), and the job's error
is the refusal's one line, not a traceback."""

from __future__ import annotations

import pytest

from science.bounded import MEMORY_SETTING, MeasureMemoryError


@pytest.fixture
def tiny_bound(monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv(MEMORY_SETTING, "0.000001")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_suite_run_over_the_bound_is_refused_before_training(tiny_bound, tmp_path, monkeypatch) -> None:
    import worker.pipeline as pipeline
    from store.models import Run
    from worker.job_params import SuiteParams
    from worker.pipeline import local_env, run_suite

    trained: list[object] = []
    monkeypatch.setattr(pipeline, "train_or_init", lambda *a, **k: trained.append(1))
    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    with pytest.raises(MeasureMemoryError, match=f"set {MEMORY_SETTING} to at least"):
        run_suite(SuiteParams(preset="smoke", families=["gru"], tasks=["parity"], seeds=[0], max_steps=2), env)
    assert trained == []
    with env.session_factory() as s:
        assert s.query(Run).count() == 0


def test_the_job_error_is_the_refusal_line() -> None:
    from worker.runner import Runner

    class Ctx:
        job_id, attempt = 1, 1

        def __init__(self) -> None:
            self.logged: list[str] = []

        def progress(self, *a, **k) -> None: ...

        def attach_run(self, run_id) -> None: ...

        def log(self, text: str) -> None:
            self.logged.append(text)

    line = f"probes at L=40 needs 1 GiB at once, over {MEMORY_SETTING}=0.5; set {MEMORY_SETTING} to at least 1"

    def refuse(kind, params, ctx, env):
        raise MeasureMemoryError(line)

    runner = Runner.__new__(Runner)
    runner._executor, runner.name, runner._env = refuse, "w", object()
    ctx = Ctx()
    state, fields = runner._outcome(ctx, "probe", {"run_id": 1}, 1)
    assert state == "failed" and fields["error"] == line and MEMORY_SETTING in fields["message"]
    assert ctx.logged == [line]  # no traceback in the job's log either
