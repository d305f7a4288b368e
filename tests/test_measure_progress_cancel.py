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


def _states(n: int = 400, d: int = 12, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    X = torch.randn(n, d, generator=g) + 2.0 * torch.nn.functional.one_hot(y, d).float()  # readable classes
    return X, y


def test_inlp_checks_a_cancel_before_every_round(monkeypatch) -> None:
    """One INLP fit is many probe fits (~80 at d_model 160): a cancel lands between rounds."""
    import science.inlp as inlp  # INLP's rounds live there; each fits its probe with fit_design
    import science.interventions as interventions

    X, y = _states()
    fits = []
    real = inlp.fit_design
    monkeypatch.setattr(inlp, "fit_design", lambda *a, **k: fits.append(1) or real(*a, **k))
    full = interventions.fit_edit("inlp", X, y, 3, seed=0, ctx=Recorder())
    assert full.info["n_rounds"] >= 2 and len(fits) == full.info["n_rounds"] + 1  # needs several rounds
    fits.clear()
    ctx = Recorder(cancel_after=2)
    with pytest.raises(JobCancelled):
        interventions.fit_edit("inlp", X, y, 3, seed=0, ctx=ctx)
    assert ctx.checks == 3 and len(fits) == 2  # two rounds fitted, the third never started


def test_random_removal_checks_a_cancel_before_every_draw(monkeypatch) -> None:
    import torch

    import science.measure as measure

    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=8), seed=0
    ).eval()
    data = task.generate(12, 16, 0, split="test")
    base = measure.per_sequence_accuracy(measure.predictions(model, data.tokens), data.labels)
    passes = []
    real = measure.predictions
    monkeypatch.setattr(measure, "predictions", lambda *a, **k: passes.append(1) or real(*a, **k))
    ctx = Recorder(cancel_after=2)
    with pytest.raises(JobCancelled):
        measure.random_removal_effect(model, 0, torch.zeros(8), 2, data, base, 0, draws=5, ctx=ctx)
    assert len(passes) == 2  # two of the five draws, then the cancel


def test_probes_check_a_cancel_at_every_layer() -> None:
    from science.measure import measure_probes

    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=3, d_model=8), seed=0
    ).eval()
    ctx = Recorder(cancel_after=2)
    with pytest.raises(JobCancelled):
        measure_probes(model, task, run_seed=0, eval_lengths=[12], n_sequences=40, config_hash="", ctx=ctx)
    layers_done = [m for _, m in ctx.seen if m.startswith("probe layer")]
    assert len(layers_done) == 1  # of emb + 3 layers at the one length: stopped inside it
