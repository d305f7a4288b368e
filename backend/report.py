"""docs/RESULTS.md from a results bundle: each claim of the study next to what this
reproduction found.

The bundle is imported into a throwaway SQLite DB and read through the product's own code:
the verdicts and their numbers come from the claims evaluation behind ``GET /api/claims``
(``backend.api.aggregate.claims`` → ``science.claims.evaluate_claims``, in words by
``backend.claims_text``), the figures from the
dashboard's figure builders, exported to PNG with plotly + kaleido (which drives the
installed Chromium, offline). Without kaleido or a browser the report is written without
figures and says so.

Verdict → statement: supported → **agrees**, contradicted → **disagrees**,
not enough data → **cannot tell**.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from layerscope_core.provenance import commit_label

log = logging.getLogger(__name__)

AGREEMENT = {"supported": "agrees", "contradicted": "disagrees", "not enough data": "cannot tell"}

# What the study reports, claim by claim (our words); the claim ids are science.claims'.
STUDY_SAYS = {
    1: "On prefix-update tasks (Parity, S3) the task state of LSTM, GRU, Mamba and Mamba-2 becomes linearly "
    "readable only at the last layer; in the Transformer it builds up gradually over depth.",
    2: "On bounded Dyck the pattern flips: the Transformer's state is readable early, the recurrent models' and "
    "SSMs' gradually.",
    3: "S3 groups with Parity rather than with Dyck: the layer profile follows the task's computational "
    "structure, not whether its operation commutes.",
    4: "The layer where the state is most readable is not always the layer whose removal hurts most "
    "(readable is not the same as necessary).",
    5: "In Mamba, removing the Conv1D hurts S3 more than Parity; on Dyck the effect is not significant.",
    6: "Recurrent models length-generalise (near-perfect beyond the training length); accuracy beyond it ranks "
    "recurrent > SSM > Transformer; Mamba fails Parity at lengths beyond training.",
}

FIGURES = {  # claim id → figure file names (without folder) the claim refers to
    1: ["layer_curves_L40.png", "reversal_late_concentration.png"],
    2: ["layer_curves_L40.png", "reversal_late_concentration.png"],
    3: ["reversal_late_concentration.png"],
    4: [],
    5: [],
    6: ["behaviour_by_length.png"],
}


def _version_lines(manifest: dict[str, Any]) -> list[str]:
    """One line per part of a study made in parts (the manifest's ``parts``), else one line."""

    def line(m: dict[str, Any], prefix: str = "") -> str:
        return (
            f"- {prefix}layerscope {m.get('layerscope')}, commit {commit_label(m) or 'unknown'}; "
            f"torch {m.get('torch')}, transformers {m.get('transformers')}, Python {m.get('python')}"
        )

    parts = manifest.get("parts") or []
    if len(parts) < 2:
        return [line(manifest)]
    return [
        line(
            p,
            f"part {i} ({p.get('runs')} run{'' if p.get('runs') == 1 else 's'} on "
            f"{', '.join(p.get('devices') or ['unknown'])}): ",
        )
        for i, p in enumerate(parts, 1)
    ]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


MAX_LIST = 30


def _inline(entry: dict[str, Any], prefix: str = "") -> str:
    """One list entry of a claim's numbers on one line: scalars, intervals, nested dicts."""
    parts = []
    for key, v in entry.items():
        if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
            if v["mean"] is not None:
                ci = f" [{_fmt(v['lo'])}, {_fmt(v['hi'])}]" if v.get("lo") is not None else ""
                parts.append(f"{prefix}{key} {_fmt(v['mean'])}{ci}")
        elif isinstance(v, dict):
            inner = _inline(v, f"{prefix}{key}.")
            if inner:
                parts.append(inner)
        elif v is not None and not isinstance(v, list):
            parts.append(f"{prefix}{key} {_fmt(v)}")
    return "; ".join(parts)


def _numbers(numbers: dict[str, Any], prefix: str = "") -> list[str]:
    """Flatten a claim's numbers into Markdown bullets; ``{mean, lo, hi, n}`` dicts as intervals."""
    out: list[str] = []
    for key, v in numbers.items():
        name = f"{prefix}{key}"
        if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
            n = f", n = {v['n']}" if v.get("n") is not None else ""
            if v["mean"] is None:
                out.append(f"- {name}: no value{n}")
            else:
                ci = f" [95% CI {_fmt(v['lo'])}, {_fmt(v['hi'])}]" if v.get("lo") is not None else ""
                out.append(f"- {name}: {_fmt(v['mean'])}{ci}{n}")
        elif isinstance(v, dict):
            out.extend(_numbers(v, f"{name}."))
        elif isinstance(v, list):
            if v and all(isinstance(x, dict) for x in v):
                out.append(f"- {name}:")
                out.extend(f"  - {_inline(x)}" for x in v[:MAX_LIST])
                if len(v) > MAX_LIST:
                    out.append(f"  - … {len(v) - MAX_LIST} more (the dashboard's claims page lists them all)")
            else:
                out.append(f"- {name}: {', '.join(_fmt(x) for x in v) or '–'}")
        elif v is not None:
            out.append(f"- {name}: {_fmt(v)}")
    return out


def preset_of(suite: str, runs: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The preset a suite was made from (``backend.study_parts.suite_preset``: the preset whose
    runs the suite's ``runs`` are, else the one it is named after): its name, families, tasks,
    seeds, run count (controls and variants included) and its default training budget."""
    from backend.study_parts import preset_run_count, suite_preset
    from worker.presets import PRESETS

    hashes = [r.get("config_hash") for r in runs or [] if r.get("config_hash")]
    name = suite_preset(suite, hashes)
    p = PRESETS.get(name) if name else None
    if p is None or p.get("pretrained"):
        return None
    from worker.params import SuiteParams
    from worker.presets import expand_suite

    train = p.get("train") or {}
    trained = preset_run_count(suite, hashes) or 0
    total = len(expand_suite(SuiteParams(preset=name)))
    return {
        "name": name,
        "families": list(dict.fromkeys(p["families"])),
        "tasks": list(p["tasks"]),
        "seeds": list(p["seeds"]),
        "runs": trained,
        "controls": total - trained,
        "max_steps": train.get("max_steps"),
        "max_seconds": train.get("max_seconds"),
    }


def floor_lines(claim: dict[str, Any]) -> list[str]:
    """For claims 1–3: which floor decided the verdict, the verdict against the other one beside
    it (and whether it changed), and the fragile classes it reads (docs/SCIENCE.md#controls)."""
    n = claim.get("numbers") or {}
    out = []
    alt = n.get("majority_floor")
    if alt:
        changed = "the same verdict" if alt["verdict"] == claim["verdict"] else f"**changed** from {alt['verdict']}"
        out.append(
            f"**With and without controls**: decided against the random-init controls (each cell's learned "
            f"gain over its seeds' untrained twins): {claim['verdict']}; against the majority rate alone: "
            f"{alt['verdict']} — {changed}."
        )
    elif n.get("floor") == "majority rate":
        out.append("**Floor**: the majority rate (no random-init controls are stored for this suite).")
    if n.get("stacked_rnns"):
        st = n["stacked_rnns"]
        out.append(
            f"**With the stacked LSTM/GRU** (`lstm_stack`, `gru_stack`: no residual stream, as "
            f"`nn.LSTM(num_layers=4)` stacks; docs/SCIENCE.md#stacked-rnns): {st['verdict']}. {st['detail']}"
        )
    if n.get("fragile"):
        out.append(
            "**Fragile**: " + "; ".join(n.get("fragile_cells") or []) + " (of the 81 threshold settings "
            "within the documented margins; docs/SCIENCE.md#class-stability)."
        )
    return [*out, ""] if out else []


def stop_reason_lines(runs: list[dict[str, Any]]) -> list[str]:
    """How the runs' training ended (``stop_reason``), and the cells whose every seed plateaued."""
    reasons: dict[str, int] = defaultdict(int)
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("control"):
            continue
        reasons[r.get("stop_reason") or "not recorded"] += 1
        by_cell[(r["task"], r["family"])].append(r)
    if set(reasons) <= {"not recorded"}:
        return []
    out = [
        "Why training stopped (docs/SCIENCE.md#plateau): "
        + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
        + "."
    ]
    flat = [
        (cell, rs)
        for cell, rs in sorted(by_cell.items())
        if len(rs) >= 3 and all(r.get("stop_reason") == "plateau" for r in rs)
    ]
    for (task, fam), rs in flat:
        best = ", ".join(f"{r.get('best_heldout_acc') or 0:.3f} at step {r.get('best_step')}" for r in rs)
        budget = max(int((r.get("train_config") or {}).get("max_steps") or 0) for r in rs)
        out.append(
            f"- {fam} × {task}: not learned by this architecture at this size within {budget:,} steps "
            f"(every seed plateaued; best held-out accuracy {best})."
        )
    n_ctrl = sum(bool(r.get("control")) for r in runs)
    if n_ctrl:
        out.append(f"{n_ctrl} random-init control run(s) stored beside them (docs/SCIENCE.md#controls).")
    return out


def _limit(seconds: Any, steps: Any) -> str:
    parts = [
        f"{float(seconds):g} s" if seconds is not None else "no time limit",
        f"{int(steps):,} steps" if steps is not None else "no step limit",
    ]
    return " / ".join(parts)


def budget_lines(runs: list[dict[str, Any]], preset: dict[str, Any] | None) -> list[str]:
    """The training budget the runs were given (their train_config) next to the preset's, and how
    many runs ended at it without reaching the early-stop criterion."""
    used: dict[tuple[Any, Any], int] = defaultdict(int)
    for r in runs:
        cfg = r.get("train_config") or {}
        used[(cfg.get("max_seconds"), cfg.get("max_steps"))] += 1
    if not used:
        return []
    if len(used) == 1:
        ((sec, steps),) = used
        line = f"Training budget used: at most {_limit(sec, steps)} per run (every run's train_config)"
    else:
        line = "Training budget used, per run (train_config): " + "; ".join(
            f"{_limit(sec, steps)} ({n} runs)" for (sec, steps), n in sorted(used.items(), key=str)
        )
    if preset is not None:
        line += f"; the preset allows {_limit(preset['max_seconds'], preset['max_steps'])}"
        if any(sec != preset["max_seconds"] or steps != preset["max_steps"] for sec, steps in used):
            line += " (the runs were given a different budget than the preset's)"
    from science.trained import is_trained

    capped = [r for r in runs if r.get("stopped_early") is False]
    n_rebuilt = sum(bool((r.get("made_with") or {}).get("rebuilt_from")) for r in runs)
    if n_rebuilt:
        line += (
            f"; {n_rebuilt} run(s) were rebuilt without the wall-clock cap, within the steps it gave them "
            "where they were first made (their seconds are the rebuild's; listed below the table)"
        )
    out = [line + "."]
    if capped:  # ran to the budget (no early stop); "trained" reads the held-out accuracy at the end
        late = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in capped)
        out.append(
            f"{len(capped)} of {len(runs)} stored runs ran to that budget without stopping early: "
            f"{len(capped) - late} ended below the criterion (untrained), {late} reached it by the end "
            "(trained)."
        )
    return out


def rebuilt_lines(runs: list[dict[str, Any]]) -> list[str]:
    """The runs whose weights were rebuilt (``made_with.rebuilt_from``,
    docs/SCIENCE.md#rebuilding-weights): what each recorded before next to what the rebuild
    gave, one table row per run; [] when none was rebuilt."""
    from science.trained import is_trained
    from science.training import recorded_step_budget

    rebuilt = sorted(
        (r for r in runs if (r.get("made_with") or {}).get("rebuilt_from")),
        key=lambda r: (r["task"], r["family"], r["seed"]),
    )
    if not rebuilt:
        return []

    def acc(a: Any, crit: Any) -> str:
        return "–" if a is None else f"{a:.4f} ({'trained' if is_trained(a, crit) else 'untrained'})"

    lines = [
        f"{len(rebuilt)} run(s) came without weights and had them rebuilt here before they were measured: "
        "their own config, within the steps their wall-clock cap gave them on the machine that made them "
        "(docs/SCIENCE.md#rebuilding-weights). The numbers above are the rebuilt models' (the ones "
        "measured); what each run recorded before:",
        "",
        "| task | family | seed | first made on | step budget | steps: recorded → rebuilt | "
        "seconds: recorded → rebuilt | held-out acc: recorded → rebuilt |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rebuilt:
        was = r["made_with"]["rebuilt_from"]
        crit = r.get("early_stop_acc")
        lines.append(
            f"| {r['task']} | {r['family']} | {r['seed']} | {was.get('made_on') or 'unknown'} | "
            f"{recorded_step_budget(was, r.get('train_config') or {})} | {was.get('steps')} → {r.get('steps')} | {float(was.get('train_seconds') or 0):.0f} → "
            f"{float(r.get('train_seconds') or 0):.0f} on {r.get('made_on') or 'unknown'} | "
            f"{acc(was.get('heldout_acc'), crit)} → {acc(r.get('heldout_acc'), crit)} |"
        )
    return lines


def _training_table(
    runs: list[dict[str, Any]], measured: set[Any], preset: dict[str, Any] | None, probed: set[Any] = frozenset()
) -> list[str]:
    """One row per (task, family): runs stored out of the preset's seeds (cells never started
    included), trained and measured separately."""
    from science.trained import is_trained

    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if not r.get("pretrained"):
            cells[(r["task"], r["family"])].append(r)
    order = [(t, f) for t in preset["tasks"] for f in preset["families"]] if preset else []
    order += sorted(c for c in cells if c not in order)
    n_seeds = len(preset["seeds"]) if preset else None
    lines = [
        "| task | family | runs stored | trained | with probes | measured | median steps | "
        "median train time (s) | held-out acc at the training length (min–max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task, family in order:
        rs = cells.get((task, family), [])
        of = n_seeds if n_seeds is not None else len(rs)
        if not rs:
            lines.append(f"| {task} | {family} | 0/{of}, never started | – | – | – | – | – | – |")
            continue
        trained = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in rs)
        n_meas = sum(r["id"] in measured for r in rs)
        n_probed = sum(r["id"] in probed for r in rs)
        accs = [r["heldout_acc"] for r in rs if r.get("heldout_acc") is not None]
        acc = f"{min(accs):.3f}–{max(accs):.3f}" if accs else "–"
        steps = [r["steps"] for r in rs if r.get("steps") is not None]
        secs = [r["train_seconds"] for r in rs if r.get("train_seconds") is not None]
        med = f"{statistics.median(steps):.0f} | {statistics.median(secs):.0f}" if steps and secs else "– | –"
        lines.append(
            f"| {task} | {family} | {len(rs)}/{of} | {trained}/{of} | {n_probed}/{of} | {n_meas}/{of} | {med} | {acc} |"
        )
    return lines


def _f2(x: float) -> str:
    return f"{x:.2f}".replace("-0.00", "0.00")  # no negative zero in prose


def _iv(v: dict[str, Any]) -> str:
    if v.get("mean") is None:
        return "no value"
    ci = f" [{_f2(v['lo'])}, {_f2(v['hi'])}]" if v.get("lo") is not None else " (one seed: no interval)"
    return f"{_f2(v['mean'])}{ci}, n = {v['n']}"


def trained_cells_paragraph(cells: list[dict[str, Any]], *, conv1d: bool = False) -> list[str]:
    """'What the trained cells show' for a "not enough data" claim: descriptive, not a verdict
    (``conv1d``: claim 5, whose cells are read through the Conv1D removal)."""
    if not cells:
        what = "a Conv1D removal of every layer" if conv1d else "a probe curve"
        return [
            "**What the trained cells show** (descriptive, not a verdict): no cell this claim reads has a "
            f"trained run with {what} at L = 40.",
            "",
        ]
    from dashboard.figures.common import class_with_split  # the class with its per-seed split

    if conv1d:  # claim 5: the Conv1D removal, not the probe curve
        return [
            "**What the trained cells show** (descriptive, not a verdict: too few trained seeds for the rule "
            "above to decide; the share of the gain over chance lost when Conv1D is removed from every layer, "
            "with its 95% t-interval over the n trained runs that have it): "
            + "; ".join(f"{c['family']} × {c['task']}: {_iv(c['drop_rel_chance'])}" for c in cells)
            + ".",
            "",
        ]
    parts = [
        f"{c['family']} × {c['task']}: class {class_with_split(c['profile_class'], c.get('class_votes'))}"
        + (f" (the claim expects {c['expected']})" if c.get("expected") else "")
        + f", late concentration {_iv(c['late_concentration'])}"
        for c in cells
    ]
    return [
        "**What the trained cells show** (descriptive, not a verdict: too few trained seeds for the rule "
        "above to decide; the profile class of the seed-mean probe curve at L = 40, and the late concentration "
        "with its 95% t-interval over the n trained seeds): " + "; ".join(parts) + ".",
        "",
    ]


def _figures(session, suite: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The product's own figures for the report (plotly Figures by file name)."""
    from backend.api.aggregate import curves, profiles
    from backend.api.queries import RunFilter
    from dashboard.figures.behaviour import behaviour_rows, length_generalisation
    from dashboard.figures.curves import layerwise_curves
    from dashboard.figures.reversal import reversal_matrix

    flt = RunFilter(suite=[suite])
    return {
        "layer_curves_L40.png": layerwise_curves(
            curves(session, flt, [40]), x="depth", title="Probe accuracy by depth at L = 40 (mean over seeds, 95% CI)"
        ),
        "reversal_late_concentration.png": reversal_matrix(profiles(session, flt, [40])),
        "behaviour_by_length.png": length_generalisation(behaviour_rows(runs)),
    }


KALEIDO_MISSING = "kaleido is not installed (pip install -e '.[report]')"
CHROME_MISSING = (
    "kaleido found no Chrome or Chromium to render PNGs (install chromium, as `make test` does, "
    "or run plotly_get_chrome)"
)


def write_pngs(figs: dict[str, Any], folder: Path) -> str | None:
    """Write each figure as PNG (plotly + kaleido, 2× scale). Returns None, or why not (also when
    some files were not written)."""
    return _write_pngs(figs, folder)[0]


def _write_pngs(figs: dict[str, Any], folder: Path) -> tuple[str | None, set[str]]:
    """:func:`write_pngs`, and the names of the PNGs written (none when the export failed)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        log.warning("figures not exported: %s", KALEIDO_MISSING)
        return KALEIDO_MISSING, set()
    try:
        import plotly.io as pio

        folder.mkdir(parents=True, exist_ok=True)
        names = list(figs)
        pio.write_images([figs[n] for n in names], [folder / n for n in names], width=1100, height=520, scale=2)
    except Exception as exc:  # noqa: BLE001 - no kaleido or no browser: the report goes on without PNGs
        log.warning("figures not exported: %s", exc)
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        if "kaleido" in first.lower() and "requires" in first.lower():
            return (CHROME_MISSING if "chrome" in first.lower() else KALEIDO_MISSING), set()
        return (f"{type(exc).__name__}: {first}" if first else type(exc).__name__), set()
    written = {n for n in figs if (folder / n).is_file()}
    missing = [n for n in figs if n not in written]
    if missing:
        return f"{len(missing)} of {len(figs)} PNG(s) not written ({', '.join(missing)})", written
    return None, written


def build_report(
    bundle: Path, output: Path, *, figures_dir: Path | None = None, figures: bool = True
) -> dict[str, Any]:
    """Write the results page for ``bundle`` to ``output`` (Markdown) and its PNGs to
    ``figures_dir`` (default: ``<output folder>/figures``). Returns ``{claims, figures_error}``.

    Raises:
        backend.bundle.BundleError: not a readable bundle.
    """
    from backend.api.aggregate import claims as claims_of
    from backend.api.queries import RunFilter
    from backend.bundle import import_bundle, read_bundle
    from backend.measured import measured_run_ids
    from store.migrate import init_db
    from store.models import Run
    from store.session import make_engine, make_sessionmaker

    manifest, _tables = read_bundle(bundle)
    manifest.pop("_weights", None)
    suite = manifest["suite"]
    figures_dir = figures_dir or output.parent / "figures"
    with tempfile.TemporaryDirectory(prefix="layerscope-report-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'report.db'}"
        init_db(url)
        engine = make_engine(url)
        try:
            factory = make_sessionmaker(engine)
            with factory() as s:
                import_bundle(s, bundle)
                claims = claims_of(s, RunFilter(suite=[suite]))
                runs = [
                    {c.key: getattr(r, c.key) for c in Run.__table__.columns}
                    for r in s.query(Run).filter(Run.suite == suite).order_by(Run.id)
                ]
                measured = measured_run_ids(s, [r["id"] for r in runs])
                probed = measured_run_ids(s, [r["id"] for r in runs], kinds=1)
                figs = _figures(s, suite, runs) if figures else {}
        finally:
            engine.dispose()
    # link only the PNGs written now: none when the export failed (an older PNG there is stale)
    fig_error, written = _write_pngs(figs, figures_dir) if figs else ("figures turned off", set())
    rel = _relative(figures_dir, output.parent)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        _markdown(
            manifest,
            runs,
            measured,
            claims,
            rel,
            fig_error,
            str(bundle),
            probed,
            written=written if figs else None,
            output_name=str(output),
        )
    )
    return {"claims": claims, "figures_error": fig_error, "figures_written": sorted(written)}


def _relative(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


def _markdown(
    manifest: dict[str, Any],
    runs: list[dict[str, Any]],
    measured: set[Any],
    claims: list[dict[str, Any]],
    fig_rel: str,
    fig_error: str | None,
    bundle_name: str,
    probed: set[Any] = frozenset(),
    written: set[str] | None = None,
    output_name: str = "docs/RESULTS.md",
) -> str:
    """``written``: the PNGs that exist (linked); a figure asked for and not written reads
    "not rendered" in its place. None: figures were turned off (no figure lines)."""
    from science.trained import is_trained

    preset = preset_of(manifest["suite"], runs)
    every_run, runs = runs, [r for r in runs if not r.get("control")]  # controls are counted apart
    n_trained = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in runs)
    n_measured = sum(r["id"] in measured for r in runs)
    n_both = sum(r["id"] in measured and is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in runs)
    expected = preset["runs"] if preset else None
    stored = f"{len(runs)} stored" + (f" of the preset's {expected}" if expected else "")
    if expected and len(runs) < expected:
        stored += f" ({expected - len(runs)} never started)"
    counts = defaultdict(int)
    for c in claims:
        counts[AGREEMENT.get(c["verdict"], c["verdict"])] += 1
    lines = [
        "# Results: this reproduction, claim by claim",
        "",
        f"Generated by `layerscope report {bundle_name} -o {output_name}` from the results bundle of suite "
        f"`{manifest['suite']}`; do not edit by hand.",
        "",
        "## The bundle",
        "",
        f"- runs: {stored}; {n_trained} trained (held-out accuracy reached the early-stop criterion); "
        f"{n_measured} measured (probe, intervention and patching results all stored), of which {n_both} trained",
        f"- made on: {', '.join(manifest.get('devices') or ['unknown'])}",
        f"- training wall time (sum over runs): {manifest.get('wall_time_s', 0):.0f} s"
        + (
            f"; runs stored between {manifest['made_between'][0]} and {manifest['made_between'][1]}"
            if manifest.get("made_between")
            else ""
        ),
        *(_version_lines(manifest)),
        f"- exported {manifest.get('created_at')}",
        *(
            [
                f"- partial: {p['runs_measured']} of the preset's {p['preset_runs']} runs measured, "
                f"{p['runs_remaining']} remain; the notes of its exports:",
                *(f"  - {n}" for n in [*([p["why"]] if p.get("why") else []), *p.get("notes", [])]),
            ]
            if (p := manifest.get("partial")) and "runs_remaining" in p and "preset_runs" in p
            else ["- the notes of its exports:", *(f"  - {n}" for n in manifest["notes"])]
            if manifest.get("notes")
            else []
        ),
        "- result rows: " + ", ".join(f"{k} {v['rows']}" for k, v in (manifest.get("tables") or {}).items()),
        "",
        f"**Summary**: {counts['agrees']} claim(s) agree, {counts['disagrees']} disagree, "
        f"{counts['cannot tell']} cannot tell.",
        "",
        "How to read it: each claim of the study is followed by this reproduction's verdict from the product's "
        "claims evaluation (the rules are in `science/claims/` and docs/SCIENCE.md); intervals are 95% "
        "t-intervals over seeds (or over families, where the claim pools families). *Agrees* = the verdict "
        "is supported, *disagrees* = contradicted, *cannot tell* = not enough data (too few trained runs, "
        "seeds or measurements for the rule to decide).",
        "",
        "## Training",
        "",
        "A run counts as trained when its held-out token accuracy at the training length reached its early-stop "
        "criterion; runs that did not are kept but no verdict on layer profiles reads them. A run has probes "
        "when its probe results are stored, and is measured when its probe, intervention and patching results "
        "are all stored. Each count is out of the "
        + ('preset\'s seeds per cell; cells with no run read "never started".' if preset else "runs stored."),
        "",
        *budget_lines(runs, preset),
        "",
        *((sr + [""]) if (sr := stop_reason_lines(every_run)) else []),
        *_training_table(runs, measured, preset, probed),
        "",
        *((rb + [""]) if (rb := rebuilt_lines(runs)) else []),
    ]
    if fig_error:
        lines += [
            f"_Figures: not exported ({fig_error}); install the `report` extra (kaleido) and Chromium to get them._",
            "",
        ]
    for c in claims:
        agreement = AGREEMENT.get(c["verdict"], c["verdict"])
        lines += [
            f"## Claim {c['id']}: {c['title']}",
            "",
            f"**The study**: {STUDY_SAYS.get(c['id'], '–')}",
            "",
            f"**This reproduction**: {agreement} (verdict: {c['verdict']}). {c.get('detail', '')}",
            "",
            *floor_lines(c),
        ]
        numbers = dict(c.get("numbers") or {})
        numbers.pop("majority_floor", None)  # said in words above
        numbers.pop("stacked_rnns", None)
        described = numbers.pop("trained_cells", None)
        if described is not None:
            lines += trained_cells_paragraph(described, conv1d=c.get("id") == 5)
        nums = _numbers(numbers)
        if nums:
            lines += ["Numbers:", "", *nums, ""]
        for name in FIGURES.get(c["id"], []):
            if written is None and not fig_error or written is not None and name in written:
                lines += [f"![{name.removesuffix('.png')}]({fig_rel}/{name})", ""]
            elif written is not None:
                lines += [f"_Figure `{name}` not rendered: {fig_error}._", ""]
    return "\n".join(lines).rstrip() + "\n"
