"""docs/RESULTS.md from a results bundle: each claim of the study next to what this
reproduction found.

The bundle is imported into a throwaway SQLite DB and read through the product's own code:
the verdicts and their numbers come from the claims evaluation behind ``GET /api/claims``
(``backend.api.across_seeds.claims`` → ``science.claims.evaluate_claims``, in words by
``backend.claims_text``), the figures from the
dashboard's figure builders, exported to PNG with plotly + kaleido (which drives the
installed Chromium, offline). Without kaleido or a browser the report is written without
figures and says so.

Verdict → statement: supported → **agrees**, contradicted → **disagrees**,
not enough data → **cannot tell**.

This module assembles the page; its parts: ``backend.report_training`` (the bundle and training
sections), ``backend.report_claims`` (a claim's floor, descriptive paragraph and numbers),
``backend.report_figures`` (the figures and their PNG export).
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from backend.report_claims import floor_lines, numbers_lines, trained_cells_paragraph
from backend.report_figures import export_pngs, report_figures
from backend.report_training import (
    budget_lines,
    measurement_version_lines,
    preset_of,
    rebuilt_lines,
    stop_reason_lines,
    training_table,
    version_lines,
)

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


def build_report(
    bundle: Path, output: Path, *, figures_dir: Path | None = None, figures: bool = True
) -> dict[str, Any]:
    """Write the results page for ``bundle`` to ``output`` (Markdown) and its PNGs to
    ``figures_dir`` (default: ``<output folder>/figures``). Returns ``{claims, figures_error}``.

    Raises:
        backend.bundle.BundleError: not a readable bundle.
    """
    from backend.api.across_seeds import claims as claims_of
    from backend.api.queries import RunFilter
    from backend.bundle import read_bundle
    from backend.bundle_import import import_bundle
    from backend.measured_runs import measured_run_ids
    from science.trained import is_trained
    from store.migrate import init_db
    from store.models import Run, row_columns
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
                    {
                        **{c.key: getattr(r, c.key) for c in row_columns(Run)},
                        "trained": is_trained(r.heldout_acc, r.early_stop_acc),  # as the API's run records
                    }
                    for r in s.query(Run).filter(Run.suite == suite).order_by(Run.id)
                ]
                measured = measured_run_ids(s, [r["id"] for r in runs])
                probed = measured_run_ids(s, [r["id"] for r in runs], kinds=1)
                versions = _measurement_versions(s, [r["id"] for r in runs])
                figs = report_figures(s, suite, runs) if figures else {}
        finally:
            engine.dispose()
    # link only the PNGs written now: none when the export failed (an older PNG there is stale)
    fig_error, written = export_pngs(figs, figures_dir) if figs else ("figures turned off", set())
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
            versions=versions,
        )
    )
    return {"claims": claims, "figures_error": fig_error, "figures_written": sorted(written)}


def _measurement_versions(session: Any, run_ids: list[int]) -> dict[str, dict[int, int]]:
    """``table → {measurement_version: rows}`` over the result rows of ``run_ids``."""
    from sqlalchemy import func, select

    from store.models import InterventionResult, PatchingResult, ProbeResult

    out: dict[str, dict[int, int]] = {}
    for model in (ProbeResult, InterventionResult, PatchingResult):
        q = (
            select(model.measurement_version, func.count())
            .where(model.run_id.in_(run_ids))
            .group_by(model.measurement_version)
        )
        out[model.__tablename__] = {int(v): int(n) for v, n in session.execute(q)}
    return out


def _relative(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


def _bundle_section(
    manifest: dict[str, Any],
    every_run: list[dict[str, Any]],
    measured: set[Any],
    claims: list[dict[str, Any]],
    bundle_name: str,
    output_name: str,
    preset: dict[str, Any] | None,
    versions: dict[str, dict[int, int]] | None = None,
) -> list[str]:
    """The page's title, "The bundle" (runs stored / trained / measured, where and with what it
    was made, its notes) and the summary of the verdicts."""
    from science.trained import is_trained

    runs = [r for r in every_run if not r.get("control")]  # controls are counted apart
    n_trained = sum(is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in runs)
    n_measured = sum(r["id"] in measured for r in runs)
    n_both = sum(r["id"] in measured and is_trained(r.get("heldout_acc"), r.get("early_stop_acc")) for r in runs)
    expected = preset["runs"] if preset else None
    stored = f"{len(runs)} stored" + (f" of the preset's {expected}" if expected else "")
    if expected and len(runs) < expected:
        # a run whose training state travels in the bundle (export --in-flight) has started
        flying = min(len(manifest.get("in_flight") or []), expected - len(runs))
        never = expected - len(runs) - flying
        stored += (
            " ("
            + ", ".join(
                x for x in (f"{flying} in flight" if flying else "", f"{never} never started" if never else "") if x
            )
            + ")"
        )
    counts: defaultdict[str, int] = defaultdict(int)
    for c in claims:
        counts[AGREEMENT.get(c["verdict"], c["verdict"])] += 1
    return [
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
        *(version_lines(manifest)),
        f"- exported {manifest.get('created_at')}",
        *_notes_lines(manifest),
        "- result rows: " + ", ".join(f"{k} {v['rows']}" for k, v in (manifest.get("tables") or {}).items()),
        *measurement_version_lines(versions or {}),
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
    ]


def _notes_lines(manifest: dict[str, Any]) -> list[str]:
    """A partial study's progress with the notes of its exports, else the notes alone (or nothing)."""
    p = manifest.get("partial")
    if p and "runs_remaining" in p and "preset_runs" in p:
        notes = [*([p["why"]] if p.get("why") else []), *p.get("notes", [])]
        head = f"- partial: {p['runs_measured']} of the preset's {p['preset_runs']} runs measured, {p['runs_remaining']} remain"
        return [f"{head}; the notes of its exports:" if notes else f"{head}.", *(f"  - {n}" for n in notes)]
    if manifest.get("notes"):
        return ["- the notes of its exports:", *(f"  - {n}" for n in manifest["notes"])]
    return []


