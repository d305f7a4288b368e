"""backend.bundle_scratch: a shipped bundle's run found in a scratch database, ready to rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.bundle_scratch import NoSuchRun, scratch_run

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper-steps.layerscope.zip"


def test_a_bundle_run_is_found_with_the_job_that_rebuilds_it(tmp_path) -> None:
    got = scratch_run(BUNDLE, 64, tmp_path)
    assert got.row["name"] == "lstm-parity-s0" and got.params.rebuild_weights
    assert got.params.families == ["lstm"] and got.params.tasks == ["parity"] and got.params.seeds == [0]
    with pytest.raises(NoSuchRun, match="no run with id 999999"):
        scratch_run(BUNDLE, 999_999, tmp_path / "again")
