"""Probe versus causal: per run, a layer × measure heatmap (probe accuracy and refit accuracy
in one panel, the behavioural drop of each intervention and Conv1D removal in the other) with
the best-probe layer and each intervention's most-damaging layer marked; and a cross-run
summary of where the two decouple."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures.captions import add_caption, mixed_settings
from dashboard.figures.causal_controls import (
    NEAR_WORST_TOL_PP,
    not_selective,
    random_text,
    rank_share,
    rank_text,
    tied_worst,
)
from dashboard.figures.common import (
    TraceBatch,
    base_layout,
    empty_figure,
    esc,
    finite,
    note_missing,
)
from dashboard.theme import (
    FAMILIES,
    METHODS,
    TASKS,
    depth,
    family_label,
    layer_name,
    method_label,
    ordered,
    task_label,
)
from science.claims import beyond_random
from science.profiles import NEAR_BEST_TOL

# the settings that must agree for one heatmap to compare its cells
PROBE_SETTINGS = (
    ("config_hash", "probe configuration"),
    ("n_train", "probe training sequences"),
    ("n_test", "probe test sequences"),
)
EDIT_SETTINGS = (
    ("config_hash", "edit configuration"),
    ("n_sequences", "edit evaluation sequences"),
    ("n_fit_sequences", "edit fit sequences"),
)
# across runs, counts only: a follow-up job's config_hash includes its run id
EDIT_SETTINGS_ACROSS_RUNS = EDIT_SETTINGS[1:]

PROBE_DIRECTION_METHODS = ("project_out", "inlp", "leace")
# drops read raw even where a random control is stored (docs/SCIENCE.md#random-removal)
READ_RAW_METHODS = ("mean",)


def probe_causal_table(
    probes: Sequence[dict], interventions: Sequence[dict], *, eval_length: int | None = None, d_model: int | None = None
) -> list[dict[str, Any]]:
    """Tidy rows ``{layer, layer_name, measure, kind, value, unit, p_holm, significant}``:
    the data behind the heatmap (and its CSV). A drop's ``value`` is read beyond its rank-matched
    random removal where stored, mean ablation's raw (``science.claims.beyond_random``: ``delta_pp − random_delta_pp``;
    ``delta_raw_pp``, ``random_delta_pp/lo/hi``, ``random_draws`` kept beside it); ``rank_share``
    = ``rank_removed / d_model`` and ``not_selective`` (INLP over half the width) when known."""
    rows: list[dict[str, Any]] = []
    for p in probes:
        if eval_length is not None and int(p["eval_length"]) != int(eval_length):
            continue
        rows.append(
            {
                "layer": int(p["layer"]),
                "layer_name": layer_name(int(p["layer"])),
                "measure": "probe",
                "kind": "accuracy",
                "value": p["accuracy"],
                "unit": "accuracy",
                "baseline": p.get("majority_baseline"),
                "p_holm": None,
                "significant": None,
            }
        )
    for r in interventions:
        if eval_length is not None and int(r["eval_length"]) != int(eval_length):
            continue
        m = r["method"]
        common = {
            "layer": int(r["layer"]),
            "layer_name": layer_name(int(r["layer"])),
            "p_holm": r.get("p_holm"),
            "significant": r.get("significant"),
        }
        # mean ablation removes the whole width: its stored random removal is mean ablation
        # itself (one draw of D directions), so it reads raw, as the ceiling
        br = r if m in READ_RAW_METHODS else beyond_random(r)
        rows.append(
            {
                **common,
                "measure": f"drop:{m}",
                "kind": "drop",
                "value": br["delta_pp"],
                "unit": "pp",
                "baseline": None,
                "delta_raw_pp": r.get("delta_pp"),
                "beyond_random": br.get("delta_raw_pp") is not None,
                **{
                    k: r.get(k)
                    for k in ("random_delta_pp", "random_delta_lo", "random_delta_hi", "random_draws", "rank_removed")
                },
                "rank_share": rank_share(r, d_model),
                "not_selective": not_selective(r, d_model),
            }
        )
        if m in PROBE_DIRECTION_METHODS and finite(r.get("refit_acc")) and finite(r.get("refit_majority")):
            from science.claims import edit_removed

            rows[-1]["removed"] = edit_removed(r)  # claim 4: a drop counts only where the edit removed it
        if m != "conv1d_removal" and finite(r.get("refit_acc")):
            rows.append(
                {
                    **common,
                    "measure": f"refit:{m}",
                    "kind": "accuracy",
                    "value": r["refit_acc"],
                    "unit": "accuracy",
                    "baseline": r.get("refit_majority"),
                    "p_holm": None,
                    "significant": None,
                }
            )
    return rows


def best_probe_layer(probes: Sequence[dict], eval_length: int | None = None) -> int | None:
    ps = [p for p in probes if eval_length is None or int(p["eval_length"]) == int(eval_length)]
    ps = [p for p in ps if int(p["layer"]) >= -1 and finite(p.get("accuracy"))]
    if not ps:
        return None
    best = max(p["accuracy"] for p in ps)
    # ties → the earliest layer reaching the best accuracy
    return min(int(p["layer"]) for p in ps if p["accuracy"] >= best - 1e-12)


def near_best_probe_layers(probes: Sequence[dict], eval_length: int | None = None) -> list[int]:
    """Layers whose probe accuracy is within ``science.profiles.NEAR_BEST_TOL`` of the best (claim 4's
    near-best rule): more than one = a tie, the argmax decided by noise."""
    ps = [
        p
        for p in probes
        if (eval_length is None or int(p["eval_length"]) == int(eval_length))
        and int(p["layer"]) >= -1
        and finite(p.get("accuracy"))
    ]
    if not ps:
        return []
    top = max(float(p["accuracy"]) for p in ps)
    # as science.profiles.near_best_layers, which needs a gap-free curve (a run's heatmap may have gaps)
    return sorted(int(p["layer"]) for p in ps if float(p["accuracy"]) >= top - NEAR_BEST_TOL - 1e-12)


def most_damaging_layer(interventions: Sequence[dict], method: str, eval_length: int | None = None) -> int | None:
    """The layer where ``method`` costs most, among real drops (Δ < 0) that are significant after
    Holm (or whose significance is not stored); None when no drop qualifies: a "+0.0 n.s." cell
    is never called the most damaging."""
    rs = [
        r
        for r in interventions
        if r["method"] == method
        and int(r["layer"]) >= -1
        and (eval_length is None or int(r["eval_length"]) == int(eval_length))
        and finite(r.get("delta_pp"))
        and r["delta_pp"] < 0
        and r.get("significant") is not False
    ]
    if not rs:
        return None
    return int(min(rs, key=lambda r: (r["delta_pp"], r["layer"]))["layer"])


def _measure_label(measure: str) -> str:
    """A heatmap column's label, escaped (the method name comes from stored rows)."""
    if measure == "probe":
        return "probe"
    kind, m = measure.split(":", 1)
    return ("refit · " if kind == "refit" else "Δ ") + esc(method_label(m))


