"""Probes against independent references: planted signals, pure noise and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from science.probes import fit_probe, probe_layers, sklearn_probe, split_sequences


def _mixture(n: int, d: int, c: int, sep: float, seed: int, cond: float = 30.0):
    """Gaussian classes with an ill-conditioned random mixing: X [n, d], y [n]."""
    g = torch.Generator().manual_seed(seed)
    gm = torch.Generator().manual_seed(1234)  # one set of means and mixing for train and test
    means = torch.randn(c, d, generator=gm) * sep
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(n, d, generator=g) + means[y]
    U, _ = torch.linalg.qr(torch.randn(d, d, generator=gm))
    A = U * torch.logspace(0, -float(np.log10(cond)), d)
    return z @ A.T + 2.0, y


def test_recovers_planted_linear_signal():
    X, y = _mixture(3000, 16, 4, sep=1.5, seed=0)
    Xt, yt = _mixture(1000, 16, 4, sep=1.5, seed=1)
    p = fit_probe(X, y, 4)
    assert p.converged and p.n_iter > 0
    assert p.accuracy(Xt, yt) > 0.95


def test_pure_noise_stays_at_majority_baseline():
    g = torch.Generator().manual_seed(0)
    n, L, D = 300, 20, 16
    states = {-1: torch.randn(n, L, D, generator=g), 0: torch.randn(n, L, D, generator=g)}
    labels = (torch.rand(n, L, generator=g) < 0.3).long()  # 70 % class 0
    reps = probe_layers(states, labels, 2, seed=0)
    for r in reps.values():
        assert r.converged
        assert abs(r.accuracy - r.majority_baseline) < 0.03  # within 3 pp of chance
        assert 0.66 < r.majority_baseline < 0.74


@pytest.mark.parametrize("c", [2, 5])
def test_agrees_with_sklearn_on_moderately_hard_problem(c):
    X, y = _mixture(4000, 24, c, sep=0.35, seed=2)
    Xt, yt = _mixture(2000, 24, c, sep=0.35, seed=3)
    ours = fit_probe(X, y, c)
    ref = sklearn_probe(X.double(), y, Xt.double(), yt, max_iter=10_000)
    assert ours.converged and ref["converged"]
    acc = ours.accuracy(Xt, yt)
    assert 0.5 / c + 0.1 < acc < 0.97  # genuinely hard: neither chance nor separable
    assert abs(acc - ref["accuracy"]) <= 0.005  # ≤ 0.5 pp
    pred_ref = ref["model"].predict(ref["scaler"].transform(Xt.double().numpy()))
    assert (ours.predict(Xt).numpy() == pred_ref).mean() >= 0.99


@pytest.mark.parametrize("c", [2, 4])
def test_same_objective_as_sklearn_tight_tolerance(c):
    """At a tight tolerance both solvers reach the same unique minimiser (C=1 scaling, binomial for c=2)."""
    X, y = _mixture(1500, 8, c, sep=0.5, seed=4, cond=5.0)
    ours = fit_probe(X.double(), y, c, tol=1e-9, max_iter=2000)
    ref = sklearn_probe(X.double(), y, C=1.0, tol=1e-10, max_iter=100_000)["model"]
    assert ours.converged
    W = ours.W.double()
    coef = torch.tensor(ref.coef_)
    if c == 2:
        assert torch.allclose(W[1] - W[0], coef[0], atol=1e-5)
        assert torch.allclose(W[1], -W[0], atol=1e-6)
    else:
        assert torch.allclose(W, coef, atol=1e-5)


def test_reports_unconverged_when_max_iter_is_tiny():
    X, y = _mixture(2000, 16, 3, sep=0.4, seed=5)
    p = fit_probe(X, y, 3, max_iter=2)
    assert p.converged is False
    assert p.n_iter == 2
    assert p.grad_max > p.tol
    states = {0: X.reshape(100, 20, 16)}
    rep = probe_layers(states, y.reshape(100, 20), 3, max_iter=1)[0]
    assert rep.converged is False and rep.n_iter == 1


def test_class_directions_map_back_to_raw_space():
    X, y = _mixture(1000, 6, 3, sep=1.0, seed=6)
    X = X * torch.tensor([1.0, 10.0, 0.1, 3.0, 1.0, 0.5]) + 5.0
    p = fit_probe(X, y, 3)
    raw = X @ p.class_directions().T + p.raw_intercept()
    assert torch.allclose(raw, p.logits(X), atol=1e-3)


def test_absent_class_never_predicted_and_single_class():
    X, y = _mixture(600, 4, 2, sep=1.0, seed=7)
    p = fit_probe(X, y, 3)  # class 2 never seen
    assert not bool(p.classes_present[2])
    assert int((p.predict(X) == 2).sum()) == 0
    q = fit_probe(X, torch.zeros_like(y), 3)
    assert q.converged and bool((q.predict(X) == 0).all())


def test_probe_layers_splits_by_sequence_and_reports_per_position():
    g = torch.Generator().manual_seed(0)
    n, L, D = 50, 7, 5
    labels = torch.randint(0, 3, (n, L), generator=g)
    signal = torch.nn.functional.one_hot(labels, 3).float() * 4
    states = {-1: torch.randn(n, L, D, generator=g), 3: torch.cat([signal, torch.randn(n, L, 2, generator=g)], -1)}
    reps = probe_layers(states, labels, 3, seed=1)
    assert set(reps) == {-1, 3}
    r = reps[3]
    assert (r.n_train, r.n_test) == (40, 10)
    assert len(r.per_position) == L and all(0.0 <= a <= 1.0 for a in r.per_position)
    assert r.accuracy > 0.99 and reps[-1].accuracy < 0.6
    tr, te = split_sequences(n, 0.2, 1)
    assert set(tr.tolist()).isdisjoint(te.tolist()) and len(tr) + len(te) == n
    assert torch.equal(split_sequences(n, 0.2, 1)[1], te)  # seeded
    row = r.to_row()
    assert row["n_test"] == 10 and "probe" not in row


def test_ignored_labels_are_skipped():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (40, 5), generator=g)
    labels[:, 0] = -100
    states = {0: torch.nn.functional.one_hot(labels.clamp_min(0), 2).float() + 0.1 * torch.randn(40, 5, 2, generator=g)}
    r = probe_layers(states, labels, 2)[0]
    assert r.per_position[0] is None and r.accuracy > 0.95


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="labels"):
        fit_probe(torch.randn(10, 3), torch.full((10,), 5), 3)
    with pytest.raises(ValueError, match="rows"):
        fit_probe(torch.randn(10, 3), torch.zeros(9, dtype=torch.long), 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runs_on_cuda():
    X, y = _mixture(2000, 16, 3, sep=1.0, seed=8)
    p = fit_probe(X.cuda(), y.cuda(), 3)
    assert p.W.is_cuda and p.converged
    ref = fit_probe(X, y, 3)
    assert abs(p.accuracy(X.cuda(), y.cuda()) - ref.accuracy(X, y)) < 0.005


def test_constant_states_after_mean_ablation_give_majority():
    g = torch.Generator().manual_seed(9)
    labels = (torch.rand(60, 10, generator=g) < 0.3).long()
    r = probe_layers({2: torch.full((60, 10, 8), 3.0)}, labels, 2)[2]
    assert r.converged and r.accuracy == pytest.approx(r.majority_baseline)


# -- stratified split, balanced accuracy, selectivity ----------------------------------------------
def test_split_is_stratified_by_label_mix():
    from science.probes import sequence_strata

    g = torch.Generator().manual_seed(3)
    n, L = 100, 10
    labels = torch.zeros(n, L, dtype=torch.long)
    labels[:20] = 1  # 20 all-ones sequences among 80 all-zeros
    labels[20:] = (torch.rand(80, L, generator=g) < 0.0).long()
    strata = sequence_strata(labels, 2)
    for seed in range(5):
        tr, te = split_sequences(n, 0.2, seed, strata=strata)
        assert int((te < 20).sum()) == 4  # exactly 20 % of the all-ones sequences in the test set
        assert len(te) == 20 and set(tr.tolist()).isdisjoint(te.tolist())
    with pytest.raises(ValueError, match="strata"):
        split_sequences(n, 0.2, 0, strata=strata[:5])


def test_balanced_accuracy_and_selectivity():
    from science.probes import CONTROL_BUCKET, control_labels

    g = torch.Generator().manual_seed(4)
    n, L = 80, 12
    tokens = torch.randint(0, 20, (n, L), generator=g)
    labels = (tokens.cumsum(1) % 2).long()  # a prefix-parity-like label: not a function of the token
    state = torch.nn.functional.one_hot(labels, 2).float() * 3 + torch.randn(n, L, 4, generator=g)[..., :2]
    reps = probe_layers({0: state}, labels, 2, seed=0, tokens=tokens)
    assert reps[0].accuracy > 0.95 and reps[0].selectivity > 0.3
    assert 0.0 <= reps[0].balanced_accuracy <= 1.0
    assert probe_layers({0: state}, labels, 2)[0].selectivity is None  # no tokens, no control task
    ctrl = control_labels(tokens, labels, 2, seed=0)
    bucket = torch.arange(L).expand(n, L) // CONTROL_BUCKET
    for v in range(20):  # one fixed label per (token type, position bucket)
        for b in range(int(bucket.max()) + 1):
            assert ctrl[(tokens == v) & (bucket == b)].unique().numel() <= 1
    hl = control_labels(tokens, labels, 2, seed=0, bucket=None)  # Hewitt & Liang: one label per type
    for v in range(20):
        assert hl[tokens == v].unique().numel() == 1


def test_control_task_is_not_read_off_the_token_alone():
    """The degenerate case the position bucket removes: a state that is the token alone reads the
    per-type control task perfectly, the per-(type, bucket) one only where the bucket is readable."""
    from science.probes import control_labels

    g = torch.Generator().manual_seed(7)
    n, L = 200, 40
    tokens = torch.randint(0, 2, (n, L), generator=g)  # parity's two token types
    labels = (tokens.cumsum(1) % 2).long()
    token_only = torch.nn.functional.one_hot(tokens, 2).float() + 0.01 * torch.randn(n, L, 2, generator=g)
    bucket = torch.nn.functional.one_hot(torch.arange(L) // 5, 8).float().expand(n, L, 8)
    both = (token_only[..., :, None] * bucket[..., None, :]).reshape(n, L, 16)  # token ⊗ bucket
    per_type = control_labels(tokens, labels, 2, seed=0, bucket=None)
    per_bucket = control_labels(tokens, labels, 2, seed=0)
    acc = {}
    for name, ctrl in (("type", per_type), ("bucket", per_bucket)):
        for lname, H in (("token", token_only), ("both", both)):
            acc[name, lname] = probe_layers({0: H}, ctrl, 2, seed=0)[0].accuracy
    assert acc["type", "token"] > 0.99  # the old control: read off the token at any layer
    assert acc["bucket", "both"] > 0.99  # the new one needs type and position together
    assert acc["bucket", "token"] < acc["bucket", "both"] - 0.1


def test_token_type_accuracy_per_type():
    from science.tasks import get_task

    task = get_task("dyck")
    data = task.generate(40, 120, 0, split="test")
    types = task.token_types(data.tokens)
    assert set(types.unique().tolist()) == {0, 1} and task.token_type_names == ("open", "close")
    # a state that is the label on close brackets only: perfect there, chance-ish on opens
    g = torch.Generator().manual_seed(1)
    onehot = torch.nn.functional.one_hot(data.labels, task.n_classes).float()
    H = torch.where((types == 1)[..., None], onehot * 4, torch.zeros_like(onehot)) + 0.1 * torch.randn(
        onehot.shape, generator=g
    )
    r = probe_layers({0: H}, data.labels, task.n_classes, seed=0, token_types=types, type_names=task.token_type_names)[
        0
    ]
    assert r.type_accuracy["close"] > 0.98 and r.type_accuracy["open"] < r.type_accuracy["close"] - 0.2
    assert get_task("parity").token_types(data.tokens) is None


def test_balanced_accuracy_exposes_a_majority_predictor():
    g = torch.Generator().manual_seed(5)
    labels = (torch.rand(100, 10, generator=g) < 0.1).long()  # 90 % class 0
    r = probe_layers({0: torch.randn(100, 10, 3, generator=g)}, labels, 2, seed=0)[0]
    assert r.accuracy > 0.8 and r.balanced_accuracy == pytest.approx(0.5, abs=0.05)


def test_probe_layers_says_what_is_wrong_with_its_inputs():
    # a notebook's mistakes get one ValueError naming the input, not a library's error later
    g = torch.Generator().manual_seed(0)
    H = torch.randn(40, 6, 8, generator=g)
    y = torch.randint(0, 3, (40, 6), generator=g)
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.2 .* got 3"):
        probe_layers({0: H}, y + 1, 3)
    with pytest.raises(ValueError, match="labels must be integer class ids"):
        probe_layers({0: H}, y.float(), 3)
    with pytest.raises(ValueError, match=r"states must be floating-point \[n, L, D\]"):
        probe_layers({0: H[:, :, 0]}, y, 3)
    with pytest.raises(ValueError, match="n_classes must be a whole number"):
        probe_layers({0: H}, y, 0)
    with pytest.raises(ValueError, match="non-empty dict"):
        probe_layers({}, y, 3)
    # numpy arrays are taken, and give the tensors' result
    from_numpy = probe_layers({0: H.numpy()}, y.numpy(), 3, keep_probes=False)[0]
    assert from_numpy.to_row() == probe_layers({0: H}, y, 3, keep_probes=False)[0].to_row()
