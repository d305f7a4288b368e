"""Independent recomputation of claim 3 (S3 groups with Parity, not with Dyck) from a results bundle
alone (stdlib zipfile/json + numpy/scipy); it does not import the project. Written from
docs/SCIENCE.md (#profiles, #profile-distance, #controls, #plateau, #claims, #trained), not from the
claim code. Usage:

    python checks/claim3_reference.py [BUNDLE] [--any-revision]

(default examples/paper-steps.layerscope.zip). It prints the verdict and, in the report's wording,
each cell short of seeds and each trained cell's class, per-seed split and late concentration with
its t-interval — the lines tests/test_claim_references.py finds in docs/RESULTS-<suite>.md — and,
per family whose S3, Parity and Dyck cells have their seeds, the profile distances on the
21-point interpolated grid (the claim's) and on the native layer grid (for comparison only).
``--any-revision`` counts a plateau of any revision of the rule as final (the reading before
revision 3, 2026-12-06), which reproduces the verdict and distances printed before then.

Definitions (docs/SCIENCE.md): against the random-init control the learned gain g(ℓ) = acc(ℓ) −
ctrl(ℓ) of the same seed, floor 0, at depths (ℓ+1)/n with emb at 0; a cell's curve is the seed mean
of g over its trained seeds; normalised curve ŷ = clip(g / max g, 0, 1); profile distance = RMS of
ŷ_a − ŷ_b over 21 equally spaced depths 0..1 after linear interpolation; class and late
concentration as in checks/claim1_reference.py (#profiles, #controls).
"""

import json
import sys
import zipfile
from collections import defaultdict

import numpy as np
from scipy import stats

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
BUNDLE = ARGS[0] if ARGS else "examples/paper-steps.layerscope.zip"
ANY_REVISION = "--any-revision" in sys.argv
L = 40
MIN_SEEDS = 3
MATCH = 0.75
FAMILIES = ("transformer", "mamba", "mamba2", "lstm", "gru")
TASKS = ("parity", "s3", "dyck")
GRID = np.linspace(0.0, 1.0, 21)


def g2(x):
    return f"{x:.2f}".replace("-0.00", "0.00")


with zipfile.ZipFile(BUNDLE) as z:
    runs = json.loads(z.read("tables/runs.json"))
    probes = json.loads(z.read("tables/probe_results.json"))

acc: defaultdict[int, dict[int, float]] = defaultdict(dict)  # run -> layer -> probe accuracy
for p in probes:
    if p["eval_length"] == L:
        acc[p["run_id"]][p["layer"]] = p["accuracy"]


def is_trained(r):
    crit = 0.99 if r.get("early_stop_acc") is None else r["early_stop_acc"]
    return r.get("heldout_acc") is not None and r["heldout_acc"] >= crit


def final_plateau(r):
    return r.get("stop_reason") == "plateau" and (
        ANY_REVISION or (r.get("train_config") or {}).get("plateau_revision") == 3
    )


cells, controls = defaultdict(list), {}
for r in runs:
    if r.get("pretrained") or r["family"] not in FAMILIES:
        continue
    if r.get("control") == "init":
        controls[(r["task"], r["family"], r["seed"])] = r
    elif r.get("control") is None:
        cells[(r["task"], r["family"])].append(r)


def not_learned(rs):
    untrained = [r for r in rs if not is_trained(r)]
    return (
        len(rs) >= MIN_SEEDS
        and untrained
        and len(rs) - len(untrained) < MIN_SEEDS
        and all(map(final_plateau, untrained))
    )


def curve_of(run_id, n):
    c = acc.get(run_id, {})
    return np.array([c[layer] for layer in range(-1, n)]) if all(layer in c for layer in range(-1, n)) else None


def late_conc(c, f):
    den = c[-1] - max(f, c[0])
    return None if den < 0.02 else float((c[-1] - c[-2]) / den)


def klass(c, f, margin, n):
    if c.max() - f < margin:
        return "not above control"
    top = c.max() - f
    f95 = next(i - 1 for i in range(len(c)) if c[i] - f >= 0.95 * top - 1e-12)
    if (f95 + 1) / n <= 0.5:
        return "early"
    lc = late_conc(c, f)
    return "late" if lc is not None and lc >= 0.5 else "gradual"