def probe_causal_heatmap(
    probes: Sequence[dict],
    interventions: Sequence[dict],
    *,
    eval_length: int | None = None,
    n_layers: int | None = None,
    title: str | None = None,
    d_model: int | None = None,
    caption: str | None = None,
) -> go.Figure:
    """``probes``: ``/api/runs/{id}/probes`` rows; ``interventions``: ``/api/runs/{id}/interventions``
    rows. The causal panel reads each drop beyond its rank-matched random removal where stored
    (hover: the raw Δ and the random interval); ``d_model`` (the run's width) gives each edit's
    rank as a share of it and flags an INLP over half the width "n.sel." (not selective). ★ marks
    every near-best probe layer, ▼ every layer within ``NEAR_WORST_TOL_PP`` of an edit's most
    damaging one (a tie). ``caption``: what the figure shows (run, suite), under the plot, with the
    settings the rows were measured with and a notice when they differ."""
    table = probe_causal_table(probes, interventions, eval_length=eval_length, d_model=d_model)
    if not table:
        return empty_figure("No probe or intervention results for this run at this length")
    layers = sorted({r["layer"] for r in table if r["layer"] >= -1})
    if n_layers:
        layers = sorted(set(layers) | set(range(-1, n_layers)))
    if any(r["layer"] == -2 for r in table):
        layers = layers + [-2]  # "all layers" (Conv1D removed everywhere) on top
    present = {r["measure"] for r in table}
    n_missing = sum(not finite(r["value"]) for r in table)
    methods = ordered([m.split(":", 1)[1] for m in present if ":" in m], METHODS)
    acc_cols = ["probe"] * ("probe" in present) + [f"refit:{m}" for m in methods if f"refit:{m}" in present]
    drop_cols = [f"drop:{m}" for m in methods if f"drop:{m}" in present]
    cell = {(r["layer"], r["measure"]): r for r in table}
    ylabels = [("all layers" if ly == -2 else layer_name(ly)) for ly in layers]

    probe_pts = [
        {"layer": r["layer"], "accuracy": r["value"], "eval_length": 0} for r in table if r["measure"] == "probe"
    ]
    best = best_probe_layer(probe_pts)
    near = near_best_probe_layers(probe_pts)  # ties: every layer within the near-best tolerance
    damaging: dict[str, int] = {}
    damaging_ties: dict[str, list[int]] = {}
    for c in drop_cols:
        m = c.split(":", 1)[1]
        eligible = [
            {
                "method": m,
                "layer": r["layer"],
                "delta_pp": r["value"],
                "eval_length": 0,
                "significant": r.get("significant"),
            }
            for r in table
            if r["measure"] == c and r["layer"] >= -1 and r.get("removed") is not False
        ]
        ly = most_damaging_layer(eligible, m)
        if ly is not None:
            damaging[c] = ly
            qualifying = {
                e["layer"]: e["delta_pp"]
                for e in eligible
                if finite(e["delta_pp"]) and e["delta_pp"] < 0 and e.get("significant") is not False
            }
            damaging_ties[c] = tied_worst(qualifying, ly)  # ties marked on the causal side as on the probe side

    def mark(ly, c) -> str:
        if c == "probe" and (ly == best or ly in near):
            return "★ "
        if ly in damaging_ties.get(c, ()):
            return "▼ "
        return ""

    def grid(cols, fmt):
        z, txt, cd = [], [], []
        for ly in layers:
            zr, tr, cr = [], [], []
            for c in cols:
                r = cell.get((ly, c))
                v = r["value"] if r else None
                zr.append(v if finite(v) else None)
                tr.append(mark(ly, c) + fmt(r) if r and finite(v) else "")
                sig = (
                    "n.s."
                    if r and r.get("significant") is False
                    else (f"p_holm = {r['p_holm']:.3g}" if r and finite(r.get("p_holm")) else "")
                )
                if r and r.get("removed") is False:
                    sig += " · not removed: the refit probe still reads the variable"
                extra = "<br>".join(
                    t
                    for t in (
                        random_text(r) if r and r.get("beyond_random") else "",
                        rank_text(r, d_model) if r and r["kind"] == "drop" else "",
                    )
                    if t
                )
                cr.append([_measure_label(c), fmt(r) if r and finite(v) else "–", sig, extra])
            z.append(zr)
            txt.append(tr)
            cd.append(cr)
        return z, txt, cd

    widths = [max(len(acc_cols), 1), max(len(drop_cols), 1)]
    n_beyond = sum(bool(r.get("beyond_random")) for r in table if r["kind"] == "drop")
    n_drops = sum(r["kind"] == "drop" for r in table)
    effect = (
        "behavioural effect — Δ accuracy beyond random removal, where stored (pp)"
        if n_beyond
        else "behavioural effect — Δ accuracy (pp)"
    )
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.12,
        column_widths=[w / sum(widths) for w in widths],
        subplot_titles=["decodability — accuracy", effect],
    )
    batch = TraceBatch(fig)
    if acc_cols:
        z, txt, cd = grid(acc_cols, lambda r: f"{100 * r['value']:.1f}%")
        batch.add(
            go.Heatmap(
                z=z,
                x=[_measure_label(c) for c in acc_cols],
                y=ylabels,
                text=txt,
                texttemplate="%{text}",
                customdata=cd,
                colorscale="Blues",
                zmin=0,
                zmax=1,
                xgap=2,
                ygap=2,
                hoverongaps=False,
                colorbar={
                    "title": {"text": "accuracy"},
                    "x": fig.layout.xaxis.domain[1] + 0.008,
                    "thickness": 12,
                    "tickformat": ".0%",
                    "len": 0.9,
                },
                hovertemplate="layer %{y} · %{customdata[0]}<br>%{customdata[1]}<extra></extra>",
                meta={"kind": "heatmap", "panel": "accuracy", "columns": acc_cols},
            ),
            row=1,
            col=1,
        )
    if drop_cols:
        # the colour range follows the targeted edits; mean ablation (a ceiling) may saturate
        vals = [
            abs(r["value"]) for r in table if r["kind"] == "drop" and finite(r["value"]) and r["measure"] != "drop:mean"
        ]
        vmax = (
            max(vals + [1.0])
            if vals
            else max([abs(r["value"]) for r in table if r["kind"] == "drop" and finite(r["value"])] + [1.0])
        )

        def fmt_drop(r):
            s = f"{r['value']:+.1f}"
            if r.get("significant") is False:
                s += " n.s."
            if r.get("removed") is False:
                s += " n.r."  # not removed (claim 4): the hover says so
            if r.get("not_selective"):
                s += " n.sel."  # INLP over half the width: the hover gives the share
            return s.replace("-", "−")

        z, txt, cd = grid(drop_cols, fmt_drop)
        batch.add(
            go.Heatmap(
                z=z,
                x=[_measure_label(c) for c in drop_cols],
                y=ylabels,
                text=txt,
                texttemplate="%{text}",
                customdata=cd,
                colorscale="RdBu",
                zmid=0,
                zmin=-vmax,
                zmax=vmax,
                xgap=2,
                ygap=2,
                hoverongaps=False,
                colorbar={
                    "title": {"text": "Δ pp<br>beyond<br>random" if n_beyond else "Δ pp"},
                    "x": 1.01,
                    "thickness": 12,
                    "len": 0.9,
                },
                hovertemplate=(
                    "layer %{y} · %{customdata[0]}<br>Δ accuracy "
                    + ("beyond random removal " if n_beyond else "")
                    + "%{customdata[1]} pp<br>%{customdata[2]}<br>%{customdata[3]}<extra></extra>"
                ),
                meta={"kind": "heatmap", "panel": "drop", "columns": drop_cols},
            ),
            row=1,
            col=2,
        )
    # ★ best-probe layer and ▼ each intervention's most-damaging layer: outlined cells (+ legend keys)
    if best is not None and acc_cols:
        tied = sorted(set(near) | {best})
        for ly in tied:
            yi = layers.index(ly)
            fig.add_shape(
                type="rect",
                x0=-0.5,
                x1=0.5,
                y0=yi - 0.5,
                y1=yi + 0.5,
                xref="x",
                yref="y",
                line={"color": "#E69F00", "width": 3},
            )
        name = (
            f"★ best-probe layer ({layer_name(best)})"
            if len(tied) == 1
            else f"★ best-probe layers, a tie: {', '.join(layer_name(x) for x in tied)} within {100 * NEAR_BEST_TOL:g} pp"
        )
        batch.add(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=name,
                marker={"symbol": "square-open", "size": 14, "color": "#E69F00", "line": {"width": 3}},
                meta={"kind": "best_probe", "layer": best, "tie": tied if len(tied) > 1 else []},
            ),
            row=1,
            col=1,
        )
    for c, ly in damaging.items():
        for tly in damaging_ties.get(c) or [ly]:
            xi, yi = drop_cols.index(c), layers.index(tly)
            fig.add_shape(
                type="rect",
                x0=xi - 0.5,
                x1=xi + 0.5,
                y0=yi - 0.5,
                y1=yi + 0.5,
                xref="x2",
                yref="y2",
                line={"color": "#111", "width": 2.5},
            )
    if damaging:
        tie_note = (
            f"; every layer within {NEAR_WORST_TOL_PP:g} pp of it, a tie"
            if any(len(v) > 1 for v in damaging_ties.values())
            else ""
        )
        batch.add(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"▼ most-damaging layer of each edit (significant drops only{tie_note})",
                marker={"symbol": "square-open", "size": 14, "color": "#111", "line": {"width": 3}},
                meta={
                    "kind": "most_damaging",
                    "layers": dict(damaging),
                    "ties": {c: v for c, v in damaging_ties.items() if len(v) > 1},
                },
            ),
            row=1,
            col=2,
        )
    batch.flush()
    base_layout(fig, title=esc(title) if title else None, height=max(360, 150 + 58 * len(layers)))
    fig.update_yaxes(title_text="layer", row=1, col=1, categoryorder="array", categoryarray=ylabels, showgrid=False)
    fig.update_xaxes(showgrid=False, tickangle=-25)
    fig.update_layout(
        legend={"y": 1 + 62 / max(200, fig.layout.height - 200), "yanchor": "bottom", "x": 1, "xanchor": "right"},
        margin={"t": 110 if title else 90, "b": 120},
        meta={
            "figure": "probe_causal",
            "best_probe": best,
            "n_layers": len(layers),
            "beyond_random": n_beyond,
            "drops": n_drops,
            "not_selective": sorted({r["layer"] for r in table if r.get("not_selective")}),
        },
    )
    notice = _settings_notice(probes, interventions, eval_length)
    add_caption(fig, heatmap_caption(caption, probes, interventions, eval_length, n_beyond, n_drops), notice=notice)
    return note_missing(fig, n_missing, len(table), "cells")


