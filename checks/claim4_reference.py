"""Independent recomputation of claim 4 (the necessity test: is the most readable layer the most
necessary one?) from a results bundle alone (stdlib zipfile/json + numpy/scipy); it does not import
the project. The rule is the one written in docs/SCIENCE.md ("Claim 4, a necessity test", with
near-best probe layers, REFIT_TOL — or, on a measurement version 2 row, its stored removal line
`refit_line` (docs/SCIENCE.md#removal-line) —, the drop beyond rank-matched random removal, Holm, Wilson, the
trained-run criterion, not-learned cells and MIN_SEEDS). Usage:
python checks/claim4_reference.py [BUNDLE] (default examples/paper-steps.layerscope.zip). Compare
its printout with the "## Claim 4" section of docs/RESULTS-<suite>.md, line by line.

Besides the rule it prints: runs whose verdict would change under the other reading of "within
2 pp of the majority rate" (|refit - majority| <= 2 pp instead of refit - majority <= 2 pp),
values on a threshold's boundary, and a recomputation of the stored Holm adjustment. Last, the
same rule read without each control (docs/SCIENCE.md, "Beside the verdict, never deciding it"):
drops read raw (delta_pp, not delta_pp - random_delta_pp), every edit counted whether or not its
refit probe shows it removed the variable, and neither; per group k/n, not_removed, Wilson interval
and group verdict, and a line in the form of the report's "**With and without controls**" line."""

import json
import sys
import zipfile
from collections import defaultdict

import numpy as np
from scipy.stats import binomtest

BUNDLE = sys.argv[1] if len(sys.argv) > 1 else "examples/paper-steps.layerscope.zip"

# docs/SCIENCE.md constants
EVAL_LENGTH = 40
METHODS = ("leace", "inlp", "project_out")  # the first present is read
REFIT_TOL = 0.02  # refit probe within 2 pp of the majority rate -> the edit removed the variable
NEAR_BEST = 0.01  # probe accuracy within 1 pp of the best -> near-best
DECOUPLING_MARGIN_PP = 5.0
DECOUPLED_SHARE_MIN = 0.10
MIN_SEEDS = 3
ALPHA = 0.05
DEFAULT_EARLY_STOP = 0.99
# the study's cells (five families x four tasks, as named in docs/SCIENCE.md and the claims page)
FAMILIES = ("transformer", "mamba", "mamba2", "lstm", "gru")
TASKS = ("parity", "s3", "dyck", "code_depth")
EPS = 1e-9  # float slack on the "within" comparisons (accuracies are multiples of 1/400 etc.)


def g3(x):
    """the product's number format: 3 significant digits."""
    if x is None:
        return "None"
    s = f"{x:.3g}"
    return "0" if s in ("-0", "0") else s


# ---------------------------------------------------------------- data
with zipfile.ZipFile(BUNDLE) as z:
    runs = json.loads(z.read("tables/runs.json"))
    probes = json.loads(z.read("tables/probe_results.json"))
    edits = json.loads(z.read("tables/intervention_results.json"))

suites = {r.get("suite") for r in runs}
assert len(suites) == 1, f"one suite per statistic; bundle holds {suites}"

curve: defaultdict[int, dict[int, float]] = defaultdict(dict)  # run -> layer -> probe accuracy at L = 40
for p in probes:
    if p["eval_length"] == EVAL_LENGTH:
        assert p["layer"] not in curve[p["run_id"]], "duplicate probe row"
        curve[p["run_id"]][p["layer"]] = p["accuracy"]

rows: defaultdict[tuple[int, str], dict[int, dict]] = defaultdict(dict)  # (run, method) -> layer -> row at L = 40
for e in edits:
    if e["eval_length"] == EVAL_LENGTH and e["method"] in METHODS:
        assert e["layer"] not in rows[(e["run_id"], e["method"])], "duplicate edit row"
        rows[(e["run_id"], e["method"])][e["layer"]] = e


def is_trained(r):
    crit = r.get("early_stop_acc")
    crit = DEFAULT_EARLY_STOP if crit is None else crit
    return r.get("heldout_acc") is not None and r["heldout_acc"] >= crit


def crit_of(r):
    c = r.get("early_stop_acc")
    return DEFAULT_EARLY_STOP if c is None else c


# ---------------------------------------------------------------- Holm (recomputed, a cross-check of the stored p_holm)
def holm(ps):
    m = len(ps)
    order = np.argsort(ps, kind="stable")
    adj = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * ps[j]))
        adj[j] = running
    return adj


holm_worst = 0.0
holm_sig_mismatch = []
groups_p = defaultdict(list)
for e in edits:
    if e["p_value"] is not None and e["method"] != "conv1d_removal":
        groups_p[(e["run_id"], e["method"], e["eval_length"])].append(e)
