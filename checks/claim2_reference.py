"""Independent reference for claim 2 (bounded Dyck): the layer-profile metrics, classes, the
contrast test and the verdict recomputed from a results bundle with numpy/scipy only, then
compared with the product's claims evaluation on the same bundle.

Written by a reviewer who did not read the product's code, from the study's definitions, with
the details they leave open taken from docs/SCIENCE.md (#profiles, #claims, #trained). Usage:

    python checks/claim2_reference.py examples/paper.layerscope.zip

Definitions used (curve = probe accuracy for emb, block 0..n-1; f = majority baseline):
  depth(l) = (l+1)/n                        (emb -> 0, last block -> 1)
  gain g   = max(acc over emb..n-1) - f
  first_95 = first layer (emb counted as -1) with acc - f >= 0.95 g
  late concentration LC = (acc[n-1]-acc[n-2]) / (acc[n-1]-f_c),
           f_c = max(f, acc[emb]); None if acc[n-1]-f_c < 0.02
  AUC = trapezoid of clip((acc-f)/g, 0, 1) over depth (emb at 0)
  class: flat if g < 0.05; early if depth(first_95) <= 0.5;
         late if LC >= 0.5; else gradual
  trained: heldout_acc >= early_stop_acc
  cell class = class of seed-mean curve with mean majority baseline
  test: one-sided two-sample permutation test of per-seed AUC,
        stat = mean(T) - mean(others), exact over all splits
"""

import itertools
import json
import math
import sys
import zipfile

import numpy as np
from scipy import stats

FAMILIES = ["gru", "lstm", "mamba", "mamba2", "transformer"]
EXPECTED = {"transformer": "early", "gru": "gradual", "lstm": "gradual", "mamba": "gradual", "mamba2": "gradual"}


def profile(
    acc,
    f,
    frac=0.95,
    early_depth=0.5,
    late_share=0.5,
    flat_margin=0.05,
    min_gain=0.02,
    floor_mode="majority",
    depth_mode="emb0",
):
    """acc: array [emb, 0..n-1]; f: majority baseline."""
    acc = np.asarray(acc, float)
    n = len(acc) - 1
    layers = np.arange(-1, n)
    if depth_mode == "emb0":
        depth = (layers + 1) / n
    else:  # study's l/(n-1), emb put at -1/(n-1) (only used for sensitivity)
        depth = layers / (n - 1)
    fl = f if floor_mode == "majority" else max(f, acc[0])
    g = acc.max() - fl
    idx = int(np.argmax(acc - fl >= frac * g - 1e-12))
    first95 = int(layers[idx])
    fc = max(f, acc[0])
    den = acc[-1] - fc
    lc = (acc[-1] - acc[-2]) / den if den >= min_gain else None
    norm = np.clip((acc - fl) / g, 0, 1) if g > 0 else np.zeros_like(acc)
    if depth_mode == "emb0":
        auc = float(np.sum((norm[1:] + norm[:-1]) / 2 * np.diff(depth)))
    else:  # blocks only on l/(n-1)
        auc = float(np.sum((norm[2:] + norm[1:-1]) / 2 * np.diff(depth[1:])))
    if g < flat_margin:
        cls = "flat"
    elif depth[idx] <= early_depth + 1e-12:
        cls = "early"
    elif lc is not None and lc >= late_share:
        cls = "late"
    else:
        cls = "gradual"
    return dict(
        first_95=first95,
        first_95_depth=float(depth[idx]),
        late_concentration=lc,
        auc=auc,
        cls=cls,
        gain_over_majority=float(acc.max() - f),
        gain_over_emb=float(acc[-1] - acc[0]),
    )


def tint(x, bounds=None):
    """Mean and 95% t-interval; with ``bounds`` the interval is clipped to the metric's range, never
    past the mean (docs/SCIENCE.md#statistics: AUC 0..1, layers -1..n-1; late concentration unbounded)."""
    x = np.asarray(x, float)
    m = float(x.mean())
    if len(x) < 2:
        return dict(mean=m, lo=None, hi=None, n=len(x))
    h = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    lo, hi = m - h, m + h
    if bounds is not None:
        lo, hi = max(lo, min(bounds[0], m)), min(hi, max(bounds[1], m))
    return dict(mean=m, lo=lo, hi=hi, n=len(x))


