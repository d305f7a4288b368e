"""Activation patching against its defining properties."""

import numpy as np
import pytest
import torch

from models_store import ModelConfig, build_model
from science.context import SilentContext
from science.patching import (
    MIN_PAIRS,
    cell_logit_differences,
    fixed_position_pairs,
    grid_positions,
    patch_recovery,
    patching_grid,
    recovery_ci,
    usable_pairs,
)
from science.tasks import get_task


@pytest.fixture(scope="module", params=["lstm", "transformer", "mamba"])
def model_and_pairs(request):
    task = get_task("s3")
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(family=request.param, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=32)
    ).eval()
    clean, corrupted, _ = task.corruption_pairs(12, 24, seed=1)
    return model, clean, corrupted


@pytest.mark.parametrize("layer", [-1, 0, 1])
def test_patching_every_position_recovers_everything(model_and_pairs, layer):
    model, clean, corrupted = model_and_pairs
    rec = patch_recovery(
        model,
        clean.tokens,
        corrupted.tokens,
        clean.labels[:, -1],
        corrupted.labels[:, -1],
        layer=layer,
        positions=slice(None),
    )
    assert rec == pytest.approx(1.0, abs=1e-4)


def test_patching_nothing_recovers_nothing(model_and_pairs):
    model, clean, corrupted = model_and_pairs
    rec = patch_recovery(
        model, clean.tokens, corrupted.tokens, clean.labels[:, -1], corrupted.labels[:, -1], layer=0, positions=[]
    )
    assert rec == pytest.approx(0.0, abs=1e-6)


def test_grid_rows_cover_every_layer_and_position(model_and_pairs):
    # Changed with the patching sites: the grid has sites; resid_post keeps the old layers (emb included).
    model, _, _ = model_and_pairs
    rows = patching_grid(
        model, get_task("s3"), run_seed=0, eval_length=12, positions=[3, 6], n_pairs=24, sites=["resid_post"]
    )
    assert {(r["layer"], r["position"]) for r in rows} == {(layer, p) for layer in (-1, 0, 1) for p in (3, 6)}
    # The embedding at a position after the corrupted token is identical in both runs: nothing to recover.
    emb = [r for r in rows if r["layer"] == -1]
    assert all(r["corrupt_position"] < 3 for r in emb)
    # (untrained models: pairs may all be dropped as tiny-gap; then recovery is None with a note)
    assert all((r["recovery"] is None and r["note"]) or abs(r["recovery"]) < 1e-5 for r in emb)


def test_grid_rejects_positions_outside_the_sequence(model_and_pairs):
    model, _, _ = model_and_pairs
    with pytest.raises(ValueError, match="outside"):
        patching_grid(model, get_task("s3"), run_seed=0, eval_length=12, positions=[12], n_pairs=4)


def test_grid_rejects_unknown_sites(model_and_pairs):
    model, _, _ = model_and_pairs
    with pytest.raises(ValueError, match="unknown patching sites"):
        patching_grid(model, get_task("s3"), run_seed=0, eval_length=12, n_pairs=8, sites=["attn"])


def test_default_positions_are_every_position_and_stride_keeps_the_last():
    assert grid_positions(40, None) == list(range(40))
    assert grid_positions(40, None, stride=8) == [0, 8, 16, 24, 32, 39]
    with pytest.raises(ValueError, match="stride"):
        grid_positions(40, None, stride=0)


def test_pairs_share_one_corruption_position():
    task = get_task("s3")
    clean, corrupted, p = fixed_position_pairs(task, 16, 40, run_seed=3)
    differ = clean.tokens != corrupted.tokens
    assert differ.shape == (40, 16)
    assert differ[:, p].all() and int(differ.sum()) == 40
    assert (clean.labels[:, -1] != corrupted.labels[:, -1]).all()


def _pairs(vocab, L, p, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, vocab, (n, L), generator=g)
    corr = clean.clone()
    corr[:, p] = (clean[:, p] + 1) % vocab
    return clean, corr, (torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long))


@pytest.mark.parametrize("start_token", [False, True])
@pytest.mark.parametrize("family", ["mamba", "mamba2", "lstm", "gru"])
def test_suffix_reruns_equal_full_hooked_forwards(family, start_token):
    """The recurrent engine re-runs only blocks ℓ.. on positions t.. from stored states; it must
    give what a full forward with a residual-stream hook gives (the transformer's path)."""
    from science.patching import _cells_hooks

    model = build_model(
        ModelConfig(family=family, vocab_size=3, n_classes=3, n_layers=2, d_model=32, start_token=start_token), seed=1
    ).eval()
    L, p = 9, 2
    clean, corr, labels = _pairs(3, L, p)
    cells = [("input", j, t) for j in range(3) for t in range(L)]
    ld_c, ld_x, fast = cell_logit_differences(model, clean, corr, labels, cells)
    ref_c, ref_x, ref = _cells_hooks(model, clean, corr, labels, cells, SilentContext(), reference=True)
    np.testing.assert_allclose(ld_c, ref_c, atol=1e-4)
    np.testing.assert_allclose(ld_x, ref_x, atol=1e-4)
    for cell in cells:
        np.testing.assert_allclose(fast[cell], ref[cell], atol=1e-4, err_msg=str(cell))