for key, es in groups_p.items():
    adj = holm(np.array([e["p_value"] for e in es]))
    for e, a in zip(es, adj):
        if e["p_holm"] is not None:
            holm_worst = max(holm_worst, abs(a - e["p_holm"]))
        if e["significant"] is not None and bool(a < ALPHA) != bool(e["significant"]):
            holm_sig_mismatch.append((key, e["layer"], a, e["significant"]))


# ---------------------------------------------------------------- cells: trained seeds, not learned
def cell_of(r):
    return (r["task"], r["family"])


study_runs = [r for r in runs if r.get("control") is None]  # random-init controls are no runs of their own
scratch_runs = [r for r in study_runs if not r.get("pretrained")]
by_cell = defaultdict(list)
for r in scratch_runs:
    by_cell[cell_of(r)].append(r)

duplicate_seed_cells = sorted(c for c, rs in by_cell.items() if len({r["seed"] for r in rs}) != len(rs))

not_learned = {}  # cell -> description
for cell, rs in by_cell.items():
    trained = [r for r in rs if is_trained(r)]
    # only a plateau under revision 3 of the rule says more steps would not help (docs/SCIENCE.md,
    # "Revision 3 of the rule"): revisions 1-2 stopped runs still rising, which stay short of seeds
    plateaued = [
        r
        for r in rs
        if not is_trained(r) and r.get("stop_reason") == "plateau" and r["train_config"].get("plateau_revision") == 3
    ]
    steps = sorted(r.get("steps") for r in plateaued)
    best = sorted(r.get("best_heldout_acc") or 0 for r in plateaued)
    budget = max(r["train_config"].get("max_steps") or 0 for r in rs) if rs else None
    if rs and len(plateaued) == len(rs):
        not_learned[cell] = (
            f"not learned within {budget:,} steps ({len(plateaued)} of {len(rs)} seeds plateaued at steps "
            f"{steps[0]:,}-{steps[-1]:,}; best held-out accuracy {best[0]:.3f}-{best[-1]:.3f})"
        )
    elif len(trained) < MIN_SEEDS and plateaued and len(trained) + len(plateaued) == len(rs) and len(rs) >= MIN_SEEDS:
        not_learned[cell] = (
            f"not learned by every seed within {budget:,} steps ({len(plateaued)} of {len(rs)} seeds plateaued "
            f"at step(s) {', '.join(f'{s:,}' for s in steps)}, {len(trained)} trained; best held-out accuracy "
            f"{best[0]:.3f}-{best[-1]:.3f})"
        )


# ---------------------------------------------------------------- per run
def near(a, b, tol):
    return a >= b - tol - EPS


