"""The independent references of claims 1 and 3 (checks/claim1_reference.py, checks/claim3_reference.py,
numpy/scipy only, written from docs/SCIENCE.md) equal the report of the shipped study
(docs/RESULTS-paper-steps.md, `layerscope report examples/paper-steps.layerscope.zip`) line by line:
the verdict, every cell short of seeds, the "cannot be supported" note, every trained cell's class,
per-seed split and late concentration, and (when decided) each family's profile distances."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "examples" / "paper-steps.layerscope.zip"
RESULTS = ROOT / "docs" / "RESULTS-paper-steps.md"


def _reference(name: str, *flags: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no project on the path
    out = subprocess.run(
        [sys.executable, str(ROOT / "checks" / name), str(BUNDLE), *flags],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    )
    return out.stdout.splitlines()


def _section(claim: int) -> str:
    text = RESULTS.read_text()
    start = text.index(f"## Claim {claim}:")
    end = text.find("## Claim", start + 10)
    return text[start : end if end > 0 else None]


def _described(section: str) -> int:
    """How many cells the report's "What the trained cells show" paragraph describes."""
    m = re.search(r"\*\*What the trained cells show\*\*[^\n]*", section)
    return 0 if m is None else len(re.findall(r"late concentration -?\d", m.group(0)))


@pytest.mark.parametrize("claim", [1, 3])
def test_the_reference_equals_the_report(claim: int):
    lines = _reference(f"claim{claim}_reference.py")
    section = _section(claim)
    head = section.split("\n\n**With", 1)[0]  # the verdict paragraph, before the variants
    (verdict,) = [ln.split(": ", 1)[1] for ln in lines if ln.startswith(f"claim {claim} verdict: ")]
    assert f"(verdict: {verdict})" in head
    shorts = [ln.removeprefix("short: ") for ln in lines if ln.startswith("short: ")]
    for s in shorts:
        assert s in head, s
    assert head.count(" of 3 trained seeds") == len(shorts)
    for ln in lines:
        if ln.startswith("cannot be supported: "):
            assert ln.removeprefix("cannot be supported: ") in head, ln
        if ln.startswith("untestable: "):
            assert ln.removeprefix("untestable: ") in section, ln
    cells = [ln.removeprefix("cell: ") for ln in lines if ln.startswith("cell: ")]
    if verdict == "not enough data":
        for c in cells:
            assert c in section, c
        assert _described(section) == len(cells)
    if claim == 3 and verdict != "not enough data":
        for ln in lines:
            if ln.startswith("family "):
                assert ln.split("; native grid")[0] in section, ln


def test_claim3_reference_gives_the_distances_science_md_states_for_both_grids():
    """docs/SCIENCE.md#profile-distance states claim 3's distances as decided on 2026-12-05 (before
    revision 3 of the plateau rule) on the 21-point interpolated grid and on the native layer grid;
    the reference, reading every plateau as final as the rule then did, gives those numbers."""
    science = (ROOT / "docs" / "SCIENCE.md").read_text()
    rows = {
        ln.split(";")[0].removeprefix("family "): ln
        for ln in _reference("claim3_reference.py", "--any-revision")
        if ln.startswith("family ")
    }
    assert set(rows) == {"lstm", "gru"}
    for fam in ("lstm", "gru"):
        m = re.search(r"d_s3_parity (\S+); d_s3_dyck (\S+);.*native grid: (\S+) / (\S+)", rows[fam])
        grid21, native = f"{m[1]} / {m[2]}", f"{m[3]} / {m[4]}"
        assert grid21 != native
        stated = f"{fam.upper()} {grid21}" if fam == "lstm" else f"GRU {grid21}"
        assert stated in " ".join(science.split()), stated
        assert native in " ".join(science.split()), native
