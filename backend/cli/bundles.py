"""Results bundles (one portable file a suite; the format: ``backend/bundle.py``).

layerscope export --suite NAME -o FILE [--weights] [--artifacts] [--in-flight] [--allow-partial]   # a suite's results bundle
layerscope import FILE [--replace]                   # load a bundle; rows already present are kept
layerscope report BUNDLE -o docs/RESULTS.md          # the study's claims next to this reproduction's
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend.cli import common as C


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders an export made (innermost first) where they are still empty."""
    for folder in folders:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def export_cmd(
    suite: Annotated[str, typer.Option(help="The suite to export (runs.suite).")],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The bundle file to write (a zip; docs: backend/bundle.py).")
    ],
    weights: Annotated[bool, typer.Option(help="Include the model checkpoints (off: results only).")] = False,
    artifacts: Annotated[
        bool,
        typer.Option(
            "--artifacts",
            help="Include the probe weights and removed directions the results name (safetensors; most of a "
            "measured suite's bytes). Off: the rows naming them travel, the files do not; they are fitted again "
            "on a run's weights (`layerscope runs rebuild-weights RUN_ID`, then `layerscope probe|intervene RUN_ID`).",
        ),
    ] = False,
    note: Annotated[
        str | None,
        typer.Option(
            help="Why the study is partial (kept in the manifest's partial.notes, with earlier exports' notes)."
        ),
    ] = None,
    in_flight: Annotated[
        bool,
        typer.Option(
            "--in-flight",
            help="Include the mid-run training state of the suite's runs still training (about 12 bytes a "
            "parameter each), and the finished pieces of its measurements not stored yet with their runs' weights, "
            "so that the suite, run again where the bundle is imported, resumes them.",
        ),
    ] = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Export even while runs of the suite are being rebuilt (status remeasuring: the results of the "
            "model each replaces deleted, its own not all stored yet); they go without those results. "
            "Refused otherwise.",
        ),
    ] = False,
) -> None:
    """Write a suite's results bundle: runs, behaviour, probes, interventions, patching, profiles
    and a manifest (versions, commit, config hashes, devices, wall time) in one portable file."""
    from backend.bundle_export import RunsBeingRebuilt, being_rebuilt, export_bundle

    if output.is_dir():
        raise C.CliError(
            f"{output} is a folder: -o takes the bundle's file name (e.g. {output / (suite + '.layerscope.zip')})"
        )
    settings = C.settings()
    factory = C.session_factory(settings)
    # the folders -o names are made, and said (a mistyped path is seen at once, not found later)
    made = [] if output.parent.exists() else [p for p in (output.parent, *output.parent.parents) if not p.exists()]
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        with factory() as s:
            manifest = export_bundle(
                s,
                suite,
                output,
                weights=weights,
                artifacts=artifacts,
                store_dir=settings.resolved_store_dir,
                note=note,
                in_flight=in_flight,
                allow_partial=allow_partial,
            )
    except RunsBeingRebuilt as exc:  # refused before the file is opened: nothing written
        _remove_empty(made)
        raise C.CliError(f"{exc}; or pass --allow-partial to export them without their results") from exc
    except BaseException:
        _remove_empty(made)  # a refused export leaves no folders it made
        raise
    n = len(manifest["runs"])
    included, missing = manifest.get("weights_included", 0), manifest.get("weights_missing", 0)
    with_w = (
        ", with weights"
        if weights and not missing
        else f", with weights of {included} of {n} run(s)"
        if weights and included
        else ""
    )
    if artifacts:
        with_w += ", with the probe weights and removed directions"
    if in_flight:
        flying = manifest["in_flight"]
        with_w += f", the training state of {len(flying)} run(s) in flight" + (
            " (" + ", ".join(f"{f['name']} at step {'?' if f['step'] is None else f['step']}" for f in flying) + ")"
            if flying
            else ""
        )
        measuring = manifest["measuring"]
        if measuring:
            with_w += f", the finished pieces of {len(measuring)} measurement(s) in flight with their weights (" + (
                ", ".join(f"{m['name']}'s {m['part']}: {m['pieces']}" for m in measuring) + ")"
            )
    typer.echo(
        f"layerscope: wrote {output} ({n} run(s) of suite {suite!r}{with_w}, {output.stat().st_size / 1e6:.2f} MB)"
        + (f"; made the folder(s) {', '.join(str(m) for m in reversed(made))}" if made else ""),
        err=True,
    )
    if rebuilding := being_rebuilt(manifest["runs"]):
        typer.echo(
            f"layerscope: warning: {len(rebuilding)} run(s) exported while being rebuilt, without all their results "
            f"(--allow-partial): {', '.join(name for _, name in rebuilding)}",
            err=True,
        )
    if weights and missing:
        typer.echo(
            f"layerscope: warning: {missing} of {n} run(s) have no checkpoint in the model store "
            f"({settings.resolved_store_dir}) to include"
            + (" — the bundle holds no weights" if not included else "")
            + " (imported without weights, or trained elsewhere)",
            err=True,
        )


