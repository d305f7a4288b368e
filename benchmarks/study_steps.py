"""Steps and seconds to the criterion for every cell of a study bundle, as a Markdown table.

    python benchmarks/study_steps.py examples/paper-steps.layerscope.zip [examples/paper-steps-rev1.layerscope.zip]

With more than one bundle (a study and the cells a preset revision superseded, say), each row
names its suite.

Per (task, family): for the seeds that reached 99 % held-out token accuracy at L = 40, the
median steps and training seconds to it; for the others, why training stopped (``plateau``,
``budget``, ``time_limit``) with the best held-out accuracy and its step. Random-init control
runs are left out (they are not trained). Reads the bundle only (no database).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.bundle import read_bundle
from science.trained import is_trained


def cell_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (task, family) with the trained seeds' median steps/seconds and the others' stops."""
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if not r.get("control"):
            cells[(r["task"], r["family"], r.get("suite") or "")].append(r)
    out = []
    for (task, fam, suite), rs in sorted(cells.items()):
        done = [r for r in rs if is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))]
        rest = [r for r in rs if r not in done]
        out.append(
            {
                "task": task,
                "family": fam,
                "suite": suite,
                "seeds": len(rs),
                "trained": len(done),
                "budget": max(int((r.get("train_config") or {}).get("max_steps") or 0) for r in rs),
                "steps": statistics.median(r["steps"] for r in done) if done else None,
                "seconds": statistics.median(r["train_seconds"] for r in done) if done else None,
                "others": [
                    f"{r.get('stop_reason') or 'stopped'} (seed {r['seed']}: best "
                    f"{(r.get('best_heldout_acc') or r.get('heldout_acc') or 0):.3f}"
                    + (f" at step {r['best_step']}" if r.get("best_step") else "")
                    + ")"
                    for r in rest
                ],
            }
        )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table; a suite column when the rows come from more than one suite."""
    named = len({r["suite"] for r in rows}) > 1
    head = "| task | family |" + (" suite |" if named else "")
    lines = [
        head + " step budget | trained seeds | median steps to 99 % | median training s | the others |",
        "|---|---|" + ("---|" if named else "") + "---:|---:|---:|---:|---|",
    ]
    for r in rows:
        steps = f"{r['steps']:,.0f}" if r["steps"] is not None else "–"
        secs = f"{r['seconds']:,.0f}" if r["seconds"] is not None else "–"
        suite = f" {r['suite']} |" if named else ""
        lines.append(
            f"| {r['task']} | {r['family']} |{suite} {r['budget']:,} | {r['trained']}/{r['seeds']} | {steps} | "
            f"{secs} | {'; '.join(r['others']) or '–'} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundles", type=Path, nargs="+")
    a = ap.parse_args()
    runs = [r for b in a.bundles for r in read_bundle(b)[1]["runs"]]
    print(markdown(cell_rows(runs)))


if __name__ == "__main__":
    main()
