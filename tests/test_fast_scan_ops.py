"""The kernel ops' typed signatures: a call with a wrong argument raises a RuntimeError naming it
(it used to be an untyped ctypes call that could crash the process), and the ops agree with the
reference scan (tests/test_fast_scan.py covers the maths in full)."""

from __future__ import annotations

import pytest
import torch

from models_store import fast_scan, fast_scan_cpu
from tests.compiled_kernels import require_cpu_kernel


@pytest.fixture(autouse=True)
def compiled_kernel() -> None:
    """Every test here needs the kernel: skipped or failed as tests/compiled_kernels.py says."""
    require_cpu_kernel()


F64 = torch.float64


def _ins(b: int = 2, L: int = 6, D: int = 8, N: int = 4) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(b, L, D, dtype=F64, generator=g),
        torch.rand(b, L, D, dtype=F64, generator=g) + 0.01,
        -(torch.rand(D, N, dtype=F64, generator=g) + 0.1),
        torch.randn(b, L, N, dtype=F64, generator=g),
        torch.randn(b, L, N, dtype=F64, generator=g),
    )


def test_ops_match_the_reference_scan() -> None:
    x, dt, A, B, C = _ins()
    y = fast_scan_cpu.load().scan_fwd(x, dt, A, B, C, None, None, False)
    torch.testing.assert_close(y, fast_scan.selective_scan_ref(x, dt, A, B, C), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("swap", "message"),
    [
        (lambda x, dt, A, B, C: (x, A, dt, B, C), "dt must have shape"),  # arguments out of order
        (lambda x, dt, A, B, C: (x, dt, A, B, C[..., :3]), "C must be"),  # N differs
        (lambda x, dt, A, B, C: (x.float(), dt, A, B, C), "dt must be Float like x"),  # mixed dtypes
        (lambda x, dt, A, B, C: (x.transpose(1, 2).contiguous().transpose(1, 2), dt, A, B, C), "x must have rows"),
        (lambda x, dt, A, B, C: (x.to(torch.int64), dt, A, B, C), "float32 or float64"),
    ],
)
def test_a_wrong_call_raises_naming_the_argument(swap, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        fast_scan_cpu.load().scan_fwd(*swap(*_ins()), None, None, False)


def test_the_schema_rejects_a_missing_or_mistyped_argument() -> None:
    x, dt, A, B, C = _ins()
    with pytest.raises(RuntimeError, match="Optional\\[Tensor\\]"):
        fast_scan_cpu.load().scan_fwd(x, dt, A, B, C, None, False)  # z left out: the bool lands in its place
    schema = str(fast_scan_cpu.load().scan_bwd.default._schema)
    assert "Tensor(a!) gx" in schema and "Tensor(b!) gBC" in schema and "Tensor(c!)? gz" in schema


def test_backward_outputs_are_checked_before_writing() -> None:
    x, dt, A, B, C = _ins()
    gout = torch.ones_like(x)
    with pytest.raises(RuntimeError, match="gBC must be"):
        fast_scan_cpu.load().scan_bwd(
            x, dt, A, B, C, gout, None, None, torch.empty_like(x), torch.empty(2, 6, 5, dtype=F64), None, False
        )
    with pytest.raises(RuntimeError, match="gz must be given exactly when z is"):
        fast_scan_cpu.load().scan_bwd(
            x, dt, A, B, C, gout, None, x, torch.empty_like(x), torch.empty(2, 6, 8, dtype=F64), None, False
        )
