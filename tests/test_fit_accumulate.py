"""A doubled fit set is the set it doubles plus new sequences, and LEACE (``EditMethod.accumulates``)
fitted on it adds the new sequences' statistics to those it kept: the same edit as LEACE fitted on
every row of the doubled set, from a pass over the new sequences only (docs/SCIENCE.md#fit-size)."""

from __future__ import annotations

import torch

import science.measure as measure
from models_store import ModelConfig, build_model
from science.bounded import MemoryBound
from science.captured import capture
from science.edit_methods import Leace
from science.methods import accumulates
from science.tasks import get_task


def _interventions(memory: MemoryBound | None = None) -> measure._Interventions:
    task = get_task("dyck")
    cfg = ModelConfig(family="gru", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=3, d_model=16)
    model = build_model(cfg, seed=0).eval()
    settings = measure.method_settings(["leace"], {})
    return measure._Interventions(
        model=model,
        task=task,
        run_seed=0,
        layers=[0, 2],
        fit_length=12,
        n_sequences=40,
        settings=settings,
        device="cpu",
        ctx=measure.SilentContext(),
        memory=memory or MemoryBound(),
        methods=("leace",),
    )


def test_only_leace_among_the_builtins_accumulates():
    assert accumulates("leace")
    assert not any(accumulates(m) for m in ("inlp", "project_out", "mean", "pca_top_k"))


def test_a_doubled_fit_set_begins_with_the_set_it_doubles():
    iv = _interventions()
    n = iv.n_fit
    one, two, four = iv._fit_data(n), iv._fit_data(2 * n), iv._fit_data(4 * n)
    assert (two.n, four.n) == (2 * n, 4 * n)
    assert torch.equal(two.tokens[:n], one.tokens) and torch.equal(four.tokens[: 2 * n], two.tokens)
    assert torch.equal(four.labels[2 * n :], iv._new_sequences(4 * n).labels)
    assert not torch.equal(two.tokens[n:], one.tokens)  # new sequences, not the same ones again


def _leace_on_every_row(iv: measure._Interventions, n: int, layer: int):
    data = iv._fit_data(n)
    states = capture(iv.model, data, "cpu", layers=[layer], preds=False).states[layer]
    x, y = states.reshape(-1, states.shape[-1]), data.labels.reshape(-1)
    return Leace().fit(x[y >= 0], y[y >= 0], iv.task.n_classes)


def _doubled_twice(iv: measure._Interventions, monkeypatch) -> tuple[measure._Fitted, list[int]]:
    fed: list[int] = []  # sequences run through the model to add statistics
    real = measure.feed_layers

    def counting(model, data, device, layers, feed):
        fed.append(data.n)
        return real(model, data, device, layers, feed)

    monkeypatch.setattr(measure, "feed_layers", counting)
    monkeypatch.setattr(measure, "removal_line", lambda report: -1.0)  # every refit asks for more sequences
    return iv.fit_edits(["leace"]), fed


def test_leace_on_a_doubled_set_equals_leace_on_its_every_row(monkeypatch):
    iv = _interventions()
    fitted, fed = _doubled_twice(iv, monkeypatch)
    n = iv.n_fit
    assert fed == [n, 2 * n]  # the new sequences of 2n, then of 4n: never a row twice
    assert iv._stats == {}  # nothing kept once fitted for good
    for layer in iv.layers:
        assert fitted.fit_sizes[("leace", layer)] == 4 * n
        got, want = fitted.edits[("leace", layer)], _leace_on_every_row(iv, 4 * n, layer)
        assert got.rank_removed == want.rank_removed
        for a, b in ((got.left, want.left), (got.right, want.right), (got.center, want.center)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)  # float64 sums grouped by chunk


def test_a_bounded_measurement_accumulates_the_same_statistics(monkeypatch):
    unbounded, _ = _doubled_twice(_interventions(), monkeypatch)
    iv = _interventions(MemoryBound(200_000))  # the first set's rows and LEACE's copies of them go to disk
    assert iv._fit_need(iv.n_fit, ["leace"])[1]
    bounded, fed = _doubled_twice(iv, monkeypatch)
    # the 86 new sequences of 2n: one pass for both layers; the 172 of 4n, one batch of both layers
    # over the bound (2 × 172 × 12 × 16 floats): a pass a layer
    assert fed == [iv.n_fit, 2 * iv.n_fit, 2 * iv.n_fit]
    for key, edit in unbounded.edits.items():
        torch.testing.assert_close(bounded.edits[key].left, edit.left, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(bounded.edits[key].center, edit.center, rtol=1e-9, atol=1e-9)
