"""``layerscope runs …`` (list, show, tag, note, delete) and ``layerscope suite delete|tag|note|move``.

layerscope runs list [--suite S] [--family F] [--task T] [--seed N] [--trained/--untrained]
                     [--controls exclude|include|only] [--search TEXT] [--json]
layerscope runs show ID [--json]
layerscope runs tag ID TAG... [--remove]      layerscope runs note ID TEXT
layerscope runs delete ID... [--yes]
layerscope runs rebuild-weights ID [--as-suite NAME]   # (rebuild.py)
layerscope suite delete NAME [--export FILE | --no-export] [--yes]
layerscope suite tag NAME TAG... [--remove]   layerscope suite note NAME TEXT
layerscope suite move NAME --to OTHER [--family F] [--task T] [--seed N]
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, cast, get_args

import typer

from backend.api.queries import ControlsMode
from backend.cli import common as C

runs_app = typer.Typer(help="Read, annotate and delete stored runs.", no_args_is_help=True)

ControlsChoice = StrEnum("ControlsChoice", {c: c for c in get_args(ControlsMode)})  # type: ignore[misc]  # members from ControlsMode: an enum made at run time

LIST_COLUMNS = ["id", "suite", "family", "task", "seed", "n_params", "steps", "heldout_acc", "trained", "tags", "name"]


@runs_app.command("list")
def runs_list(
    suite: Annotated[list[str] | None, typer.Option(help="Only these suites (repeat).")] = None,
    family: Annotated[list[str] | None, typer.Option(help="Only these families (repeat).")] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only these tasks (repeat).")] = None,
    seed: Annotated[list[int] | None, typer.Option(help="Only these seeds (repeat).")] = None,
    trained: Annotated[
        bool | None,
        typer.Option(
            "--trained/--untrained",
            help="Only runs that reached their early-stop criterion / only the others (default: all).",
        ),
    ] = None,
    controls: Annotated[
        ControlsChoice,
        typer.Option(
            help="The random-init control runs (the same model at initialisation): left out (what every "
            "verdict reads; the count left out is said), listed beside the runs, or listed alone."
        ),
    ] = ControlsChoice["exclude"],
    search: Annotated[str | None, typer.Option(help="A substring of name, tags, notes, family, task or suite.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (a list of runs, for scripts).")] = False,
) -> None:
    """List stored runs (the filters of GET /api/runs; controls left out unless --controls says)."""
    from backend.api import queries
    from science.trained import is_trained

    def flt(mode: ControlsMode) -> queries.RunFilter:
        return queries.RunFilter(
            suite=suite, family=family, task=task, seed=seed, trained=trained, controls=mode, search=search
        )

    with C.session_factory()() as s:
        queries.require_known_names(task=task, family=family, session=s)  # a typo is an error, not "0 run(s)"
        queries.require_suites(s, suite)
        items, _ = queries.list_runs(s, flt(cast(ControlsMode, controls.value)), None)  # a ControlsMode value
        # the count left out is said on the text view only (the JSON list is for scripts)
        hidden = queries.list_runs(s, flt("only"), 0)[1] if controls == ControlsChoice["exclude"] and not as_json else 0
    for r in items:
        r["trained"] = bool(is_trained(r["heldout_acc"], r["early_stop_acc"]))
    if as_json:
        C.echo_json(items)
        return
    C.echo_table(items, LIST_COLUMNS)
    left_out = f" ({hidden} random-init control(s) matching left out: --controls include)" if hidden else ""
    typer.echo(f"layerscope: {len(items)} run(s){left_out}", err=True)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (every column, the loss curve too).")] = False,
) -> None:
    """One run: its fields, result-row counts, checkpoint and where it was made."""
    from backend.housekeeping import deletion_counts
    from store.measured import precisions_in
    from store.models import Run, row_columns

    with C.session_factory()() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise LookupError(f"run {run_id} not found")
        row = {c.key: getattr(run, c.key) for c in row_columns(Run)}
        rows = deletion_counts(s, [run_id])
        row["result_precisions"] = precisions_in(s, run_id)
    row["result_rows"] = {k: v for k, v in rows.items() if k != "runs"}
    if as_json:
        C.echo_json(row)
        return
    row["from_config"] = (row.get("train_config") or {}).get("from_config")  # a transformers config trained anew
    row["control"] = row.get("control")
    for key in (
        "id",
        "name",
        "suite",
        "family",
        "task",
        "seed",
        "control",
        "pretrained",
        "from_config",
        "n_layers",
        "d_model",
        "n_params",
        "steps",
        "train_seconds",
        "heldout_acc",
        "early_stop_acc",
        "stopped_early",
        "stop_reason",
        "best_heldout_acc",
        "best_step",
        "checkpoint_id",
        "made_on",
        "tags",
        "notes",
        "created_at",
        "result_rows",
    ):
        typer.echo(f"{key:15s} {row[key] if row[key] is not None else '-'}")
    typer.echo(f"{'precision':15s} {_precisions(row['result_precisions'])}")
    for length, b in sorted((row["behaviour"] or {}).items(), key=lambda kv: int(kv[0])):
        typer.echo(f"behaviour L={length:<5s} token_acc {b.get('token_acc')}  last_acc {b.get('last_acc')}")


def _precisions(per_table: dict[str, dict[str, int]]) -> str:
    """``fp32``, or where a run's rows mix forward precisions, each table's counts and a warning."""
    seen = {p for counts in per_table.values() for p in counts}
    if len(seen) <= 1:
        return next(iter(seen), "-")
    mixed = "; ".join(
        f"{table} " + " + ".join(f"{n} {p}" for p, n in sorted(counts.items())) for table, counts in per_table.items()
    )
    return f"mixed: {mixed} (compare across precisions with docs/SCIENCE.md#precision's tolerances)"


@runs_app.command("tag")
def runs_tag(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    tags: Annotated[list[str], typer.Argument(help="Tags to add (or remove with --remove).")],
    remove: Annotated[bool, typer.Option("--remove", help="Remove these tags instead.")] = False,
) -> None:
    """Add tags to a run (or remove them)."""
    from backend.housekeeping import annotate_run

    with C.session_factory()() as s:
        run = annotate_run(s, run_id, add=() if remove else tags, remove=tags if remove else ())
    typer.echo(f"layerscope: run {run_id} tags: {', '.join(run.tags or []) or 'none'}")


@runs_app.command("note")
def runs_note(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    text: Annotated[str, typer.Argument(help='The run\'s notes (replaces them; "" clears them).')],
) -> None:
    """Set a run's notes."""
    from backend.housekeeping import annotate_run

    with C.session_factory()() as s:
        annotate_run(s, run_id, notes=text)
    typer.echo(f"layerscope: run {run_id} notes {'set' if text else 'cleared'}")


