"""Independent recomputation of claim 2 against the random-init controls (bounded-depth Dyck:
Transformer early, others gradual) from a bundle alone (stdlib zipfile/json + numpy); it does not
import the project. Usage: python checks/claim2_controls_reference.py [BUNDLE]. Compare its printout
with the claims page (docs/SCIENCE.md#controls)."""

import itertools
import json
import sys
import zipfile
from collections import defaultdict
from typing import Any

import numpy as np

BUNDLE = sys.argv[1] if len(sys.argv) > 1 else "examples/paper.layerscope.zip"
TASK, L, NL = "dyck", 40, 4
LAYERS = [-1, 0, 1, 2, 3]
DEPTH = np.array([(layer + 1) / NL for layer in LAYERS])
FAMS = ["transformer", "mamba", "mamba2", "lstm", "gru"]
DEF = dict(level=0.95, early=0.5, late=0.5, dmargin=0.0)

with zipfile.ZipFile(BUNDLE) as z:
    runs = json.loads(z.read("tables/runs.json"))
    probes = json.loads(z.read("tables/probe_results.json"))

acc: defaultdict[int, dict[int, float]] = defaultdict(dict)  # run -> layer -> probe accuracy
majs = defaultdict(list)
for p in probes:
    if p["eval_length"] == L:
        assert p["layer"] not in acc[p["run_id"]], "duplicate probe row"
        acc[p["run_id"]][p["layer"]] = p["accuracy"]
        if p["majority_baseline"] is not None:
            majs[p["run_id"]].append(p["majority_baseline"])


def is_trained(r):
    es = r.get("early_stop_acc")
    es = 0.99 if es is None else es
    return r["heldout_acc"] is not None and r["heldout_acc"] >= es - 1e-9


trained: defaultdict[str, dict[int, tuple[np.ndarray, float, int]]] = defaultdict(dict)  # family -> seed -> curve
controls: defaultdict[str, dict[int, np.ndarray]] = defaultdict(dict)
left_out: list[tuple[int, str]] = []
for r in runs:
    if r["task"] != TASK or r["n_layers"] != NL:
        continue
    curve = acc.get(r["id"], {})
    if sorted(curve) != LAYERS:
        left_out.append((r["id"], "incomplete curve"))
        continue
    c = np.array([curve[layer] for layer in LAYERS])
    if r.get("control") == "init":
        controls[r["family"]][r["seed"]] = c
    elif r.get("control") is None and is_trained(r):
        trained[r["family"]][r["seed"]] = (c, float(np.mean(majs[r["id"]])), r["id"])
    else:
        left_out.append((r["id"], "not trained"))


def first95(c, f, level):
    top = c.max() - f
    if top < 0:
        return None
    for i, layer in enumerate(LAYERS):
        if c[i] - f >= level * top - 1e-12:
            return layer
    return None


def late_conc(c, f):
    den = c[-1] - max(f, c[0])
    return None if den < 0.02 else (c[-1] - c[-2]) / den


def auc(c, f):
    top = c.max() - f
    if top <= 1e-12:
        return None
    y = np.clip((c - f) / top, 0, 1)
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(DEPTH)))


def klass(c, f, margin, level=0.95, early=0.5, late=0.5, below="not above control"):
    if c.max() - f < margin:
        return below
    f95 = first95(c, f, level)
    if f95 is not None and (f95 + 1) / NL <= early:
        return "early"
    lc = late_conc(c, f)
    if lc is not None and lc >= late:
        return "late"
    return "gradual"


def metrics(c, f):
    return dict(first_95=first95(c, f, 0.95), late_concentration=late_conc(c, f), auc=auc(c, f))


def perm(x, y):
    """one-sided exact permutation p (mean x > mean y) and the opposite direction."""
    allv = np.array(list(x) + list(y))
    n = len(x)
    obs = np.mean(x) - np.mean(y)
    ge = le = tot = 0
    for idx in itertools.combinations(range(len(allv)), n):
        m = np.zeros(len(allv), bool)
        m[list(idx)] = True
        d = allv[m].mean() - allv[~m].mean()
        ge += d >= obs - 1e-12
        le += d <= obs + 1e-12
        tot += 1
    return float(obs), ge / tot, le / tot, tot