def _gpt_neox(tmp_path):
    from transformers import GPTNeoXConfig

    from models_store.pretrained import load_pretrained

    cfg = GPTNeoXConfig(vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
    cfg.save_pretrained(tmp_path)
    return load_pretrained(str(tmp_path), n_classes=3, task_vocab_size=3, weights=False, seed=0).eval()


@pytest.mark.parametrize("model_kind", ["transformer", "transformer+start", "gpt_neox"])
def test_patched_forwards_from_the_patched_layer_equal_full_forwards_bit_for_bit(model_kind, tmp_path):
    """The transformer's patched forward starts at the patched block from the corrupted run's
    recorded output of the layer before: every logit difference is the full hooked forward's,
    bit for bit, for every block, position and group size (a ragged last group included)."""
    from science.patching import _cells_hooks

    if model_kind == "gpt_neox":
        model = _gpt_neox(tmp_path)
    else:
        cfg = ModelConfig(
            family="transformer", vocab_size=3, n_classes=3, n_layers=3, d_model=32, start_token="start" in model_kind
        )
        model = build_model(cfg, seed=1).eval()
    L, p = 11, 2
    clean, corr, labels = _pairs(3, L, p)
    cells = [("input", j, t) for j in range(model.n_layers + 1) for t in range(L)]
    fast = _cells_hooks(model, clean, corr, labels, cells, SilentContext(), group=4)
    ref = _cells_hooks(model, clean, corr, labels, cells, SilentContext(), group=4, reference=True)
    assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1])
    for cell in cells:
        assert np.array_equal(fast[2][cell], ref[2][cell]), cell
    moved = [c for c in cells if c[2] >= p and not np.array_equal(fast[2][c], fast[1])]
    assert moved  # the patches change the corrupted run's logits: the comparison is not of constants


def test_a_forward_stopped_at_a_layer_records_the_output_the_full_pass_makes():
    from models_store.capture import module_outputs, output_through

    model = build_model(ModelConfig(family="transformer", vocab_size=3, n_classes=3, n_layers=3, d_model=32), seed=2)
    tokens = torch.randint(0, 3, (4, 9), generator=torch.Generator().manual_seed(0))
    _, full = module_outputs(model.eval(), tokens)
    for layer in (-1, 1):
        (got,) = output_through(model, tokens, layer).items()
        assert got[0] == layer and torch.equal(got[1], full[layer])
    with pytest.raises(ValueError):
        output_through(model, tokens, 3)


@pytest.mark.parametrize("start_token", [False, True])
@pytest.mark.parametrize("family", ["transformer", "mamba", "mamba2", "lstm", "gru"])
def test_exact_zeros_of_the_sites(family, start_token):
    """resid_post of the last layer at t < L-1 reaches only the output at t: LD_patched equals
    LD_corrupted exactly; so does a state injected before the corruption or after the last step."""
    model = build_model(
        ModelConfig(family=family, vocab_size=3, n_classes=3, n_layers=2, d_model=32, start_token=start_token), seed=1
    ).eval()
    L, p = 9, 3
    clean, corr, labels = _pairs(3, L, p)
    cells = [("input", 2, t) for t in range(L)]
    if family != "transformer":
        cells += [("state", ly, t) for ly in (0, 1) for t in [*range(p), L - 1]]
    _, ld_x, out = cell_logit_differences(model, clean, corr, labels, cells)
    for cell in cells:
        if cell != ("input", 2, L - 1):
            assert np.array_equal(out[cell], ld_x), cell
    assert not np.allclose(out[("input", 2, L - 1)], ld_x)


def test_the_transformer_has_no_state_site():
    task = get_task("s3")
    model = build_model(
        ModelConfig(family="transformer", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=1, d_model=32),
        seed=0,
    ).eval()
    clean, corr, labels = _pairs(task.vocab_size, 6, 1)
    with pytest.raises(ValueError, match="no recurrent state"):
        cell_logit_differences(model, clean, corr, labels, [("state", 0, 2)])
    logged = []

    class Ctx(SilentContext):
        def log(self, line):
            logged.append(line)

    rows = patching_grid(model, task, run_seed=0, eval_length=6, n_pairs=8, ctx=Ctx())
    assert {r["site"] for r in rows} == {"resid_pre", "resid_post"}
    assert any("state" in line and "skipped" in line for line in logged)