def evaluate(r, two_sided=False, raw=False, all_edits=False):
    """the claim-4 record of one trained run, None when it has no probe curve or no edit.
    raw: damage is delta_pp itself (no rank-matched random removal subtracted);
    all_edits: every edit counts as having removed the variable (no REFIT_TOL rule).
    A row with a refit_line (measurement version 2) is removed at or under that line; a version 1
    row without one within REFIT_TOL of its majority rate."""
    c = curve.get(r["id"])
    method = next((m for m in METHODS if rows.get((r["id"], m))), None)
    if not c or method is None:
        return None
    layers = sorted(c)
    best = max(c.values())
    best_layer = next(layer for layer in layers if c[layer] == best)  # ties -> the earliest
    near_best = {layer for layer in layers if near(c[layer], best, NEAR_BEST)}
    er = rows[(r["id"], method)]

    def removed(e):
        if all_edits:
            return True
        if e.get("refit_line") is not None and not two_sided:  # measurement version 2: the row's own line
            return e["refit_acc"] <= e["refit_line"] + EPS
        d = e["refit_acc"] - e["refit_majority"]
        return (abs(d) if two_sided else d) <= REFIT_TOL + EPS

    def beyond(e):  # the drop beyond rank-matched random removal
        if raw:
            return e["delta_pp"]
        return e["delta_pp"] - (e["random_delta_pp"] if e["random_delta_pp"] is not None else 0.0)

    rem = {layer: beyond(e) for layer, e in er.items() if removed(e)}
    out = dict(
        run_id=r["id"],
        task=r["task"],
        family=r["family"],
        seed=r["seed"],
        method=method,
        best_layer=best_layer,
        beyond_random=all(e["random_delta_pp"] is not None for e in er.values()),
        no_random_rows=sorted(layer for layer, e in er.items() if e["random_delta_pp"] is None),
        near_best_layers=sorted(near_best),
        removed_layers=sorted(rem),
    )
    nb_removed = [layer for layer in sorted(rem) if layer in near_best]
    if not nb_removed:
        out["status"] = "not removed"
        return out
    dmg = min(sorted(rem), key=lambda layer: rem[layer])  # most negative; ties -> the earliest
    d_near = min(rem[layer] for layer in nb_removed)
    sig = er[dmg]["significant"]
    out.update(
        status="evaluated",
        damaging_layer=dmg,
        distance=abs(dmg - best_layer),
        decoupled=dmg not in near_best,
        delta_at_best_pp=rem.get(best_layer),
        delta_near_best_pp=d_near,
        delta_at_damaging_pp=rem[dmg],
        margin_pp=d_near - rem[dmg],
        significant=sig,
    )
    out["meaningfully_decoupled"] = bool(
        out["decoupled"] and out["margin_pp"] >= DECOUPLING_MARGIN_PP - EPS and (sig is None or bool(sig))
    )
    return out


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return None, None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def run_claim(two_sided=False, raw=False, all_edits=False):
    left_out, per_run = [], []
    seeds_ok = defaultdict(int)
    for r in sorted(study_runs, key=lambda r: r["id"]):
        if not is_trained(r):
            left_out.append((r, f"held-out token accuracy {r['heldout_acc'] or 0:.3f} < {crit_of(r):.2f}"))
            continue
        if not r.get("pretrained") and cell_of(r) in not_learned:
            continue  # a not-learned cell adds nothing, its trained seeds neither
        rec = evaluate(r, two_sided, raw=raw, all_edits=all_edits)
        if rec is None:
            continue
        rec["group"] = "pretrained" if r.get("pretrained") else "scratch"
        per_run.append(rec)
        if not r.get("pretrained"):
            seeds_ok[cell_of(r)] += 1
    short = []
    for task in sorted(TASKS):
        for fam in sorted(FAMILIES):
            cell = (task, fam)
            if cell in not_learned:
                continue
            if seeds_ok[cell] < MIN_SEEDS:
                short.append(f"{fam} x {task}: {seeds_ok[cell]} of {MIN_SEEDS} trained seeds with probes and edits")
    groups = {}
    for g in ("scratch", "pretrained"):
        rs = [x for x in per_run if x["group"] == g]
        if not rs:
            continue
        ev = [x for x in rs if x["status"] == "evaluated"]
        k, n = sum(x["meaningfully_decoupled"] for x in ev), len(ev)
        lo, hi = wilson(k, n)
        if n:  # cross-check of the closed form against scipy
            ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
            assert abs(ci.low - lo) < 1e-12 and abs(ci.high - hi) < 1e-12
        if g == "scratch" and (short or duplicate_seed_cells):
            verdict, why = "not enough data", "cells short of seeds: " + "; ".join(short)
        elif g == "pretrained" and n < MIN_SEEDS:
            verdict, why = "not enough data", f"{n} evaluated pretrained run(s) < {MIN_SEEDS}"
        elif lo > DECOUPLED_SHARE_MIN:
            verdict, why = "supports", ""
        elif hi < DECOUPLED_SHARE_MIN:
            verdict, why = "contradicts", ""
        else:
            verdict, why = "inconclusive", ""
        groups[g] = dict(
            n=n,
            decoupled=k,
            share=(k / n if n else None),
            lo=lo,
            hi=hi,
            not_removed=sum(x["status"] == "not removed" for x in rs),
            verdict=verdict,
            why=why,
        )
    vs = [g["verdict"] for g in groups.values()]
    claim = (
        "supported"
        if "supports" in vs
        else "contradicted"
        if vs and all(v == "contradicts" for v in vs)
        else "not enough data"
    )
    return dict(runs=per_run, groups=groups, short=short, left_out=left_out, verdict=claim)


def run_line(x):
    head = (
        f"run_id {x['run_id']}; task {x['task']}; family {x['family']}; seed {x['seed']}; method {x['method']}; "
        f"best_layer {x['best_layer']}; beyond_random {x['beyond_random']}"
    )
    if x["status"] != "evaluated":
        return head + f"; status {x['status']}"
    s = head + f"; damaging_layer {x['damaging_layer']}; distance {x['distance']}; decoupled {x['decoupled']}"
    if x["delta_at_best_pp"] is not None:
        s += f"; delta_at_best_pp {g3(x['delta_at_best_pp'])}"
    return s + (
        f"; delta_near_best_pp {g3(x['delta_near_best_pp'])}; delta_at_damaging_pp {g3(x['delta_at_damaging_pp'])}; "
        f"margin_pp {g3(x['margin_pp'])}; significant {x['significant']}; status evaluated; "
        f"meaningfully_decoupled {x['meaningfully_decoupled']}"
    )


