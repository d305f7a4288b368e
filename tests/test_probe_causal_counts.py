"""/probe-vs-causal's cross-run summary counts the runs /claims' claim 4 counts: the trained seeds of a
cell not learned by every seed (revision 3 of the plateau rule, docs/SCIENCE.md#plateau) are left out
of both, through one definition (``science.claims.not_learned_cells``). The page used to read
"0 of 62 … 46 usable, 16 not removed" beside /claims' 0/45 and 15 of 60."""

from __future__ import annotations

from dashboard.pages import probe_causal

CELLS = [("parity", "lstm"), ("s3", "mamba2")]


def _run(rid, task, family, seed, acc, **extra):
    return {
        "id": rid,
        "task": task,
        "family": family,
        "seed": seed,
        "n_layers": 2,
        "pretrained": None,
        "heldout_acc": acc,
        "early_stop_acc": 0.99,
        "stop_reason": "trained" if acc >= 0.99 else "plateau",
        "train_config": {"max_steps": 1000, "plateau_revision": 3},
        **extra,
    }


class Api:
    def __init__(self, runs):
        self._runs = runs

    def suites(self):
        return [{"name": "paper", "n_runs": len(self._runs)}]

    def all_runs(self, *, limit=500, **kw):
        return list(self._runs)

    def export(self, resource, fmt, **kw):
        trained = [r for r in self._runs if r["heldout_acc"] >= 0.99]
        base = {"eval_length": 40, "n_layers": 2, "pretrained": None, "run_name": ""}
        if resource == "probes":
            return [
                {
                    **base,
                    "run_id": r["id"],
                    "task": r["task"],
                    "family": r["family"],
                    "seed": r["seed"],
                    "layer": layer,
                    "accuracy": acc,
                    "majority_baseline": 0.5,
                }
                for r in trained
                for layer, acc in ((-1, 0.5), (0, 0.6), (1, 1.0))
            ]
        return [
            {
                **base,
                "run_id": r["id"],
                "task": r["task"],
                "family": r["family"],
                "seed": r["seed"],
                "method": "leace",
                "layer": layer,
                "delta_pp": -40.0 if layer == 1 else -1.0,
                "refit_acc": 0.5,
                "refit_majority": 0.5,
                "p_value": 0.001,
                "p_holm": 0.002,
                "significant": True,
                "random_delta_pp": 0.0,
            }
            for r in trained
            for layer in (-1, 0, 1)
        ]


def test_the_summary_leaves_out_the_trained_seeds_of_a_cell_not_learned():
    runs = [_run(1 + i, "parity", "lstm", i, 1.0) for i in range(3)]
    runs += [_run(10, "s3", "mamba2", 0, 0.995), _run(11, "s3", "mamba2", 1, 0.9), _run(12, "s3", "mamba2", 2, 0.9)]
    state = {**probe_causal.SPEC.defaults(), "method": "auto"}
    pts, _notice, caption = probe_causal.summary_view(Api(runs), state)
    assert sorted(p["run_id"] for p in pts) == [1, 2, 3]  # mamba2 × s3 seed 0 left out, as claim 4 does
    assert "1 run(s) of cells not learned left out, as /claims does" in caption
    # stopped by revision 2 instead, the cell is only short of seeds: its trained seed is read
    for r in runs[4:]:
        r["train_config"] = {"max_steps": 1000, "plateau_evals": 20, "plateau_gap_share": 0.2}
    pts, _notice, caption = probe_causal.summary_view(Api(runs), state)
    assert sorted(p["run_id"] for p in pts) == [1, 2, 3, 10] and "not learned" not in caption