def _training_section(
    every_run: list[dict[str, Any]], measured: set[Any], probed: AbstractSet[Any], preset: dict[str, Any] | None
) -> list[str]:
    """ "## Training": what counts as trained and measured, the budget, why training stopped, the
    table of cells and the runs rebuilt."""
    runs = [r for r in every_run if not r.get("control")]  # controls are counted apart
    return [
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
        *training_table(runs, measured, preset, probed),
        "",
        *((rb + [""]) if (rb := rebuilt_lines(runs)) else []),
    ]


def _claim_section(c: dict[str, Any], fig_rel: str, fig_error: str | None, written: set[str] | None) -> list[str]:
    """One claim: what the study says, this reproduction's verdict with its floor, the
    descriptive paragraph, its numbers and its figures (``written``: as in :func:`_markdown`)."""
    agreement = AGREEMENT.get(c["verdict"], c["verdict"])
    lines = [
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
    numbers.pop("without_controls", None)
    numbers.pop("stacked_rnns", None)
    described = numbers.pop("trained_cells", None)
    if described is not None:
        lines += trained_cells_paragraph(described, conv1d=c.get("id") == 5)
    nums = numbers_lines(numbers)
    if nums:
        lines += ["Numbers:", "", *nums, ""]
    for name in FIGURES.get(c["id"], []):
        if written is None and not fig_error or written is not None and name in written:
            lines += [f"![{name.removesuffix('.png')}]({fig_rel}/{name})", ""]
        elif written is not None:
            lines += [f"_Figure `{name}` not rendered: {fig_error}._", ""]
    return lines


def _markdown(
    manifest: dict[str, Any],
    runs: list[dict[str, Any]],
    measured: set[Any],
    claims: list[dict[str, Any]],
    fig_rel: str,
    fig_error: str | None,
    bundle_name: str,
    probed: AbstractSet[Any] = frozenset(),
    written: set[str] | None = None,
    output_name: str = "docs/RESULTS.md",
    versions: dict[str, dict[int, int]] | None = None,
) -> str:
    """The page. ``written``: the PNGs that exist (linked); a figure asked for and not written reads
    "not rendered" in its place. None: figures were turned off (no figure lines). ``versions``:
    ``table → {measurement_version: rows}`` (a line, a warning when mixed)."""
    preset = preset_of(manifest["suite"], runs, manifest.get("suite_params"))
    lines = [
        *_bundle_section(manifest, runs, measured, claims, bundle_name, output_name, preset, versions or {}),
        *_training_section(runs, measured, probed, preset),
    ]
    if fig_error:
        lines += [
            f"_Figures: not exported ({fig_error}); install the `report` extra (kaleido) and Chromium to get them._",
            "",
        ]
    for c in claims:
        lines += _claim_section(c, fig_rel, fig_error, written)
    return "\n".join(lines).rstrip() + "\n"