def _at(rows: Sequence[dict], eval_length: int | None) -> list[dict]:
    return [r for r in rows if eval_length is None or int(r["eval_length"]) == int(eval_length)]


def _settings_notice(probes: Sequence[dict], interventions: Sequence[dict], eval_length: int | None) -> str | None:
    """The mixed-settings notice: probe rows and edit rows are each checked on their own
    settings (a probe and an edit legitimately use different sequence counts)."""
    parts = [
        n
        for n in (
            mixed_settings(_at(probes, eval_length), PROBE_SETTINGS),
            mixed_settings(_at(interventions, eval_length), EDIT_SETTINGS),
        )
        if n
    ]
    if not parts:
        return None
    return " ".join(parts)


def heatmap_caption(
    prefix: str | None,
    probes: Sequence[dict],
    interventions: Sequence[dict],
    eval_length: int | None,
    n_beyond: int,
    n_drops: int,
) -> str:
    """What the heatmap shows: the caller's ``prefix`` (run, suite), the length, the probe's and
    the edits' sequence counts, and how many drops are read beyond random removal."""
    ps, es = _at(probes, eval_length), _at(interventions, eval_length)

    def counts(rows, key):
        vals = sorted({int(r[key]) for r in rows if finite(r.get(key))})
        return "/".join(str(v) for v in vals) if vals else None

    head = [prefix] if prefix else []
    if eval_length is not None:
        head.append(f"L={int(eval_length)}")
    measured = []
    tr, te = counts(ps, "n_train"), counts(ps, "n_test")
    if tr or te:
        measured.append(f"probe: {tr or '?'} training / {te or '?'} test sequences")
    if ev := counts(es, "n_sequences"):
        fit = counts(es, "n_fit_sequences")
        measured.append(f"edits: {ev} sequences" + (f", fitted on {fit}" if fit else ""))
    if n_drops:
        measured.append(
            f"{n_beyond} of {n_drops} drops read beyond rank-matched random removal"
            if n_beyond
            else "drops raw (no random-removal control stored)"
        )
    return "\n".join(" · ".join(x) for x in (head, measured) if x)


