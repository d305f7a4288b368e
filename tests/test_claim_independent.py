"""The independent recomputations of claims 1 and 3 (checks/claim1_independent.py,
checks/claim3_independent.py: numpy/scipy only, written from docs/SCIENCE.md without the claim code)
agree with the shipped study's report (docs/RESULTS-paper-steps.md) and, reading every plateau as
final, with what docs/SCIENCE.md states that reading gave; and they do fail on a report whose digits
differ from the bundle's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "examples" / "paper-steps.layerscope.zip"
RESULTS = ROOT / "docs" / "RESULTS-paper-steps.md"


def _run(claim: int, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no project on the path
    return subprocess.run(
        [sys.executable, str(ROOT / "checks" / f"claim{claim}_independent.py"), str(BUNDLE), *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.parametrize("claim", [1, 3])
@pytest.mark.parametrize("flags", [(), ("--any-revision",)], ids=["report", "science-md"])
def test_the_independent_check_agrees(claim: int, flags: tuple[str, ...]):
    out = _run(claim, *flags)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[-1] == "0 mismatch(es)"
    assert not [ln for ln in lines if ln.startswith("MISMATCH")]
    assert sum(ln.startswith("MATCH") for ln in lines) >= 4
    assert any(ln.startswith(f"claim {claim} verdict: ") for ln in lines)


@pytest.mark.parametrize("claim", [1, 3])
def test_the_independent_check_fails_on_other_digits(claim: int, tmp_path: Path):
    """One trained cell's late concentration changed in the report: the check exits 1 naming it."""
    cell = "mamba × parity: class gradual (seeds: 2 gradual, 1 late)"
    text = RESULTS.read_text()
    assert cell in text
    doctored = tmp_path / "RESULTS.md"
    doctored.write_text(text.replace("late concentration 0.45 [0.09, 0.81]", "late concentration 0.46 [0.09, 0.81]"))
    out = _run(claim, "--report", str(doctored))
    assert out.returncode == 1
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("MISMATCH")] == [
        f"MISMATCH  trained cell: {cell}{' (the claim expects late)' if claim == 1 else ''}, "
        "late concentration 0.45 [0.09, 0.81], n = 3"
    ]
