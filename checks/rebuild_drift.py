"""How far a rebuilt run's layer profile moved from the run it rebuilds, next to how far the seeds
of its cell are apart: are rebuilt weights (docs/SCIENCE.md#rebuilding-weights) the same model
as far as the probes can tell, or another draw of the same recipe?

    python checks/rebuild_drift.py OLD_BUNDLE NEW_BUNDLE [--eval-length 40]

OLD_BUNDLE holds the runs as first made (with their probe results), NEW_BUNDLE the same suite
after rebuilding (runs with ``made_with.rebuilt_from``). For each rebuilt run it prints the probe
accuracy per layer (embedding = layer −1) at the eval length, before and after, the largest
per-layer change, the profile class and AUC before and after (``science.profiles``), and, as a
yardstick, the median largest per-layer difference between two seeds of the same cell in OLD.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import zipfile
from collections import defaultdict
from pathlib import Path

from science.profiles import auc, profile_class


def _tables(path: Path) -> tuple[list[dict], list[dict]]:
    with zipfile.ZipFile(path) as z:
        return (json.loads(z.read("tables/runs.json")), json.loads(z.read("tables/probe_results.json")))


def _curves(path: Path, eval_length: int) -> tuple[dict[str, dict], dict[str, tuple[dict[int, float], float]]]:
    """Runs by config hash, and each run's (curve {layer: accuracy}, mean majority baseline)."""
    runs, probes = _tables(path)
    by_id = {r["id"]: r for r in runs}
    curves: dict[str, dict[int, float]] = defaultdict(dict)
    bases: dict[str, list[float]] = defaultdict(list)
    for p in probes:
        if p["eval_length"] == eval_length and p["run_id"] in by_id:
            h = by_id[p["run_id"]]["config_hash"]
            curves[h][p["layer"]] = p["accuracy"]
            bases[h].append(p["majority_baseline"])
    return ({r["config_hash"]: r for r in runs}, {h: (c, statistics.fmean(bases[h])) for h, c in curves.items()})


def _max_diff(a: dict[int, float], b: dict[int, float]) -> float:
    return max(abs(a[k] - b[k]) for k in a.keys() & b.keys())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--eval-length", type=int, default=40)
    args = ap.parse_args()
    old_runs, old = _curves(args.old, args.eval_length)
    new_runs, new = _curves(args.new, args.eval_length)
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    for h, r in old_runs.items():
        if h in old:
            cells[(r["task"], r["family"])].append(h)
    print(
        "| task | family | seed | first made on | held-out acc: first → rebuilt | probe acc per layer "
        "(emb, blocks): first → rebuilt | largest change | class: first → rebuilt | AUC: first → rebuilt | "
        "seeds of the cell apart (median largest difference) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    changes, spreads, flips, n = [], [], 0, 0
    for h, r in sorted(new_runs.items(), key=lambda kv: (kv[1]["task"], kv[1]["family"], kv[1]["seed"])):
        first = (r.get("made_with") or {}).get("rebuilt_from")
        if not first or h not in old or h not in new:
            continue
        (a, fa), (b, fb) = old[h], new[h]
        change = _max_diff(a, b)
        others = [old[o][0] for o in cells[(r["task"], r["family"])]]
        spread = (
            statistics.median(_max_diff(x, y) for x, y in itertools.combinations(others, 2))
            if len(others) > 1
            else float("nan")
        )
        ca, cb = profile_class(a, fa), profile_class(b, fb)
        n, flips = n + 1, flips + (ca != cb)
        changes.append(change)
        spreads.append(spread)
        fmt = lambda c: " ".join(f"{c[k]:.2f}" for k in sorted(c))  # noqa: E731
        print(
            f"| {r['task']} | {r['family']} | {r['seed']} | {first.get('made_on')} | "
            f"{first.get('heldout_acc'):.4f} → {r['heldout_acc']:.4f} | {fmt(a)} → {fmt(b)} | {change:.2f} | "
            f"{ca} → {cb} | {auc(a, fa):.3f} → {auc(b, fb):.3f} | {spread:.2f} |"
        )
    if n:
        print(
            f"\n{n} rebuilt run(s): largest per-layer change median {statistics.median(changes):.2f} "
            f"(max {max(changes):.2f}); seeds of the same cell apart, median {statistics.median(spreads):.2f}; "
            f"profile class changed in {flips} of {n}."
        )
    else:
        print("\nno rebuilt run of NEW has probe results in OLD")


if __name__ == "__main__":
    main()
