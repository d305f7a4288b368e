"""Interventions: refit-probe tests on planted signals, LEACE against the library, ranks."""

from __future__ import annotations

import pytest
import torch
from concept_erasure import LeaceEraser

from science.interventions import METHODS, fit_edit
from science.probes import fit_probe


def _split_acc(X: torch.Tensor, y: torch.Tensor, n_classes: int) -> tuple[float, float]:
    """Refit a probe on the first 75 % of rows, score on the rest: (accuracy, majority)."""
    n = int(0.75 * len(y))
    p = fit_probe(X[:n], y[:n], n_classes)
    maj = int(torch.bincount(y[:n], minlength=n_classes).argmax())
    return p.accuracy(X[n:], y[n:]), float((y[n:] == maj).double().mean())


def _planted_1d(n=4000, d=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    u = torch.randn(d, generator=g)
    u /= u.norm()
    X = torch.randn(n, d, generator=g) + 1.5 * (2 * y - 1).float()[:, None] * u + 3.0
    return X, y


def _planted_2d(n=6000, d=12, seed=0):
    """A binary label along two directions with different noise: the probe's direction
    Σ⁻¹Δμ is not parallel to Δμ, so removing it leaves a decodable component."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    s = (2 * y - 1).float()
    Z = torch.randn(n, d, generator=g)
    Z[:, 0] = s + 1.0 * Z[:, 0]
    Z[:, 1] = s + 0.3 * Z[:, 1]
    R, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    return Z @ R.T, y


def test_project_out_1d_signal_sends_refit_to_chance():
    X, y = _planted_1d()
    before, _ = _split_acc(X, y, 2)
    assert before > 0.9
    e = fit_edit("project_out", X, y, 2)
    assert e.rank_removed == 1
    after, maj = _split_acc(e.apply(X), y, 2)
    assert after <= maj + 0.03


def test_project_out_2d_signal_survives_and_inlp_removes_it():
    X, y = _planted_2d()
    e = fit_edit("project_out", X, y, 2)
    assert e.rank_removed == 1
    after, maj = _split_acc(e.apply(X), y, 2)
    assert after > maj + 0.15  # still decodable after single-direction ablation (theory: ~82 %)
    inlp = fit_edit("inlp", X, y, 2, seed=0)
    assert inlp.info["reached_chance"] and inlp.rank_removed >= 2
    after_inlp, maj = _split_acc(inlp.apply(X), y, 2)
    assert after_inlp <= maj + 0.03


def test_project_out_uses_given_probe_and_is_orthogonal_projection_around_mean():
    X, y = _planted_1d(d=6)
    p = fit_probe(X, y, 2)
    e = fit_edit("project_out", X, y, 2, probe=p)
    A = e.matrix()
    assert torch.allclose(A @ A, A, atol=1e-10) and torch.allclose(A, A.T, atol=1e-10)
    assert torch.allclose(e.apply(X).mean(0).double(), X.mean(0).double(), atol=1e-4)
    d = p.class_directions().double()
    assert torch.allclose((d[1] - d[0]) @ A, torch.zeros(6, dtype=torch.float64), atol=1e-8)
    # the original probe is blind on the edited states: constant logits difference
    lg = p.logits(e.apply(X))
    assert float((lg[:, 1] - lg[:, 0]).std()) < 1e-3


def test_multiclass_project_out_rank_is_c_minus_1():
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, 5, (3000,), generator=g)
    X = torch.randn(3000, 16, generator=g) + 2 * torch.randn(5, 16, generator=g)[y]
    assert fit_edit("project_out", X, y, 5).rank_removed == 4


def test_leace_equals_library_eraser():
    g = torch.Generator().manual_seed(2)
    y = torch.randint(0, 3, (2000,), generator=g)
    X = torch.randn(2000, 10, generator=g) @ torch.randn(10, 10, generator=g) + torch.randn(3, 10, generator=g)[y]
    e = fit_edit("leace", X, y, 3)
    lib = LeaceEraser.fit(X.double(), torch.nn.functional.one_hot(y, 3).double())
    assert torch.allclose(e.apply(X.double()), lib(X.double()), atol=1e-10)
    assert torch.allclose(e.apply(X), lib(X.double()).float(), atol=1e-4)
    assert e.rank_removed == 2
    after, maj = _split_acc(e.apply(X), y, 3)
    assert after <= maj + 0.03


@pytest.mark.parametrize("k", [1, 3, 8])
def test_pca_top_k_removes_exactly_k_dims(k):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(500, 12, generator=g) * torch.linspace(5, 0.5, 12)
    e = fit_edit("pca_top_k", X, torch.zeros(500, dtype=torch.long), 2, k=k)
    change = (X - e.apply(X)).double()
    s = torch.linalg.svdvals(change)
    assert int((s > 1e-4 * s.max()).sum()) == k == e.rank_removed == e.k
    # the removed directions are the top-k principal axes: here the first k coordinates
    assert float((e.left[:k, :] ** 2).sum()) > 0.9 * k


def test_pca_default_k_and_invalid_k():
    X = torch.randn(100, 12)
    y = torch.zeros(100, dtype=torch.long)
    assert fit_edit("pca_top_k", X, y, 2).rank_removed == 8
    for bad in (0, 13, 2.5, -1):
        with pytest.raises(ValueError, match="k"):
            fit_edit("pca_top_k", X, y, 2, k=bad)


def test_mean_gives_constant_output():
    X = torch.randn(300, 7) + 2
    e = fit_edit("mean", X, torch.zeros(300, dtype=torch.long), 2)
    out = e.apply(torch.randn(4, 9, 7))
    assert out.shape == (4, 9, 7) and e.rank_removed == 7
    assert torch.allclose(out, X.mean(0).expand(4, 9, 7), atol=1e-6)


def test_unknown_method_names_it():
    with pytest.raises(ValueError, match="bogus"):
        fit_edit("bogus", torch.randn(10, 3), torch.zeros(10, dtype=torch.long), 2)


@pytest.mark.parametrize("method", METHODS)
def test_apply_preserves_shape_dtype_and_any_leading_dims(method):
    X, y = _planted_1d(n=800, d=10)
    e = fit_edit(method, X, y, 2, k=3)
    h = torch.randn(2, 5, 7, 10, dtype=torch.float64)
    out = e.apply(h)
    assert out.shape == h.shape and out.dtype == torch.float64
    flat = e.apply(h.reshape(-1, 10)).reshape(h.shape)
    assert torch.allclose(out, flat)
    assert e.apply(h.to(torch.bfloat16)).dtype == torch.bfloat16


# -- full-rank removals: the refit probe must not read rounding noise -----------------------------
def _issue_example():
    """D=4, two classes, 100 sequences × 20 tokens, X = N(0,1) + 3·y·(1, −0.5, 0.25, 2)."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (100, 20), generator=g)
    X = torch.randn(100, 20, 4, generator=g) + 3 * y[..., None].float() * torch.tensor([1.0, -0.5, 0.25, 2.0])
    return X, y


def test_full_rank_pca_removal_leaves_refit_at_majority():
    from science.probes import probe_layers

    X, y = _issue_example()
    edit = fit_edit("pca_top_k", X.reshape(-1, 4), y.reshape(-1), 2, k=4)
    Xe = edit.apply(X)
    std = Xe.reshape(-1, 4).std(0)
    assert bool((std > 0).any()) and float(std.max()) < 1e-5  # constant up to float32 rounding
    r = probe_layers({0: Xe}, y, 2, seed=0)[0]
    assert r.accuracy == pytest.approx(r.majority_baseline)  # was 0.787 vs 0.520 before the floor
    assert probe_layers({0: X}, y, 2, seed=0)[0].accuracy > 0.9  # the same probe reads the raw states


def test_inlp_reaches_tolerance_at_full_rank_and_reports_it():
    X, y = _issue_example()
    e = fit_edit("inlp", X.reshape(-1, 4), y.reshape(-1), 2)
    assert e.info["reached_chance"] is True
    assert e.info["n_rounds"] == len(e.info["rounds"]) - 1 >= 1 and e.rank_removed == e.info["n_rounds"]
    assert e.info["max_rounds"] == 4  # the default budget: ⌈D / (C − 1)⌉
    starved = fit_edit("inlp", X.reshape(-1, 4), y.reshape(-1), 2, max_rounds=0)
    assert starved.info["reached_chance"] is False and starved.info["n_rounds"] == 0


def test_inlp_budget_and_fit_sequence_rule():
    from science.interventions import inlp_budget, n_fit_sequences

    assert inlp_budget(185, 2) == 185 and inlp_budget(160, 6) == 32 and inlp_budget(10, 1) == 10
    assert n_fit_sequences(160, 40, 64) == 256  # the quick preset's LEACE fit at d = 160
    assert n_fit_sequences(8, 40, 500) == 500
    with pytest.raises(ValueError, match="d_model"):
        n_fit_sequences(0, 40, 10)


def test_inlp_budget_counts_the_classes_present_not_all_of_them():
    """code_depth's windows hold a few of its 11 depths: a budget of ⌈D / 10⌉ rounds of rank ≤ 2
    stopped INLP at rank ≈ 0.2·D, short of its tolerance; the budget from the present classes does not."""
    g = torch.Generator().manual_seed(0)
    D, N = 40, 4000
    y = torch.randint(0, 3, (N,), generator=g)  # 3 of 11 classes present
    X = torch.randn(N, D, generator=g) + torch.nn.functional.one_hot(y, D).float() * 2.0
    X = X @ torch.linalg.qr(torch.randn(D, D, generator=g))[0]  # spread the signal over every direction
    edit = fit_edit("inlp", X, y, 11)
    assert edit.info["max_rounds"] == -(-D // 2)
    assert edit.info["reached_chance"]


def test_random_removal_of_the_whole_space_is_mean_ablation_exactly():
    """At rank D the control must equal mean ablation bit for bit (a full-rank projection differed
    by float rounding, enough to flip near-tie tokens: 0.10 pp on a smoke Mamba)."""
    from science.interventions import fit_edit, random_removal

    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 12, generator=g)
    y = (X[:, 0] > 0).long()
    mean = fit_edit("mean", X, y, 2)
    h = torch.randn(4, 7, 12, generator=g)
    rand = random_removal(X.mean(0, dtype=torch.float64), 12, torch.Generator().manual_seed(1))
    assert rand.rank_removed == 12 and torch.equal(rand.apply(h), mean.apply(h))
    part = random_removal(X.mean(0, dtype=torch.float64), 11, torch.Generator().manual_seed(1))
    assert part.left is not None and not torch.equal(part.apply(h), mean.apply(h))
