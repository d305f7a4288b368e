"""scripts/gpu_study.sh, run as a lease runs it (on the CPU here, with the fake executor): at the
deadline its worker is really stopped (the running jobs handed back, not left running behind a
killed subshell), and a bundle larger than PART_KB comes back in parts that join into the bundle."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import FAKE_EXECUTOR, ROOT


def _lease(
    tmp_path: Path,
    step_s: float,
    deadline_s: int,
    selections: str = "--task parity --family lstm --family gru --no-controls",
) -> Path:
    """Run the script's study phase on the smoke preset; returns its OUT folder."""
    out = tmp_path / "out"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LAYERSCOPE_")},
        "PYTHONPATH": str(ROOT),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "LAYERSCOPE_FAKE_STEP_S": str(step_s),
        "OUT": str(out),
        "DEVICE": "cpu",
        "PRESET": "smoke",
        "SLOTS": "2",
        "SUITE_NAME": "lease",
        "SUITE_ARGS": selections,
        "WORKER_ARGS": f"--executor {FAKE_EXECUTOR}",
        "PART_KB": "1",
        "PARTIAL_EVERY": "100000",
    }
    done = subprocess.run(
        ["bash", "scripts/gpu_study.sh", "study", str(deadline_s)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.timeout(300)  # a hang guard only
def test_at_the_deadline_the_lease_script_hands_every_running_job_back(tmp_path) -> None:
    out = _lease(tmp_path, step_s=5, deadline_s=40)  # every train job is still running at the deadline
    worker_log = (out / "worker.tail.log").read_text()
    assert "released back to the queue (worker stopping)" in worker_log, worker_log
    with sqlite3.connect(tmp_path / "home" / "layerscope.db") as db:
        running = db.execute("select id, kind from jobs where state = 'running'").fetchall()
    assert running == [], worker_log


@pytest.mark.timeout(300)  # a hang guard only
def test_a_bundle_larger_than_a_part_comes_back_in_parts_that_join(tmp_path) -> None:
    # two selections, not their cross product: parity × lstm and s3 × gru, not parity × gru
    selections = "--task parity --family lstm --no-controls; --task s3 --family gru --no-controls"
    out = _lease(
        tmp_path, step_s=0.01, deadline_s=240, selections=selections
    )  # the suite finishes: the loop ends early
    parts = sorted(out.glob("lease.bundle.part-*"))
    assert len(parts) >= 2, sorted(p.name for p in out.iterdir())
    assert not (out / "lease.bundle").exists()  # only the parts come back
    assert all(p.stat().st_size <= 1024 for p in parts)
    joined = tmp_path / "lease.bundle"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with zipfile.ZipFile(joined) as z:
        assert z.testzip() is None and "manifest.json" in z.namelist()
    with sqlite3.connect(tmp_path / "home" / "layerscope.db") as db:
        cells = {tuple(r) for r in db.execute("select family, task from runs where control is null")}
    assert cells == {("lstm", "parity"), ("gru", "s3")}, cells
