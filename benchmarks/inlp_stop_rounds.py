"""INLP's rounds at its stopping line on a bundle's run: an older commit's ``Inlp`` and today's two
implementations fitted on the very same rows (docs/SCIENCE.md#inlp-chance-line).

    OMP_NUM_THREADS=1 python benchmarks/inlp_stop_rounds.py examples/paper-steps.layerscope.zip 64 \\
        --layers 0 1 2 --base f0f81c2

The run (RUN_ID: its id in the bundle's runs table) is imported into a scratch database and its
weights rebuilt within its recorded steps, as ``checks/remeasure_agreement.py`` does; its
intervention measurement then starts with every fit stood in for (nothing is measured), saving the
rows INLP is fitted on at each of ``--layers`` — ``[N, D]`` states and ``[N]`` labels, what
``science.measure.fit_edit`` receives at the base fit size. Each saved set is fitted in a fresh
process, one thread: by ``--base``'s ``Inlp`` (that commit's tree from ``git archive``, first on
the path), by today's incremental rounds and by the reference rounds (``Inlp(from_scratch=True)``).
Printed per layer and implementation: the rank it stopped at, the line it stopped at (its own
code's), the rounds' held-out accuracies around the stop, and the ranks where measurement version
1's line (the held-out share of the training majority + 1 pp) and version 2's
(``science.edit_methods.inlp_chance_line``) would have stopped its rounds; ``--json`` writes every
round of every fit (docs/SCIENCE.md#inlp-chance-line).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
IMPLEMENTATIONS = ("base", "incremental", "reference")


class _Saved(Exception):
    """Every asked layer's INLP rows are saved: the measurement stops here."""


def save_fit_rows(bundle: Path, run_id: int, layers: list[int], out: Path) -> None:
    """Rebuild run ``run_id`` of ``bundle`` in a scratch database under a temporary folder and save
    ``out/layer-{l}.pt`` (``X [N, D]`` float32, ``y [N]``, ``n_classes``, INLP's keywords)."""
    import torch

    import science.measure as measure
    from backend.bundle_scratch import NoSuchRun, scratch_run
    from science.edits import Edit
    from worker.pipeline import run_suite

    calls: list[int] = []  # INLP's fits so far: the measurement fits layer by layer from block 0

    def stand_in(method: str, x: torch.Tensor, y: torch.Tensor, n_classes: int, **kw: object) -> Edit:
        if method == "inlp":
            layer = len(calls)
            calls.append(layer)
            if layer in layers:
                kept = {k: v for k, v in kw.items() if k != "ctx"}
                torch.save({"X": x, "y": y, "n_classes": n_classes, "kw": kept}, out / f"layer-{layer}.pt")
            if layer >= max(layers):
                raise _Saved
        # a stand-in removing the whole width: its refit reads chance, so no fit is made on more sequences
        return Edit(method=method, rank_removed=int(x.shape[1]), center=x.mean(0, dtype=torch.float64))

    with patch.object(measure, "fit_edit", stand_in), tempfile.TemporaryDirectory(prefix="inlp-stop-") as tmp:
        try:
            scratch = scratch_run(bundle, run_id, Path(tmp))
        except NoSuchRun as exc:
            raise SystemExit(str(exc)) from None
        try:
            run_suite(scratch.params.model_copy(update={"parts": ["interventions"]}), scratch.env)
        except _Saved:
            return
    raise SystemExit(f"run {run_id}: the measurement ended before INLP was fitted at layers {layers}")


def fit_saved(path: Path, impl: str) -> dict:
    """INLP on one saved set with the ``science`` first on the path (``impl``: which one)."""
    import torch

    from science.edit_methods import Inlp

    torch.set_num_threads(1)
    saved = torch.load(path)
    fit = Inlp(from_scratch=True).fit if impl == "reference" else Inlp().fit
    start = time.perf_counter()
    edit = fit(saved["X"], saved["y"], saved["n_classes"], **saved["kw"])
    y, n_dev = saved["y"], max(1, int(saved["y"].shape[0]) // 5)
    perm = torch.randperm(int(y.shape[0]), generator=torch.Generator().manual_seed(int(saved["kw"].get("seed", 0))))
    counts = torch.bincount(y[perm[:n_dev]], minlength=saved["n_classes"])
    version_1_line = float(edit.info["dev_majority"]) + float(saved["kw"].get("chance_tol", 0.01))
    return {
        "rank": int(edit.rank_removed),
        "seconds": time.perf_counter() - start,
        "line": float(edit.info.get("chance_line", version_1_line)),  # the line this code stopped at
        "version_1_line": version_1_line,
        "dev_counts": [int(c) for c in counts],
        "rounds": [(int(r["rank"]), float(r["dev_accuracy"]), bool(r["converged"])) for r in edit.info["rounds"]],
    }


def _in_fresh_process(path: Path, impl: str, tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    code = "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[3]); import inlp_stop_rounds as m; "
    code += "print(json.dumps(m.fit_saved(Path(sys.argv[1]), sys.argv[2])))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), impl, str(Path(__file__).parent)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("run_id", type=int)
    ap.add_argument("--layers", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--base", default=None, help="an older commit whose Inlp is fitted too (default: none)")
    ap.add_argument("--json", type=Path, default=None, help="also write every round of every fit here")
    args = ap.parse_args(argv)
    import torch

    from science.edit_methods import inlp_chance_line

    everything: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="inlp-stop-rounds-") as tmp:
        work = Path(tmp)
        save_fit_rows(args.bundle, args.run_id, args.layers, work)
        trees = {"incremental": ROOT, "reference": ROOT}
        if args.base:
            base = work / "base"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
            trees = {"base": base, **trees}
        for layer in sorted(args.layers):
            for impl, tree in trees.items():
                r = _in_fresh_process(work / f"layer-{layer}.pt", impl, tree)
                everything[f"{layer}/{impl}"] = r
                stop = r["rank"]
                near = [(k, round(a, 4)) for k, a, _ in r["rounds"] if stop - 6 <= k <= stop]
                y_dev = torch.repeat_interleave(torch.arange(len(r["dev_counts"])), torch.tensor(r["dev_counts"]))
                lines = {"version 1": r["version_1_line"], "version 2": inlp_chance_line(y_dev, len(r["dev_counts"]))}
                at = {name: next((k for k, a, _ in r["rounds"] if a <= line), None) for name, line in lines.items()}
                unconverged = sum(not c for _, _, c in r["rounds"])
                print(
                    f"layer {layer} {impl:<11} stopped at rank {stop} ({r['seconds']:.1f} s; line {r['line']:.5f}; "
                    f"{unconverged} unconverged rounds); last rounds {near}; "
                    + "; ".join(f"at {name}'s line {lines[name]:.5f}: rank {at[name]}" for name in lines),
                    flush=True,
                )
    if args.json is not None:
        args.json.write_text(json.dumps(everything))
    return 0


if __name__ == "__main__":
    sys.exit(main())