if __name__ == "__main__":
    res = run_claim()
    print(f"== claim 4 on {BUNDLE} (suite {suites.pop()}): verdict {res['verdict']}")
    print("- runs:")
    for x in res["runs"]:
        print("  - " + run_line(x))
    for g, v in res["groups"].items():
        for field in ("decoupled", "n", "share", "lo", "hi", "verdict", "not_removed", "why"):
            val = v[field]
            print(f"- groups.{g}.{field}: {g3(val) if isinstance(val, float) else val}")
    print(f"- cells_short_of_seeds: {', '.join(res['short'])}")
    print("- untestable: " + "; ".join(f"{f} x {t}: {d}" for (t, f), d in sorted(not_learned.items())))
    print(f"- runs_left_out ({len(res['left_out'])}):")
    for r, why in res["left_out"]:
        print(f"  - run_id {r['id']}; task {r['task']}; family {r['family']}; seed {r['seed']}; reason {why}")
    if duplicate_seed_cells:
        print("- cells with two runs of one seed:", duplicate_seed_cells)

    print("\n== checks beside the rule")
    print(
        f"stored p_holm vs recomputed Holm (per run, method, length over its layers): max |diff| {holm_worst:.2e}; "
        f"'significant' disagreeing with p_holm < 0.05: {holm_sig_mismatch or 'none'}"
    )
    for x in res["runs"]:
        if x["no_random_rows"]:
            print(
                f"run {x['run_id']}: {x['method']} rows without a random draw (read raw) at layers {x['no_random_rows']}"
            )
    # boundaries: near-best within 1 pp and refit within 2 pp, at the float limit
    for x in res["runs"]:
        c = curve[x["run_id"]]
        b = max(c.values())
        for layer, a in c.items():
            if abs((b - a) - NEAR_BEST) < 1e-6:
                print(f"run {x['run_id']}: layer {layer} is {b - a!r} below the best (near-best boundary)")
        for layer, e in rows[(x["run_id"], x["method"])].items():
            d = e["refit_acc"] - e["refit_majority"]
            if abs(abs(d) - REFIT_TOL) < 1e-6:
                print(f"run {x['run_id']}: layer {layer} refit - majority = {d!r} (REFIT_TOL boundary)")
    alt = run_claim(two_sided=True)
    diffs = [
        (a["run_id"], run_line(a), run_line(b)) for a, b in zip(res["runs"], alt["runs"]) if run_line(a) != run_line(b)
    ]
    print(
        f"two-sided reading of REFIT_TOL (|refit - majority| <= 2 pp): verdict {alt['verdict']}, "
        f"{len(diffs)} run line(s) differ"
    )
    for rid, a, b in diffs:
        print(f"  run {rid}\n    one-sided: {a}\n    two-sided: {b}")
    for g, v in alt["groups"].items():
        print(
            f"  groups.{g}: n {v['n']} decoupled {v['decoupled']} not_removed {v['not_removed']} "
            f"Wilson [{g3(v['lo'])}, {g3(v['hi'])}]"
        )

    # ------------------------------------------------------------ the rule without each control
    print("\n== without controls (beside the verdict, never deciding it; numbers.without_controls)")
    readings: tuple[tuple[str, str, dict[str, bool]], ...] = (
        ("decided", "drops beyond rank-matched random removal, counting only edits that removed the variable", {}),
        ("raw drops", "drops read raw (not beyond random removal)", dict(raw=True)),
        ("no removal rule", "every edit counted, removed or not", dict(all_edits=True)),
        ("neither", "neither control", dict(raw=True, all_edits=True)),
    )
    group_name = {"scratch": "from scratch", "pretrained": "pretrained"}
    report_parts = []
    for name, words, kw in readings:
        alt = res if not kw else run_claim(**kw)
        print(f"- {name}: verdict {alt['verdict']}" + ("" if not kw else f" (decided: {res['verdict']})"))
        for g, v in alt["groups"].items():
            print(
                f"  - {g}: decoupled k {v['decoupled']}, evaluated n {v['n']}, not_removed {v['not_removed']}, "
                f"Wilson 95% [{g3(v['lo'])}, {g3(v['hi'])}], group verdict {v['verdict']}"
            )
        dec = [x for x in alt["runs"] if x.get("meaningfully_decoupled")]
        print(
            "  - meaningfully decoupled runs: "
            + (", ".join(f"{x['run_id']} ({x['family']} x {x['task']} seed {x['seed']})" for x in dec) or "none")
        )
        ks = "; ".join(f"{group_name[g]} {v['decoupled']}/{v['n']} decoupled" for g, v in alt["groups"].items())
        same = "" if not kw else ("; the same" if alt["verdict"] == res["verdict"] else "; **changed**")
        report_parts.append(f"{words}: {alt['verdict']} ({ks}{same})")
    print("- in the report's form: decided on " + "; ".join(report_parts) + ".")