out: dict[str, Any] = {"cells": {}, "left_out": left_out}
for mode in ("control", "majority"):
    cells, seed_auc = {}, {}
    for fam in FAMS:
        seeds = sorted(trained[fam])
        if mode == "control":
            seeds = [s for s in seeds if s in controls[fam]]
            ctl = np.array([controls[fam][s] for s in sorted(controls[fam])])
            sd = ctl.std(axis=0, ddof=1).max() if len(ctl) >= 2 else None
            margin = max(0.02, 3 * sd) if sd is not None else 0.05
            gains = {s: trained[fam][s][0] - controls[fam][s] for s in seeds}
            mean_c = np.mean([trained[fam][s][0] for s in seeds], axis=0) - ctl.mean(axis=0)
            f = 0.0
            fl = {s: 0.0 for s in seeds}
            below = "not above control"
            ctl_sd = sd
        else:
            margin = 0.05
            below = "flat"
            gains = {s: trained[fam][s][0] for s in seeds}
            fl = {s: trained[fam][s][1] for s in seeds}
            mean_c = np.mean([gains[s] for s in seeds], axis=0)
            f = float(np.mean([fl[s] for s in seeds]))
            ctl_sd = None
        cls = klass(mean_c, f, margin, below=below)
        stab = 0
        for lv, ed, lt, dm in itertools.product(
            (0.93, 0.95, 0.97), (0.375, 0.5, 0.625), (0.4, 0.5, 0.6), (-0.02, 0, 0.02)
        ):
            stab += klass(mean_c, f, margin + dm, lv, ed, lt, below) == cls
        per_seed = {
            s: dict(
                run_id=trained[fam][s][2],
                floor=fl[s],
                curve=gains[s].tolist(),
                cls=klass(gains[s], fl[s], margin, below=below),
                **metrics(gains[s], fl[s]),
            )
            for s in seeds
        }
        seed_auc[fam] = [per_seed[s]["auc"] for s in seeds]
        cells[fam] = dict(
            n=len(seeds),
            margin=margin,
            control_max_sd=ctl_sd,
            floor=f,
            mean_curve=mean_c.tolist(),
            cls=cls,
            stability=stab,
            **metrics(mean_c, f),
            per_seed=per_seed,
        )
    x = [a for a in seed_auc["transformer"] if a is not None]
    y = [a for fam in FAMS[1:] for a in seed_auc[fam] if a is not None]
    diff, p_gt, p_lt, nperm = perm(x, y)
    others = [cells[f]["cls"] for f in FAMS[1:]]
    class_ok = cells["transformer"]["cls"] == "early" and sum(c == "gradual" for c in others) >= 0.75 * len(others)
    stat_ok = p_gt < 0.05
    verdict = (
        "supported" if class_ok and stat_ok else "contradicted" if not class_ok and not stat_ok else "not enough data"
    )
    out[mode] = dict(
        cells=cells,
        auc_diff=diff,
        p_transformer_greater=p_gt,
        p_opposite=p_lt,
        n_splits=nperm,
        class_condition=class_ok,
        statistic=stat_ok,
        verdict=verdict,
    )
del out["cells"]

if __name__ == "__main__":
    for mode in ("control", "majority"):
        o = out[mode]
        print(
            f"== {mode} floor: verdict {o['verdict']} (class {o['class_condition']}, stat {o['statistic']}); "
            f"AUC diff {o['auc_diff']:.6f} p> {o['p_transformer_greater']:.6f} p< {o['p_opposite']:.6f} ({o['n_splits']} splits)"
        )
        for fam, c in o["cells"].items():
            print(
                f"{fam:12s} n={c['n']} class={c['cls']:18s} stab={c['stability']}/81 margin={c['margin']:.6f} "
                f"f95={c['first_95']} lc={c['late_concentration']} auc={c['auc']}"
            )
            print("   mean curve", np.round(c["mean_curve"], 5).tolist(), "floor", round(c["floor"], 6))
            for s, m in c["per_seed"].items():
                print(
                    f"   seed {s} run {m['run_id']} class={m['cls']:18s} auc={m['auc']!r} f95={m['first_95']} lc={m['late_concentration']!r}"
                )
    print("left out:", out["left_out"])
