"""A malformed ``LAYERSCOPE_*`` variable is one line naming it, for every command and ``--help``,
not a traceback from importing the CLI (the task names in ``--task``'s help read the settings)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({"LAYERSCOPE_MEASURE_MEMORY_GB": "-1"}, ["runs", "list"], "LAYERSCOPE_MEASURE_MEMORY_GB=-1"),
        # "inf" is not "unbounded" (0 is): refused as a setting, not an OverflowError when a bound is made
        ({"LAYERSCOPE_MEASURE_MEMORY_GB": "inf"}, ["runs", "list"], "LAYERSCOPE_MEASURE_MEMORY_GB=inf"),
        ({"LAYERSCOPE_PORT": "abc"}, ["--help"], "LAYERSCOPE_PORT=abc"),
        ({"LAYERSCOPE_CPU_MATMUL": "openblas"}, ["runs", "list"], "LAYERSCOPE_CPU_MATMUL=openblas"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(env, args, named, tmp_path) -> None:
    run_env = {**os.environ, "LAYERSCOPE_HOME": str(tmp_path), **env}
    run_env.pop("LAYERSCOPE_DB_URL", None)
    out = subprocess.run(
        [sys.executable, "-m", "backend.cli", *args], env=run_env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and named in lines[0] and "bad setting" in lines[0]