def decoupling_points(
    runs: Sequence[dict],
    probes: Sequence[dict],
    interventions: Sequence[dict],
    *,
    method: str | None = None,
    eval_length: int = 40,
) -> list[dict[str, Any]]:
    """One point per run with a probe curve and an edit, judged by claim 4's rule
    (``science.claims.run_decouplings``: the one definition, so this view and /claims agree).

    ``method`` None = claim 4's choice (the first of LEACE, INLP, project-out present). Each
    point: ``status`` "decoupled" | "not decoupled" | "not removed" (the refit probe still reads
    the variable: the edit says nothing about necessity), ``decoupled`` True/False/None (None =
    not removed), ``best_layer`` and ``near_best_layers`` (a tie when more than one),
    ``damage_layer`` (None when not removed), both on the normalised depth axis too."""
    from science import claims as C

    meta = {int(r["id"]): r for r in runs}
    rows = C.run_decouplings(
        [
            {
                "id": int(r["id"]),
                "task": r["task"],
                "family": r["family"],
                "seed": r.get("seed"),
                "pretrained": r.get("pretrained"),
            }
            for r in runs
        ],
        [p for p in probes if int(p["layer"]) >= -1],
        interventions,
        eval_length=eval_length,
        method=method,
    )
    out = []
    for d in rows:
        run = meta[int(d["run_id"])]
        n = int(run["n_layers"])
        removed = d["status"] == "evaluated"
        dmg = d.get("damaging_layer") if removed else None
        dec = bool(d["meaningfully_decoupled"]) if removed else None
        b = int(d["best_layer"])
        out.append(
            {
                "run_id": int(d["run_id"]),
                "run_name": run.get("name", ""),
                "family": run["family"],
                "task": run["task"],
                "pretrained": run.get("pretrained"),
                "seed": run.get("seed"),
                "trained": run.get("trained"),
                "n_layers": n,
                "method": d["method"],
                "best_layer": b,
                "near_best_layers": [int(x) for x in d["near_best_layers"]],
                "tie": len(d["near_best_layers"]) > 1,
                "damage_layer": None if dmg is None else int(dmg),
                "best_depth": depth(b, n),
                "damage_depth": None if dmg is None else depth(int(dmg), n),
                "status": "not removed" if not removed else ("decoupled" if dec else "not decoupled"),
                "decoupled": dec,
                "margin_pp": d.get("margin_pp"),
                "significant": d.get("significant"),
                "not_removed_layers": d.get("not_removed_layers", []),
            }
        )
    return out


