"""The rank-D random draw is mean ablation (``science.interventions.random_removal``): it is not
measured again. A row that removes the whole space and the `mean` row share one forward pass,
and the rank-D draw's delta equals the mean row's own, whichever comes first."""

from __future__ import annotations

import pytest

from models_store import ModelConfig, build_model
from science import measure
from science.tasks import get_task


def _measure(model, task, methods: list[str]) -> list:
    return measure.measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[12],
        n_sequences=40,
        methods=methods,
        layers=[0],
        pca_k=8,  # k = D: pca_top_k removes the whole space too, as a projection
        conv1d=False,
        fit_length=12,
        n_permutations=50,
    )


@pytest.mark.parametrize("methods", [["mean"], ["pca_top_k", "mean"]])
def test_rank_d_draw_reuses_mean_ablation(monkeypatch, methods) -> None:
    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=8), seed=0
    ).eval()
    forwards = {"n": 0}
    real = measure.predictions

    def counted(*args, **kwargs):
        forwards["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(measure, "predictions", counted)
    rows = _measure(model, task, methods)
    mean = next(r for r in rows if r.method == "mean")
    assert mean.rank_removed == 8 and mean.random_draws == 1
    assert mean.random_delta_pp == pytest.approx(mean.delta_pp, abs=1e-9)
    counted_before = forwards["n"]
    forwards["n"] = 0
    monkeypatch.setattr(measure, "_removes_whole_space", lambda *a: False)  # not recognised: measured twice
    _measure(model, task, methods)
    assert counted_before == forwards["n"] - 1  # one forward pass fewer
