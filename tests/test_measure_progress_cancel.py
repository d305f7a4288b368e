"""Interventions report progress while they fit their edits (a job sat at 0% for ~8 min
then jumped to 65%) and honour a cancel between fits, not only once the evaluation starts."""

from __future__ import annotations

import pytest

from models_store import ModelConfig, build_model
from science.context import JobCancelled, SilentContext
from science.measure import FIT_SHARE, measure_interventions
from science.tasks import get_task


class Recorder(SilentContext):
    def __init__(self, cancel_after: int | None = None) -> None:
        super().__init__()
        self.seen: list[tuple[float, str]] = []
        self.checks = 0
        self.cancel_after = cancel_after

    def progress(self, fraction: float, message: str = "") -> None:
        self.seen.append((fraction, message))

    def check_cancelled(self) -> None:
        self.checks += 1
        if self.cancel_after is not None and self.checks > self.cancel_after:
            raise JobCancelled("cancelled")


def _run(ctx):
    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=8), seed=0
    ).eval()
    return measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[12],
        n_sequences=40,
        methods=["mean", "project_out"],
        fit_length=12,
        n_permutations=100,
        ctx=ctx,
    )


def test_progress_moves_during_the_fits_and_never_goes_back() -> None:
    ctx = Recorder()
    _run(ctx)
    fractions = [f for f, _ in ctx.seen]
    fitting = [(f, m) for f, m in ctx.seen if m.startswith("fitting")]
    assert len(fitting) == 4 and all(f < FIT_SHARE for f, _ in fitting)  # 2 layers × 2 methods, each announced
    assert fitting[-1][0] > 0
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)


def test_cancel_is_honoured_between_fits() -> None:
    ctx = Recorder(cancel_after=1)
    with pytest.raises(JobCancelled):
        _run(ctx)
    assert all(m.startswith(("capturing", "fitting")) for _, m in ctx.seen)  # stopped before evaluating
