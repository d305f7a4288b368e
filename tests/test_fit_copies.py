"""Each built-in method's declared ``fit_copies`` (what the memory bound counts for an in-memory
fit, in multiples of one layer's states) covers the peak its fit really reaches, measured in a
fresh process (VmHWM), as the caller hands it the labelled rows."""

from __future__ import annotations

import pytest

from science.methods import fit_copies
from tests.peak_memory import HWM, peak_growth

_FIT = (
    HWM
    + """
import json, sys, torch
torch.set_num_threads(1)
from science.interventions import fit_edit
method = sys.argv[1]
torch.manual_seed(0)
N, D = 40_000, 384
fit_edit(method, torch.randn(400, D), torch.randint(0, 3, (400,)), 3, max_rounds=1)  # warm: libraries loaded
states = torch.randn(N // 40, 40, D)  # one layer's states, [n, L, D]
labels = torch.randint(0, 3, (N // 40, 40))
before = hwm()
x, y = states.reshape(-1, D), labels.reshape(-1)
fit_edit(method, x[y >= 0], y[y >= 0], 3, max_rounds=1)  # the labelled rows copied out, as the measurement does
print(json.dumps({"before": before - states.numel() * 4, "peak": hwm()}))
"""
)


@pytest.mark.parametrize("method", ["mean", "pca_top_k", "project_out", "leace", "inlp"])
def test_a_fit_stays_within_its_declared_copies(method: str) -> None:
    states = 40_000 * 384 * 4
    grown = peak_growth(_FIT.replace("sys.argv[1]", repr(method)), 0)  # the states and every copy
    assert grown <= fit_copies([method]) * states, (method, grown / states)
    assert grown >= states  # the measurement sees the states themselves