def summary(task, fam):
    rs = sorted((r for r in cells[(task, fam)] if is_trained(r)), key=lambda r: r["seed"])
    if not rs:
        return None
    n = rs[0]["n_layers"]
    gains, ctls = [], []
    for r in rs:
        c, ctl = curve_of(r["id"], n), controls.get((task, fam, r["seed"]))
        k = curve_of(ctl["id"], n) if ctl else None
        if c is not None and k is not None:
            gains.append(c - k)
            ctls.append(k)
    ks = np.array(ctls)
    margin = max(0.02, 3 * ks.std(axis=0, ddof=1).max()) if len(ks) >= 2 else 0.05
    mean = np.mean(gains, axis=0)
    lcs = [x for x in (late_conc(g, 0.0) for g in gains) if x is not None]
    lc = None
    if len(lcs) >= 2:
        m = float(np.mean(lcs))
        h = float(stats.t.ppf(0.975, len(lcs) - 1)) * float(stats.sem(lcs))
        lc = (m, m - h, m + h, len(lcs))
    return dict(
        mean=mean, n=n, cls=klass(mean, 0.0, margin, n), seed_cls=[klass(g, 0.0, margin, n) for g in gains], lc=lc
    )


def normalised(c):
    top = c.max()
    return np.zeros_like(c) if top <= 1e-12 else np.clip(c / top, 0.0, 1.0)


def distance(a, b, grid=True):
    xa = (np.arange(-1, len(a) - 1) + 1) / (len(a) - 1)
    xb = (np.arange(-1, len(b) - 1) + 1) / (len(b) - 1)
    ya, yb = normalised(a), normalised(b)
    if grid:
        ya, yb = np.interp(GRID, xa, ya), np.interp(GRID, xb, yb)
    return float(np.sqrt(np.mean((ya - yb) ** 2)))


short, untestable, S = [], [], {}
for task in TASKS:
    for fam in FAMILIES:
        rs = cells[(task, fam)]
        if rs and not_learned(rs):
            untestable.append((task, fam))
            continue
        k = sum(map(is_trained, rs))
        if k < MIN_SEEDS:
            short.append((task, fam, k))
        if k:
            S[(task, fam)] = summary(task, fam)

placed = [
    f for f in FAMILIES if all((t, f) not in untestable and (t, f) not in {(a, b) for a, b, _ in short} for t in TASKS)
]
rows = []
for f in placed:
    s3, par, dy = S[("s3", f)]["mean"], S[("parity", f)]["mean"], S[("dyck", f)]["mean"]
    rows.append(
        dict(
            family=f,
            d_par=distance(s3, par),
            d_dyck=distance(s3, dy),
            d_par_native=distance(s3, par, grid=False),
            d_dyck_native=distance(s3, dy, grid=False),
            same=S[("s3", f)]["cls"] == S[("parity", f)]["cls"],
        )
    )
if short or not rows:
    verdict = "not enough data"
else:
    share = np.mean([r["d_par"] < r["d_dyck"] for r in rows])
    verdict = "supported" if share >= MATCH else "not supported (share below 75%)"

print(f"claim 3 verdict: {verdict}")
for task, fam, k in short:
    print(f"short: {fam} × {task}: {k} of {MIN_SEEDS} trained seeds")
for task, fam in untestable:
    print(f"untestable: {fam} × {task}: not learned")
for task in ("parity", "s3", "dyck"):
    for fam in FAMILIES:
        s = S.get((task, fam))
        if s is None:
            continue
        counts = sorted((c, s["seed_cls"].count(c)) for c in set(s["seed_cls"]))
        split = f"class {s['cls']} (seeds: " + ", ".join(f"{k} {c}" for c, k in counts) + ")"
        if s["seed_cls"].count(s["cls"]) * 2 < len(s["seed_cls"]):
            split += " — most seeds differ"
        lc = s["lc"]
        lc_text = f"late concentration {g2(lc[0])} [{g2(lc[1])}, {g2(lc[2])}], n = {lc[3]}" if lc else "–"
        print(f"cell: {fam} × {task}: {split}, {lc_text}")
for r in rows:
    print(
        f"family {r['family']}; d_s3_parity {r['d_par']:.3g}; d_s3_dyck {r['d_dyck']:.3g}; "
        f"closer_to_parity {r['d_par'] < r['d_dyck']}; native grid: {r['d_par_native']:.3f} / {r['d_dyck_native']:.3f}"
    )
if len(rows) >= 2:
    gaps = [r["d_dyck"] - r["d_par"] for r in rows]
    m = float(np.mean(gaps))
    h = float(stats.t.ppf(0.975, len(gaps) - 1)) * float(stats.sem(gaps))
    print(f"gap_dyck_minus_parity: {m:.3g} [95% CI {m - h:.3g}, {m + h:.3g}], n = {len(gaps)}")
    print(f"same_class_as_parity: {sum(r['same'] for r in rows)}")