def _train_parity_lstm(L: int) -> torch.nn.Module:
    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=2, n_classes=2, n_layers=1, d_model=16, start_token=True), seed=0
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    held = task.generate(L, 256, seed=999)
    for step in range(600):
        data = task.generate(L, 64, seed=step)
        loss = torch.nn.functional.cross_entropy(model(data.tokens).flatten(0, 1), data.labels.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 24:
            with torch.no_grad():
                if (model(held.tokens).argmax(-1) == held.labels).float().mean() >= 0.995:
                    break
    with torch.no_grad():
        assert (model(held.tokens).argmax(-1) == held.labels).float().mean() >= 0.99, "LSTM did not learn parity"
    return model.eval()


@pytest.fixture(scope="module")
def parity_grid():
    L = 16
    model = _train_parity_lstm(L)
    return L, patching_grid(model, get_task("parity"), run_seed=2, eval_length=L, n_pairs=48)


def test_trained_lstm_parity_state_band_after_the_corruption(parity_grid):
    """Known answer: the LSTM's state carries the prefix parity (one layer: the layer whose probe
    reads parity), so injecting the clean state after any step t ≥ p* restores the clean answer
    (≥ 0.95), and before p* it changes nothing."""
    L, rows = parity_grid
    rows = [r for r in rows if r["site"] == "state"]
    p = rows[0]["corrupt_position"]
    assert p == 3  # the rule's choice for this seed (so "before the corruption" is not empty)
    rec = {r["position"]: r["recovery"] for r in rows if r["layer"] == 0}
    assert all(rec[t] >= 0.95 for t in range(p, L - 1)), rec
    assert all(abs(rec[t]) < 1e-6 for t in range(p)), rec
    assert all(r["n_dropped"] == 0 for r in rows)


def test_tiny_gap_pairs_are_dropped_and_counted():
    ld_clean = np.array([5.0, 4.0, 6.0, 5.0, 0.2, 5.5])
    ld_corr = np.array([-5.0, -4.0, -6.0, -5.0, 0.19, 4.9])
    keep, thr = usable_pairs(ld_clean, ld_corr)
    assert thr == pytest.approx(0.1 * 5.0)
    assert keep.tolist() == [True, True, True, True, False, True]


def test_recovery_ci_brackets_the_point():
    rng = np.random.default_rng(0)
    ld_clean, ld_corr = 4 + rng.normal(size=64), -4 + rng.normal(size=64)
    ld_p = ld_corr + 0.5 * (ld_clean - ld_corr) + 0.1 * rng.normal(size=64)
    rec, lo, hi = recovery_ci(ld_p, ld_clean, ld_corr, seed=0)
    assert lo < rec < hi and rec == pytest.approx(0.5, abs=0.05)


def test_recovery_is_none_with_a_reason_when_corruption_changes_nothing():
    """A model whose output ignores the input (an untrained-like constant head) gives equal
    clean and corrupted logit differences: every row stores None and says why."""
    task = get_task("s3")
    model = build_model(
        ModelConfig(family="gru", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=1, d_model=8), seed=0
    ).eval()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.copy_(torch.arange(task.n_classes, dtype=torch.float32))
    rows = patching_grid(model, task, run_seed=0, eval_length=8, n_pairs=16, ctx=SilentContext())
    assert rows and all(r["recovery"] is None and r["recovery_lo"] is None for r in rows)
    assert all(r["n_pairs"] < MIN_PAIRS and r["n_dropped"] == 16 and "need" in r["note"] for r in rows)


def test_trained_lstm_parity_residual_sites(parity_grid):
    """resid_post of the last layer: exactly 0 at t < L-1, full recovery at L-1; resid_pre ℓ is
    resid_post ℓ-1; the corrupted token itself patched at block 0's input: full recovery."""
    L, rows = parity_grid
    cell = {(r["site"], r["layer"], r["position"]): r["recovery"] for r in rows}
    p = rows[0]["corrupt_position"]
    assert all(cell[("resid_post", 0, t)] == 0.0 for t in range(L - 1))
    assert cell[("resid_post", 0, L - 1)] == pytest.approx(1.0, abs=1e-6)
    assert all(cell[("resid_pre", 0, t)] == cell[("resid_post", -1, t)] for t in range(L))
    assert cell[("resid_pre", 0, p)] == pytest.approx(1.0, abs=1e-4)
    assert all(cell[("resid_pre", 0, t)] == 0.0 for t in range(L) if t != p)