def import_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle written by `layerscope export`.")],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Where a run is stored here with the same config but another training (trained "
            "again, or its weights rebuilt), delete the stored model's results and take the "
            "bundle's run and rows instead of keeping the stored one.",
        ),
    ] = False,
) -> None:
    """Load a results bundle into the results DB (SQLite or PostgreSQL). Rows already present
    are kept, not doubled: importing the same bundle twice changes nothing. Results of two
    trainings of one config are never mixed (--replace takes the bundle's)."""
    from backend.bundle_import import import_bundle

    if not bundle.is_file():
        raise C.CliError(_not_a_file(bundle))
    settings = C.settings()
    factory = C.session_factory(settings)
    with factory() as s:
        out = import_bundle(s, bundle, store_dir=settings.resolved_store_dir, source=bundle.name, replace=replace)
    rows = sum(out["rows_added"].values())
    typer.echo(
        f"layerscope: suite {out['suite']!r}: {out['runs_added']} run(s)"
        + (f" ({out['controls_added']} of them random-init controls)" if out.get("controls_added") else "")
        + f" and {rows} result row(s) added, "
        f"{out['runs_present']} run(s) already present"
        + (f", {out['runs_replaced']} replaced by the bundle's" if out["runs_replaced"] else "")
        + (
            f", the training state of {out['in_flight_restored']} run(s) in flight restored (the same suite resumes them)"
            if out.get("in_flight_restored")
            else ""
        )
        + f", into {C.redact(settings.resolved_db_url)}",
        err=True,
    )
    for state in out["in_flight_states"]:
        typer.echo(in_flight_line(state), err=True)
    for m in out["measuring_states"]:
        typer.echo(measuring_line(m), err=True)
    for line in out["code_missing"]:
        typer.echo(f"layerscope: warning: {line}", err=True)
    if out["runs_conflicting"]:
        typer.echo(import_conflicts_line(out["runs_conflicting"], bundle), err=True)


def measuring_line(m: dict) -> str:
    """One line on a measurement in flight the import restored or left out (and why): an entry of
    ``import_bundle``'s ``measuring_states``."""
    what = f"{m['name'] or m['folder']}'s {m['part'] or 'measurement'} ({m['pieces']} finished pieces)"
    if not m["restored"]:
        return f"layerscope: measuring: not restored: {what}: {m['why_not']}"
    return f"layerscope: measuring: restored {what}: the same suite resumes it at its next piece"


def in_flight_line(state: dict) -> str:
    """One line on a training state in flight the import restored (with the command that resumes
    it) or left out (and why): an entry of ``import_bundle``'s ``in_flight_states``."""
    name = state["name"] or state["config_hash"][:12]
    if not state["restored"]:
        return f"layerscope: in flight: not restored: {name}: {state['why_not']}"
    checked = "size and sha256 checked" if state["checked"] else "not checked (the bundle records no size or sha256)"
    step = f"step {state['step']}" if state["step"] is not None else "step unknown"
    resume = (
        f"resume it with `{state['resume']}`"
        if state["resume"]
        else f"its note (training/{state['config_hash']}.json) records no suite command that makes it again: "
        "run its suite with the settings it was started with to resume it"
    )
    return f"layerscope: in flight: restored {name} ({step}; {checked}): {resume}"


_DIFFERS = {
    "checkpoint_id": "weights",
    "steps": "steps",
    "heldout_acc": "held-out accuracy",
    "loss_curve": "loss curve",
}


def _differs_text(differs: dict) -> str:
    """``steps: 1000 here, 1200 in the bundle; loss curve`` (``bundle_import.training_differences``)."""
    parts = []
    for field, (here, there) in differs.items():
        label = _DIFFERS.get(field, field)
        if field == "checkpoint_id":
            here, there = f"checkpoint {str(here)[:12]}", str(there)[:12]
        here, there = (f"{v:.6g}" if isinstance(v, float) else v for v in (here, there))
        if field == "loss_curve" and here == there:
            parts.append(label)
        else:
            parts.append(f"{label}: {here}{' points' if field == 'loss_curve' else ''} here, {there} in the bundle")
    return "; ".join(parts)


def import_conflicts_line(conflicting: list[dict], bundle: Path) -> str:
    """One line on the runs an import left out: stored here from another training of their config,
    each with what differs."""
    runs = ", ".join(
        c["name"] + (f" (differs in {_differs_text(c['differs'])})" if c.get("differs") else "")
        for c in conflicting[:5]
    ) + (f" and {len(conflicting) - 5} more" if len(conflicting) > 5 else "")
    return (
        f"layerscope: {len(conflicting)} run(s) kept as stored, the bundle's left out: stored here from another "
        f"training of the same config: {runs}; `layerscope import --replace {bundle}` takes the bundle's"
    )


def report_cmd(
    bundle: Annotated[Path, typer.Argument(help="A results bundle (`layerscope export`).")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="The Markdown file to write (default: <bundle name>-results.md in the current folder; "
            "the repository's own pages are written with -o docs/RESULTS.md).",
        ),
    ] = None,
    figures_dir: Annotated[
        Path | None, typer.Option(help="Where the PNGs go (default: <output folder>/figures).")
    ] = None,
    figures: Annotated[bool, typer.Option(help="Export the figures to PNG (plotly + kaleido + Chromium).")] = True,
) -> None:
    """Regenerate the results page from a bundle: each claim of the study next to this
    reproduction's verdict (agrees / disagrees / cannot tell), numbers with intervals, figures."""
    from backend.report import build_report

    if not bundle.is_file():
        raise C.CliError(_not_a_file(bundle))
    if output is None:  # beside where it runs, named by the bundle: never the repository's own pages
        output = Path(f"{bundle.name.removesuffix('.zip').removesuffix('.layerscope')}-results.md")
    out = build_report(bundle, output, figures_dir=figures_dir, figures=figures)
    verdicts = ", ".join(f"{c['id']}: {c['verdict']}" for c in out["claims"])
    typer.echo(f"layerscope: wrote {output} ({verdicts})", err=True)
    if out["figures_error"]:
        typer.echo(f"layerscope: PNG figures skipped: {out['figures_error']}", err=True)


def _not_a_file(path: Path) -> str:
    """Why ``path`` cannot be read as a bundle file: a folder, or nothing there."""
    if path.is_dir():
        return f"{path}: a folder, not a results bundle (a .layerscope.zip file)"
    return f"{path}: no such file"