def perm_test(x, y, alternative="greater"):
    """Exact two-sample permutation test, stat = mean(x) - mean(y)."""
    z = np.concatenate([x, y])
    nx = len(x)
    obs = np.mean(x) - np.mean(y)
    cnt = tot = 0
    for comb in itertools.combinations(range(len(z)), nx):
        mask = np.zeros(len(z), bool)
        mask[list(comb)] = True
        s = z[mask].mean() - z[~mask].mean()
        tot += 1
        if alternative == "greater":
            cnt += s >= obs - 1e-12
        else:
            cnt += s <= obs + 1e-12
    return float(obs), cnt / tot, cnt, tot


def load(bundle):
    z = zipfile.ZipFile(bundle)
    runs = [r for r in json.loads(z.read("tables/runs.json")) if r["task"] == "dyck" and not r.get("pretrained")]
    ids = {r["id"] for r in runs}
    probes = [
        p for p in json.loads(z.read("tables/probe_results.json")) if p["run_id"] in ids and p["eval_length"] == 40
    ]
    curves = {}
    for r in runs:
        rows = sorted((p for p in probes if p["run_id"] == r["id"]), key=lambda p: p["layer"])
        if [p["layer"] for p in rows] != list(range(-1, r["n_layers"])):
            continue  # no complete probe curve at L = 40
        curves[r["id"]] = (
            np.array([p["accuracy"] for p in rows]),
            float(np.mean([p["majority_baseline"] for p in rows])),
        )
    return [r for r in runs if r["id"] in curves], curves


def analyse(runs, curves, exclude=(), **kw):
    trained = [r for r in runs if r["heldout_acc"] >= r["early_stop_acc"] and r["id"] not in exclude]
    out = {"cells": {}, "per_run": {}}
    auc_by_fam = {}
    for fam in FAMILIES:
        rs = sorted((r for r in trained if r["family"] == fam), key=lambda r: r["seed"])
        per = []
        for r in rs:
            acc, f = curves[r["id"]]
            p = profile(acc, f, **kw)
            p.update(run_id=r["id"], seed=r["seed"])
            per.append(p)
            out["per_run"][r["id"]] = p
        if not rs:
            continue
        mean_acc = np.mean([curves[r["id"]][0] for r in rs], axis=0)
        mean_f = float(np.mean([curves[r["id"]][1] for r in rs]))
        pm = profile(mean_acc, mean_f, **kw)
        votes = {}
        for p in per:
            votes[p["cls"]] = votes.get(p["cls"], 0) + 1
        lcs = [p["late_concentration"] for p in per if p["late_concentration"] is not None]
        out["cells"][fam] = dict(
            n=len(rs),
            seeds=[r["seed"] for r in rs],
            profile_class=pm["cls"],
            mean_curve=mean_acc.tolist(),
            mean_majority=mean_f,
            mean_curve_first95=pm["first_95"],
            mean_curve_lc=pm["late_concentration"],
            class_votes=votes,
            expected=EXPECTED[fam],
            matches=pm["cls"] == EXPECTED[fam],
            late_concentration=tint(lcs),
            auc=tint([p["auc"] for p in per], (0.0, 1.0)),
            first_95=tint([p["first_95"] for p in per], (-1.0, len(mean_acc) - 2.0)),
            gain_over_majority=tint([p["gain_over_majority"] for p in per]),
            gain_over_emb=tint([p["gain_over_emb"] for p in per]),
        )
        auc_by_fam[fam] = [p["auc"] for p in per]
    x = np.array(auc_by_fam.get("transformer", []))
    y = np.array([a for fam in FAMILIES if fam != "transformer" for a in auc_by_fam.get(fam, [])])
    d, p_gt, c1, tot = perm_test(x, y, "greater")
    _, p_lt, c2, _ = perm_test(x, y, "less")
    sp = stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    )
    out["test"] = dict(
        diff=d,
        p_greater=p_gt,
        count_greater=c1,
        n_splits=tot,
        p_less=p_lt,
        count_less=c2,
        scipy_p_greater=float(sp.pvalue),
        n_x=len(x),
        n_y=len(y),
    )
    others = [f for f in FAMILIES if f != "transformer" and f in out["cells"]]
    out["class_condition"] = bool(
        out["cells"]["transformer"]["matches"] and sum(out["cells"][f]["matches"] for f in others) >= 0.75 * 4
    )
    out["statistic_condition"] = bool(p_gt < 0.05)
    short = [f for f in FAMILIES if out["cells"].get(f, {"n": 0})["n"] < 3]
    if short:
        v = "not enough data"
    elif out["class_condition"] and out["statistic_condition"]:
        v = "supported"
    elif not out["class_condition"] and not out["statistic_condition"]:
        v = "contradicted"
    else:
        v = "not enough data"
    out["verdict"] = v
    out["short_cells"] = short
    return out


