"""Steps and seconds to the criterion for every cell of a study bundle, as a Markdown table.

    python benchmarks/study_steps.py examples/paper-steps.layerscope.zip [examples/paper-steps-rev1.layerscope.zip]

With more than one bundle (a study and the cells a preset revision superseded, say), each row
names its suite.

Per (task, family): for the seeds that reached 99 % held-out token accuracy at L = 40, the
median steps and training seconds to it; for the others, why training stopped (``plateau``,
``budget``, ``time_limit``) with the best held-out accuracy and its step; runs still training
when the bundle was written (``export --in-flight``) as "in flight" with the step their state
was saved at. Random-init control runs are left out (they are not trained). Reads the bundle only
(no database).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import zipfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.bundle import read_bundle
from science.trained import is_trained


def in_flight_runs(bundle: Path) -> list[dict[str, Any]]:
    """The runs a bundle carries in flight (``manifest["in_flight"]``), each as ``{task, family,
    suite, seed, step, max_steps}`` read from its state's note (``training/<hash>.json``)."""
    with zipfile.ZipFile(bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        out = []
        for entry in manifest.get("in_flight") or []:
            note_name = next(n for n in entry["files"] if n.endswith(".json"))
            note = json.loads(z.read(note_name))
            out.append(
                {
                    "task": note["task"],
                    "family": note["family"],
                    "suite": note.get("suite") or manifest.get("suite") or "",
                    "seed": note["seed"],
                    "step": entry.get("step"),
                    "max_steps": int((note.get("run_config") or {}).get("max_steps") or 0),
                }
            )
    return out


def cell_rows(runs: list[dict[str, Any]], flying: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One row per (task, family, suite) with the trained seeds' median steps/seconds, the others'
    stops, and the runs in flight (``flying``: :func:`in_flight_runs`)."""
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if not r.get("control"):
            cells[(r["task"], r["family"], r.get("suite") or "")].append(r)
    in_flight: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for f in flying:
        in_flight[(f["task"], f["family"], f["suite"])].append(f)
    out = []
    for key in sorted(cells.keys() | in_flight.keys()):
        task, fam, suite = key
        rs, fl = cells.get(key, []), sorted(in_flight.get(key, []), key=lambda f: f["seed"])
        done = [r for r in rs if is_trained(r.get("heldout_acc"), r.get("early_stop_acc"))]
        rest = [r for r in rs if r not in done]
        budgets = [int((r.get("train_config") or {}).get("max_steps") or 0) for r in rs] + [f["max_steps"] for f in fl]
        out.append(
            {
                "task": task,
                "family": fam,
                "suite": suite,
                "seeds": len(rs) + len(fl),
                "trained": len(done),
                "budget": max(budgets),
                "steps": statistics.median(r["steps"] for r in done) if done else None,
                "seconds": statistics.median(r["train_seconds"] for r in done) if done else None,
                "others": [
                    f"{r.get('stop_reason') or 'stopped'} (seed {r['seed']}: best "
                    f"{(r.get('best_heldout_acc') or r.get('heldout_acc') or 0):.3f}"
                    + (f" at step {r['best_step']}" if r.get("best_step") else "")
                    + ")"
                    for r in rest
                ]
                + [f"in flight (seed {f['seed']} at step {f['step'] if f['step'] is not None else '?'})" for f in fl],
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
    print(markdown(cell_rows(runs, [f for b in a.bundles for f in in_flight_runs(b)])))


if __name__ == "__main__":
    main()
