"""How far LEACE's refit moves with the draw of its fit set: the spread a removal line must live with.

A stored run's weights are rebuilt (trained again within its recorded steps, probes only), then
LEACE is fitted at each ``--layers`` on ``--draws`` independent fit sets of ``--sequences``
sequences at L = 40 (the same size, other sequences), and a probe is refit on the edited states of
one eval set at L = 40 — the run's own (``intervene_eval`` seed, ``n_probe_sequences`` of its
settings), so the refit's split is the measurement's. Per layer it prints each draw's refit over the
majority rate (pp), their mean, standard deviation and range, the removal line
(docs/SCIENCE.md#removal-line) and how many draws fall at or under it, beside the bundle's own
LEACE row at L = 40. The measurement's fit sets are drawn from ``intervene_fit`` seeds at indices 0
and the doubled sizes; these draws use indices ``DRAW_INDEX`` + 0..draws-1 of the same purpose.

    OMP_NUM_THREADS=1 python benchmarks/leace_fit_draws.py examples/paper-steps.layerscope.zip 64 \\
        --draws 10 --sequences 2000 --layers 0,1,2,3 [--json]

Raises SystemExit with a message when the run is not in the bundle or cannot be rebuilt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from science.captured import capture
from science.edit_methods import Leace
from science.measure import removal_line
from science.probes import probe_layers
from science.seeds import data_seed

FIT_LENGTH = 40
# the draws' seeds: the fit sets' own purpose at indices the measurement never uses (it uses 0 and
# the doubled sizes), so each draw is a fit set of the same kind the measurement draws
DRAW_INDEX = 1_000_000


def rebuilt(bundle: Path, run_id: int, work: Path) -> tuple[Any, Any, Any, dict[str, Any], dict[str, Any]]:
    """(params, task, model, the bundle's run row, its measure settings' params) of run ``run_id``
    of ``bundle``, its weights trained again into a scratch database under ``work`` (probes only)."""
    from backend.bundle_scratch import NoSuchRun, scratch_run
    from worker.pipeline import load_run, run_suite

    try:
        scratch = scratch_run(bundle, run_id, work)
    except NoSuchRun as exc:
        raise SystemExit(str(exc)) from None
    tables, row, env, new_id = scratch.tables, scratch.row, scratch.env, scratch.run_id
    rows = [r for r in tables["intervention_results"] if r.get("run_id") == run_id]
    settings = {r["id"]: r["params"] for r in tables.get("measure_settings", [])}
    measured = settings.get(rows[0].get("settings_id"), {}) if rows else {}
    run_suite(scratch.params.model_copy(update={"parts": ["probes"]}), env)
    got_params, task, model = load_run(new_id, env)
    return got_params, task, model, row, {"params": measured, "rows": rows}


def refit_over_majority(model, task, eval_data, eval_states, layer: int, fit_data, split_seed: int) -> dict:
    """LEACE fitted at ``layer`` on ``fit_data``'s labelled tokens, its refit on ``eval_states``."""
    states = capture(model, fit_data, "cpu", layers=[layer], preds=False).states[layer]
    x, y = states.reshape(-1, states.shape[-1]), fit_data.labels.reshape(-1)
    edit = Leace().fit(x[y >= 0], y[y >= 0], task.n_classes)
    report = probe_layers({layer: edit.apply(eval_states[layer])}, eval_data.labels, task.n_classes, seed=split_seed)[
        layer
    ]
    return {
        "refit": report.accuracy,
        "majority": report.majority_baseline,
        "over_pp": 100 * (report.accuracy - report.majority_baseline),
        "line": removal_line(report),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("run_id", type=int)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--sequences", type=int, default=2000, help="sequences in each fit set")
    ap.add_argument("--layers", default="0,1,2,3")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    layers = [int(x) for x in a.layers.split(",")]
    with tempfile.TemporaryDirectory(prefix="leace-draws-") as tmp:
        params, task, model, row, old = rebuilt(a.bundle, a.run_id, Path(tmp))
    n_eval = int(old["params"].get("n_probe_sequences", 500))
    eval_data = task.generate(FIT_LENGTH, n_eval, data_seed(params.seed, "intervene_eval", FIT_LENGTH), split="test")
    eval_states = capture(model, eval_data, "cpu", layers=layers, preds=False).states
    split_seed = data_seed(params.seed, "split", FIT_LENGTH)
    out: dict[str, Any] = {"run": row["name"], "sequences": a.sequences, "draws": a.draws, "layers": {}}
    for layer in layers:
        draws = []
        for d in range(a.draws):
            fit = task.generate(
                FIT_LENGTH, a.sequences, data_seed(params.seed, "intervene_fit", DRAW_INDEX + d), split="test"
            )
            draws.append(refit_over_majority(model, task, eval_data, eval_states, layer, fit, split_seed))
        over = [x["over_pp"] for x in draws]
        stored = next(
            (
                r
                for r in old["rows"]
                if r["method"] == "leace" and r["layer"] == layer and r["eval_length"] == FIT_LENGTH
            ),
            None,
        )
        out["layers"][layer] = {
            "over_pp": over,
            "mean_pp": statistics.fmean(over),
            "sd_pp": statistics.stdev(over) if len(over) > 1 else 0.0,
            "min_pp": min(over),
            "max_pp": max(over),
            "line_over_majority_pp": 100 * (draws[0]["line"] - draws[0]["majority"]),
            "removed": sum(x["refit"] <= x["line"] + 1e-12 for x in draws),
            "bundle_over_pp": None
            if stored is None or stored.get("refit_acc") is None
            else 100 * (stored["refit_acc"] - stored["refit_majority"]),
            "bundle_fit_sequences": None if stored is None else stored.get("n_fit_sequences"),
        }
    if a.json:
        print(json.dumps(out))
        return 0
    print(f"{out['run']}: LEACE on {a.draws} fit sets of {a.sequences} sequences at L {FIT_LENGTH}, refit at L 40")
    for layer, r in out["layers"].items():
        print(
            f"layer {layer}: refit over majority {r['mean_pp']:+.2f} ± {r['sd_pp']:.2f} pp "
            f"(range {r['min_pp']:+.2f} … {r['max_pp']:+.2f}); removal line {r['line_over_majority_pp']:+.2f} pp; "
            f"removed in {r['removed']} of {a.draws}; the bundle's row {r['bundle_over_pp']:+.2f} pp "
            f"({r['bundle_fit_sequences']} sequences)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