def product_claim2(bundle):
    """The product's own claim-2 output on the same bundle (the one import of product code)."""
    from backend.bundle import read_bundle
    from science.claims import evaluate_claims

    _, t = read_bundle(bundle)
    claims = evaluate_claims(t["runs"], t["probe_results"], t["intervention_results"], t["patching_results"])
    return next(c for c in claims if c["id"] == 2)


def main(bundle):
    runs, curves = load(bundle)
    mine = analyse(runs, curves)
    sens = {
        "exclude the borderline-trained runs (margin < 1e-6)": analyse(
            runs, curves, exclude=tuple(r["id"] for r in runs if 0 <= r["heldout_acc"] - r["early_stop_acc"] < 1e-6)
        )
    }
    for frac in (0.90, 0.99):
        sens[f"first layer at {frac:.0%} of the gain"] = analyse(runs, curves, frac=frac)
    for ed in (0.25, 0.75):
        sens[f"early up to depth {ed}"] = analyse(runs, curves, early_depth=ed)
    sens["floor = emb probe"] = analyse(runs, curves, floor_mode="emb")
    sens["depth l/(n-1), blocks only"] = analyse(runs, curves, depth_mode="study")

    ours = product_claim2(bundle)
    print(f"product verdict: {ours['verdict']} | reference verdict: {mine['verdict']}")
    worst = 0.0
    for c in ours["numbers"].get("cells") or []:
        m = mine["cells"][c["family"]]
        same = c["profile_class"] == m["profile_class"] and c["class_votes"] == m["class_votes"]
        print(
            f"  {c['family']:11s} class {c['profile_class']} / {m['profile_class']}, votes {c['class_votes']} / "
            f"{m['class_votes']}{'' if same else '   <-- differs'}"
        )
        for k in ("late_concentration", "auc", "first_95", "gain_over_majority", "gain_over_emb"):
            for s in ("mean", "lo", "hi"):
                if c[k][s] is not None and m[k][s] is not None:
                    worst = max(worst, abs(c[k][s] - m[k][s]))
    t = (ours["numbers"].get("test_auc_transformer_gt_other") or {}).get("dyck")
    if t:
        print(
            f"  AUC test: diff {t['diff']:.6f} / {mine['test']['diff']:.6f}; p {t['p']:.6f} / "
            f"{mine['test']['p_greater']:.6f} ({mine['test']['count_greater']}/{mine['test']['n_splits']}); "
            f"opposite p {t.get('p_opposite')} / {mine['test']['p_less']:.6f}"
        )
    print(f"  largest |difference| over the cell numbers: {worst:.1e}")
    print("sensitivity of the reference verdict:")
    for k, v in sens.items():
        print(
            f"  {k}: {v['verdict']}; classes {{{', '.join(f + ' ' + c['profile_class'] for f, c in v['cells'].items())}}}; "
            f"p(T > others) {v['test']['p_greater']:.4f}, p(T < others) {v['test']['p_less']:.4f}"
        )
    return 0 if ours["verdict"] == mine["verdict"] and worst < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "examples/paper.layerscope.zip"))
