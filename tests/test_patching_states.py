"""State injection for activation patching (models_store.states): the step-wise runs equal the
models' own forward, a resumed run equals the library's forward on the spliced sequence, and a
hand-built linear recurrence gives the closed-form recovery of each state part."""

import math

import numpy as np
import pytest
import torch

from models_store import ModelConfig, build_model
from models_store.fast_scan import selective_scan_ref, selective_scan_states
from models_store.states import Block, StatefulModel, window_at, window_conv
from science.context import SilentContext
from science.patching import _cells_recurrent

RECURRENT = ["lstm", "gru", "mamba", "mamba2"]


def _model(family, start_token, n_layers=2, seed=0):
    return build_model(
        ModelConfig(family=family, vocab_size=3, n_classes=3, n_layers=n_layers, d_model=32, start_token=start_token),
        seed=seed,
    ).eval()


def test_scan_with_state_matches_the_reference_and_continues_exactly():
    g = torch.Generator().manual_seed(0)
    b, L, D, N = 2, 9, 5, 3
    x, dt = torch.randn(b, L, D, generator=g), torch.rand(b, L, D, generator=g)
    A, B, C = -torch.rand(D, N, generator=g), torch.randn(b, L, N, generator=g), torch.randn(b, L, N, generator=g)
    y, hs = selective_scan_states(x, dt, A, B, C, keep_states=True)
    torch.testing.assert_close(y, selective_scan_ref(x, dt, A, B, C))
    t = 4  # the second half from the state after step t equals the whole run's second half
    y2, h_last = selective_scan_states(x[:, t + 1 :], dt[:, t + 1 :], A, B[:, t + 1 :], C[:, t + 1 :], hs[:, t])
    torch.testing.assert_close(y2, y[:, t + 1 :])
    torch.testing.assert_close(h_last, hs[:, -1])


@pytest.mark.parametrize("start_token", [False, True])
@pytest.mark.parametrize("family", RECURRENT)
def test_trace_equals_the_model_forward(family, start_token):
    model = _model(family, start_token)
    tokens = torch.randint(0, 3, (4, 10), generator=torch.Generator().manual_seed(1))
    sm = StatefulModel.from_model(model)
    trace = sm.trace(tokens)
    with torch.no_grad():
        ref = model(tokens)[:, -1]
    torch.testing.assert_close(trace.last, ref, atol=1e-5, rtol=1e-4)
    assert trace.inputs[0].shape[1] == 10 + model.n_prefix
    t0 = 6  # resuming from the run's own state after step t0-1 changes nothing
    out = sm.resume(trace, 0, t0, trace.inputs[0][:, t0:], sm.state_at(trace, 0, t0 - 1))
    torch.testing.assert_close(out, trace.last, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("start_token", [False, True])
@pytest.mark.parametrize("family", RECURRENT)
def test_injected_state_equals_the_library_run_on_the_spliced_sequence(family, start_token):
    """One layer: the corrupted run with the clean state injected after real position t is the
    model's own forward (transformers' / torch's path, not ours) on clean[:t+1] + corrupted[t+1:]."""
    model = _model(family, start_token, n_layers=1)
    g = torch.Generator().manual_seed(2)
    clean, corr = torch.randint(0, 3, (5, 11), generator=g), torch.randint(0, 3, (5, 11), generator=g)
    sm = StatefulModel.from_model(model)
    tc, tx = sm.trace(clean), sm.trace(corr)
    P = model.n_prefix
    for t in (0, 3, 8):
        got = sm.with_state(tc, tx, 0, t + P)
        with torch.no_grad():
            ref = model(torch.cat([clean[:, : t + 1], corr[:, t + 1 :]], dim=1))[:, -1]
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


# ---- a hand-built linear recurrence on the SSM path (Conv1D window + selective scan) ----------
K, DECAY = 4, 0.8
TAPS = torch.tensor([0.5, -1.0, 2.0, 1.5], dtype=torch.float64)  # weight[j]: tap j reads t-(K-1-j)


class LinearSSM(Block):
    """u = causal conv(x) (no activation), h_t = DECAY·h_{t-1} + u_t, y_t = h_t; one channel."""

    parts = ("ssm", "conv")

    def run(self, x, state0, keep):
        u = window_conv(x, None if state0 is None else state0["conv"], TAPS.view(1, 1, K), None)
        b, T, _ = x.shape
        dt, A = torch.ones(b, T, 1, dtype=x.dtype), torch.full((1, 1), math.log(DECAY), dtype=x.dtype)
        ones = torch.ones(b, T, 1, dtype=x.dtype)
        y, hs = selective_scan_states(u, dt, A, ones, ones, None if state0 is None else state0["ssm"], keep)
        return y, ({"ssm": hs, "conv": x} if keep else None)

    def state_at(self, states, t):
        return {"ssm": states["ssm"][:, t], "conv": window_at(states["conv"], t, K)}


def _linear_model():
    embed = lambda tokens: tokens.to(torch.float64)[..., None]  # noqa: E731  token id = input value
    head = lambda h: torch.cat([h, torch.zeros_like(h)], dim=-1)  # noqa: E731  LD = y at the last step
    return StatefulModel([LinearSSM()], embed, head, n_prefix=0, parts=("ssm", "conv"))


def _closed_form(site, t, p, L):
    """Recovery of patching ``site`` after step t when x differs only at p: the change reaches
    y_{L-1} through u_{p+m} (tap weight TAPS[K-1-m]) times DECAY^(L-1-p-m)."""
    if t < p:
        return 0.0
    terms = {m: TAPS[K - 1 - m].item() * DECAY ** (L - 1 - p - m) for m in range(K) if p + m <= L - 1}
    later = sum(v for m, v in terms.items() if p + m > t)  # what the conv window still carries
    total = sum(terms.values())
    return {"state": 1.0, "state:ssm": 1 - later / total, "state:conv": later / total}[site]


def test_linear_recurrence_recovery_matches_the_closed_form():
    L, p = 12, 3
    clean = torch.zeros(2, L, dtype=torch.long)
    corr = clean.clone()
    corr[:, p] = torch.tensor([2, 5])  # two pairs, different sizes of the change: same recovery
    labels = (torch.zeros(2, dtype=torch.long), torch.ones(2, dtype=torch.long))
    cells = [(site, 0, t) for site in ("state", "state:ssm", "state:conv") for t in range(L - 1)]
    ld_clean, ld_corr, out = _cells_recurrent(_linear_model(), clean, corr, labels, cells, SilentContext())
    assert np.all(ld_clean - ld_corr != 0)
    for site, _, t in cells:
        rec = (out[(site, 0, t)] - ld_corr) / (ld_clean - ld_corr)
        np.testing.assert_allclose(rec, _closed_form(site, t, p, L), atol=1e-12, err_msg=f"{site} t={t}")
    # inside the conv window neither part alone recovers the whole (nor nothing); they add to 1
    ssm, conv = _closed_form("state:ssm", p + 1, p, L), _closed_form("state:conv", p + 1, p, L)
    assert abs(ssm - 1) > 0.05 and abs(conv) > 0.05 and ssm + conv == pytest.approx(1.0)