@runs_app.command("delete")
def runs_delete(
    run_ids: Annotated[list[int], typer.Argument(min=1, help="Stored run ids.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete runs with their probe, intervention and patching rows and their checkpoints (one
    transaction). `layerscope export --suite NAME` first keeps a copy of a suite's results."""
    from backend.housekeeping import delete_runs, deletion_counts
    from store.models import Run

    s_ = C.settings()
    with C.session_factory(s_)() as s:
        found = {r.id: r for r in s.query(Run).filter(Run.id.in_(run_ids))}
        missing = [i for i in run_ids if i not in found]
        if missing:
            raise LookupError(f"run {', '.join(map(str, missing))} not found")
        counts = deletion_counts(s, run_ids)
        names = ", ".join(f"{i} ({found[i].name}, suite {found[i].suite})" for i in sorted(found))
        C.confirm(f"Delete run {names}: {_rows(counts)}, and their checkpoints?", yes)
        out = delete_runs(s, run_ids, s_.resolved_store_dir)
    typer.echo(f"layerscope: deleted {_rows(out['deleted'])} and {out['checkpoints']} checkpoint(s)")


def _rows(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())


# ----------------------------------------------------------------------------- suite delete / tag / note


def suite_delete(
    name: Annotated[str, typer.Argument(help="The suite (runs.suite).")],
    export: Annotated[
        Path | None, typer.Option(help="Write the suite's bundle here first (default when asked: NAME.layerscope.zip).")
    ] = None,
    no_export: Annotated[bool, typer.Option("--no-export", help="Do not offer a bundle export first.")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (no export unless --export).")
    ] = False,
) -> None:
    """Delete a suite: every run in it, their result rows and checkpoints (one transaction). A
    bundle export is offered first (--export FILE writes one without asking)."""
    from backend.bundle_export import export_bundle
    from backend.housekeeping import delete_runs, deletion_counts, suite_run_ids

    s_ = C.settings()
    with C.session_factory(s_)() as s:
        ids = suite_run_ids(s, name)
        if export is None and not yes and not no_export:
            default = Path(f"{name}.layerscope.zip")
            try:
                if typer.confirm(f"Export suite {name!r} to a bundle before deleting it?", default=True, err=True):
                    export = Path(typer.prompt("Bundle file", default=str(default), err=True))
            except typer.Abort:
                export = None
        if export is not None:
            # a copy of what is there before it goes: runs being rebuilt too, as they stand, and
            # the probe weights / removed directions (their runs' weights go with the suite)
            export_bundle(s, name, export, artifacts=True, store_dir=s_.resolved_store_dir, allow_partial=True)
            typer.echo(f"layerscope: wrote {export} ({len(ids)} run(s) of suite {name!r})", err=True)
        counts = deletion_counts(s, ids)
        C.confirm(f"Delete suite {name!r}: {_rows(counts)}, and their checkpoints?", yes)
        out = delete_runs(s, ids, s_.resolved_store_dir, suite=name)
    typer.echo(f"layerscope: deleted suite {name!r}: {_rows(out['deleted'])} and {out['checkpoints']} checkpoint(s)")


def suite_tag(
    name: Annotated[str, typer.Argument(help="The suite (runs.suite).")],
    tags: Annotated[list[str], typer.Argument(help="Tags to add (or remove with --remove).")],
    remove: Annotated[bool, typer.Option("--remove", help="Remove these tags instead.")] = False,
) -> None:
    """Add tags to a suite (or remove them)."""
    from backend.housekeeping import annotate_suite

    with C.session_factory()() as s:
        row = annotate_suite(s, name, add=() if remove else tags, remove=tags if remove else ())
    typer.echo(f"layerscope: suite {name!r} tags: {', '.join(row.tags or []) or 'none'}")


def suite_note(
    name: Annotated[str, typer.Argument(help="The suite (runs.suite).")],
    text: Annotated[str, typer.Argument(help='The suite\'s notes (replaces them; "" clears them).')],
) -> None:
    """Set a suite's notes."""
    from backend.housekeeping import annotate_suite

    with C.session_factory()() as s:
        annotate_suite(s, name, notes=text)
    typer.echo(f"layerscope: suite {name!r} notes {'set' if text else 'cleared'}")


def suite_move(
    name: Annotated[str, typer.Argument(help="The suite the runs are in (runs.suite).")],
    to: Annotated[str, typer.Option("--to", help="The suite they move to (new or existing).")],
    family: Annotated[list[str] | None, typer.Option(help="Only these families (repeat).")] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only these tasks (repeat).")] = None,
    seed: Annotated[list[int] | None, typer.Option(help="Only these seeds (repeat).")] = None,
) -> None:
    """Move runs (with their result rows and random-init controls) to another suite: the
    superseded runs of a cell whose preset budget was revised keep a suite of their own, and the
    suite resumed under the revised preset trains the cell afresh (docs/SCIENCE.md#budgets)."""
    from backend.housekeeping import move_runs

    with C.session_factory()() as s:
        moved = move_runs(s, name, to, families=family or (), tasks=task or (), seeds=seed or ())
        n_ctrl = sum(bool(r.control) for r in moved)
        cells = sorted({f"{r.family} × {r.task}" for r in moved})
    typer.echo(
        f"layerscope: moved {len(moved)} run(s) ({n_ctrl} of them random-init controls; {', '.join(cells)}) "
        f"from suite {name!r} to {to!r}"
    )


def register_suite_commands(suite_app: typer.Typer) -> None:
    suite_app.command("delete")(suite_delete)
    suite_app.command("tag")(suite_tag)
    suite_app.command("note")(suite_note)
    suite_app.command("move")(suite_move)
