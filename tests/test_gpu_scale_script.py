"""scripts/gpu_scale.sh end to end on this CPU (``--dry-run``: toy shapes of the same families, the
same steps, the same files): it cannot be tried on a GPU before a lease, so every step it takes
there — the parts of each shape under their time shares, the JSON lines, the summary — runs here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_scale_dry_run_measures_every_part_of_each_shape(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OUT": str(out),
        "LAYERSCOPE_HOME": str(tmp_path / "home"),
        "SHAPES": "pythia160m mamba130m",
        "PRECISION": "bf16",
        "PYTHONPATH": str(ROOT),
    }
    # a budget no part reaches on a loaded machine: a part stopped by its share would be a failure here
    done = subprocess.run(
        ["bash", "scripts/gpu_scale.sh", "--dry-run", "100000"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {p.name for p in out.iterdir()} == {"scale.jsonl", "scale.log", "env.txt"}
    lines = [json.loads(line) for line in (out / "scale.jsonl").read_text().splitlines()]
    parts = [r for r in lines if "progress" not in r and "log" not in r and r.get("part") != "total"]
    got = {(r["label"], r["part"]) for r in parts}
    assert got == {(s, p) for s in ("pythia160m", "mamba130m") for p in ("probes", "interventions", "patching")}
    for r in parts:
        assert not (r.get("timed_out") or r.get("failed") or r.get("skipped")), r
        assert r["seconds"] > 0 and r["rows"] > 0 and r["precision"] == "bf16" and r["device"] == "cpu"
        assert r["peak_gpu_gb"] is None  # no GPU here: nothing to read
    totals = [r for r in lines if r.get("part") == "total"]
    # bf16 on the CPU: the compiled Mamba path steps aside under autocast, transformers' ops run
    assert len(totals) == 6 and {t["mixer_path"] for t in totals} == {None, "pure PyTorch"}
    assert any("progress" in r for r in lines)
    log = (out / "scale.log").read_text()
    assert "gpu_scale done" in log and "interventions" in log
