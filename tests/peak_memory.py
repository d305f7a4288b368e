"""The peak resident memory a measurement adds, read in a fresh process (the memory-bound tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# pasted into a test's script: this process's peak resident memory in bytes (VmHWM: its own, not
# ru_maxrss, which a child inherits from a large parent across fork and exec)
HWM = """
def hwm():
    line = next(x for x in open("/proc/self/status") if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024
"""


def peak_growth(script: str, gib: float) -> int:
    """Bytes the peak grew by in ``script`` run with the bound ``gib`` as its one argument; the
    script prints ``{"before": ..., "peak": ...}`` (from :data:`HWM`) as its last line."""
    out = subprocess.run(
        [sys.executable, "-c", script, str(gib)],
        capture_output=True,
        text=True,
        check=True,
        # glibc's malloc raises its mmap threshold (up to 32 MiB) whenever a large block is freed,
        # and then keeps freed layer states in a fragmented heap: the peak of the same script
        # spread over 131-280 MB. Pinned at its initial 128 KiB, freed states return to the OS
        # and the peak is what the measurement holds (87.6-87.9 MB over 4 runs). Not set in the
        # product: every allocation then costs page faults (a measurement took 1.8x as long).
        env={**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)},
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["peak"] - got["before"]