def _layers_text(layers: Sequence[int]) -> str:
    """``L3`` or, for a near-best tie, ``emb–2 (tie)``."""
    ls = sorted(int(x) for x in layers)
    if len(ls) == 1:
        return layer_name(ls[0])
    if ls == list(range(ls[0], ls[-1] + 1)):
        return f"{layer_name(ls[0])}–{layer_name(ls[-1])} (tie)"
    return f"{', '.join(layer_name(x) for x in ls)} (tie)"


def decoupling_summary(points: Sequence[dict[str, Any]], *, method: str | None = None) -> go.Figure:
    """Architecture × task: claim 4's counts per cell — runs decoupled of those whose edit removed
    the variable, and the runs whose edit did not (``not removed``), with the best-probe layers
    (ties named) and the most common most-damaging layer. The wording is /claims' claim 4."""
    if not points:
        return empty_figure("No runs with both probes and interventions for this selection", height=300)
    total = len(points)
    # a point without a status (an older caller) is judged from ``decoupled`` alone
    points = [
        p if p.get("status") else {**p, "status": {True: "decoupled", False: "not decoupled"}.get(p.get("decoupled"))}
        for p in points
    ]
    points = [p for p in points if p.get("best_layer") is not None and p.get("status")]
    if not points:
        return empty_figure(f"No run to place: all {total} have no best-probe layer (no value)", height=300)

    def key(p):
        return p.get("pretrained") or p["family"]

    keys = list(dict.fromkeys(key(p) for p in points))
    fams = [f for f in FAMILIES if f in keys] + sorted(k for k in keys if k not in FAMILIES)
    tasks = ordered([p["task"] for p in points], TASKS)
    z, text, custom = [], [], []
    for fam in fams:
        zr, tr, cr = [], [], []
        for task in tasks:
            pts = [p for p in points if key(p) == fam and p["task"] == task]
            if not pts:
                zr.append(None)
                tr.append("")
                cr.append(["", "", 0, 0, 0, 0])
                continue
            ev = [p for p in pts if p["status"] != "not removed"]
            k = sum(bool(p["decoupled"]) for p in ev)
            nr = len(pts) - len(ev)
            best = esc(
                Counter(_layers_text(p.get("near_best_layers") or [p["best_layer"]]) for p in pts).most_common(1)[0][0]
            )
            dmg_c = Counter(layer_name(int(p["damage_layer"])) for p in ev if p.get("damage_layer") is not None)
            dmg = esc(dmg_c.most_common(1)[0][0]) if dmg_c else "–"
            # coloured by the count, never by a share: "1 of 1 usable" is not "100% decoupled"
            zr.append(k if ev else None)
            line = f"{k} decoupled of {len(ev)} usable · n = {len(pts)}" + (f", {nr} not removed" if nr else "")
            tr.append(f"probe ★ {best}" + (f" · causal ▼ {dmg}" if ev else "") + f"<br>{line}")
            cr.append([best, dmg, k, len(ev), nr, len(pts)])
        z.append(zr)
        text.append(tr)
        custom.append(cr)
    max_n = max((len([p for p in points if key(p) == f and p["task"] == t]) for f in fams for t in tasks), default=1)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[esc(task_label(t)) for t in tasks],
            y=[esc(family_label(f) if f in FAMILIES else f.rstrip("/").split("/")[-1]) for f in fams],
            text=text,
            texttemplate="%{text}",
            customdata=custom,
            colorscale="Cividis",
            zmin=0,
            zmax=max(1, max_n),
            xgap=3,
            ygap=3,
            hoverongaps=False,
            colorbar={"title": {"text": "runs<br>decoupled"}, "tickformat": "d", "dtick": 1, "thickness": 12},
            hovertemplate="<b>%{y} · %{x}</b><br>best-probe layer %{customdata[0]}, most-damaging layer "
            "%{customdata[1]}<br>%{customdata[2]} decoupled of %{customdata[3]} usable runs "
            "(n = %{customdata[5]}); %{customdata[4]} not removed "
            "(the refit probe still reads the variable)<extra></extra>",
            meta={"kind": "decoupling"},
        )
    )
    ev = [p for p in points if p["status"] != "not removed"]
    n_dec = sum(bool(p["decoupled"]) for p in ev)
    n_nr = len(points) - len(ev)
    methods = sorted({p.get("method") for p in points if p.get("method")}) or ([method] if method else [])
    edit = ", ".join(esc(method_label(m)) for m in methods)
    base_layout(
        fig,
        height=max(300, 110 + 70 * len(fams)),
        title=f"{n_dec} of {len(points)} runs decoupled ({len(ev)} usable, {n_nr} not removed) · edit: {edit}",
    )
    fig.update_yaxes(autorange="reversed", showgrid=False, showline=False, ticks="")
    fig.update_xaxes(side="top", showgrid=False, showline=False, ticks="")
    fig.update_layout(
        margin={"t": 90, "l": 110},
        meta={
            "figure": "decoupling",
            "n": len(points),
            "evaluated": len(ev),
            "decoupled": n_dec,
            "not_removed": n_nr,
            "method": methods[0] if len(methods) == 1 else methods,
        },
    )
    return note_missing(fig, total - len(points), total, "runs")
