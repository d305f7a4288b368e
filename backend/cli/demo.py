"""``layerscope demo``: the README's main command. Serve the dashboard on a trained study (a
bundle, imported once), start a local worker beside the server, and run the quick preset live as
its own suite. The worker process is handled by ``backend.cli.supervision``."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from backend.cli import common as C
from backend.cli import supervision
from backend.cli.bundles import import_conflicts_line
from backend.cli.serve import announce, check_port_free


def demo(
    host: Annotated[str | None, typer.Option(help="Interface (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default 8050).")] = None,
    preset: Annotated[C.Preset, typer.Option(help="The suite to run.")] = C.Preset["quick"],
    device: Annotated[str | None, typer.Option(help="The local worker's device.")] = None,
    rerun: Annotated[bool, typer.Option(help="Train again even if this suite already ran here.")] = False,
    bundle: Annotated[
        list[Path] | None,
        typer.Option(
            help="A results bundle to show at once (imported once; repeat for several: `make demo` passes "
            "examples/paper-steps.layerscope.zip and examples/paper.layerscope.zip)."
        ),
    ] = None,
    executor: Annotated[str | None, typer.Option(hidden=True, help="module:function for the worker (tests).")] = None,
) -> None:
    """Serve the dashboard on trained studies (--bundle, each imported once), start a local worker
    beside it, and run the quick preset live as its own suite: results appear as they land.
    Ctrl-C stops everything."""
    from worker.queue import JobQueue

    C.setup_logging()
    if device is not None:
        C.check_device(device)
    settings = C.settings(host=host, port=port)
    check_port_free(settings.host, settings.port)  # before the worker starts and the links are printed
    factory = C.session_factory(settings)
    queue = JobQueue.from_settings(settings)
    studies = []
    for path in bundle or []:
        line, study = demo_bundle(factory, path, settings.resolved_store_dir)
        typer.echo(f"layerscope: {line}", err=True)
        studies += [study] if study else []
    params = live_params(preset.value, rerun)
    _submit_unless_ran(params, rerun, settings, factory, queue)
    links = [f"\n  Open {settings.resolved_api_url}/   (jobs: {settings.resolved_api_url}/jobs)\n"]
    if studies:
        from urllib.parse import quote

        links += [f"  The imported study: {settings.resolved_api_url}/?suite={quote(study)}\n" for study in studies]
        links.append(f"  The live suite: {settings.resolved_api_url}/?suite={quote(params.name or preset.value)}\n")
    _serve_beside_worker(settings, factory, queue, device, executor, links)


def live_params(preset: str, rerun: bool):
    """The demo's live suite: the preset as its own suite; ``rerun`` trains every run again
    (``force``: a run already stored is trained afresh, not skipped)."""
    from worker.job_params import SuiteParams

    return SuiteParams(preset=preset, force=rerun)


def _submit_unless_ran(params, rerun: bool, settings, factory, queue) -> None:
    """Submit the demo's live suite, unless it ran here already (or is under way) and ``rerun`` is
    off, or stored runs of its cells were made with other settings (said, not doubled)."""
    from worker.queue import live_suite_job, submit

    preset = params.preset
    job_id = None if rerun else live_suite_job(factory, params)
    if job_id is not None and _suite_deleted(factory, job_id, params):
        job_id = None  # it ran, then its runs were deleted (`suite delete`): run it again
    conflict = None
    if job_id is None:
        from worker.presets import expand_suite
        from worker.suite_settings import SuiteSettingsConflict, check_one_run_per_seed

        try:  # e.g. the quick suite of an older version, made with other settings: shown, not doubled
            check_one_run_per_seed(expand_suite(params), factory)
        except SuiteSettingsConflict as exc:
            conflict = str(exc)
    if conflict:
        typer.echo(f"layerscope: the {preset} suite is not run again: {conflict}", err=True)
    elif job_id is None:
        job_id = submit(factory, queue, "suite", params, max_attempts=settings.max_attempts)
        typer.echo(f"layerscope: submitted the {preset} suite as job {job_id}", err=True)
    else:
        done, total = _suite_runs_done(factory, job_id)
        if total is None or done < total:  # an earlier demo was stopped: its worker goes on with the rest
            so_far = f": {done} of {total} runs done" if total else ""
            typer.echo(
                f"layerscope: the {preset} suite is under way here (job {job_id}{so_far}); the worker goes on with it",
                err=True,
            )
        else:
            typer.echo(
                f"layerscope: the {preset} suite already ran here (job {job_id}); "
                "showing its results (--rerun to train again)",
                err=True,
            )


def _suite_deleted(factory, job_id: int, params) -> bool:
    """Whether suite job ``job_id`` finished every run but its suite holds none now."""
    from sqlalchemy import func, select

    from store.models import Run

    done, total = _suite_runs_done(factory, job_id)
    if total is None or done < total:
        return False
    with factory() as s:
        stored = s.execute(select(func.count()).select_from(Run).where(Run.suite == (params.name or params.preset)))
        return stored.scalar_one() == 0


def _suite_runs_done(factory, job_id: int) -> tuple[int, int | None]:
    """(succeeded, all) train jobs of suite job ``job_id``; (0, None) while it is not fanned out yet."""
    from sqlalchemy import func, select

    from store import jobs as J
    from store.models import Job

    with factory() as s:
        states = dict(
            s.execute(select(Job.state, func.count()).where(Job.parent_id == job_id).group_by(Job.state)).all()
        )
    total = sum(states.values())
    return states.get(J.SUCCEEDED, 0), total or None


def _serve_beside_worker(settings, factory, queue, device, executor, links: list[str]) -> None:
    """Start the worker process, serve the app until Ctrl-C / SIGTERM, then stop the worker."""
    import uvicorn

    from backend.app import create_app, warm_when_up

    proc = None
    try:
        proc = supervision.start_worker(settings, device, executor)
        application = create_app(settings, factory, queue=queue)
        announce(settings)
        warm_when_up(application)  # the pages' first aggregates computed before the first visit
        for line in links:
            typer.echo(line)
        # uvicorn stops on SIGINT/SIGTERM, then raises the signal again: SIGTERM (`kill`, `docker
        # stop`) then stops the worker here like Ctrl-C does instead of killing this process
        signal.signal(signal.SIGTERM, supervision.raise_interrupt)
        try:
            uvicorn.run(application, host=settings.host, port=settings.port, log_level="warning", access_log=False)
        except KeyboardInterrupt:
            pass  # Ctrl-C / SIGTERM: the worker is stopped below, quietly
    finally:
        if proc is not None:
            supervision.stop_worker(proc)
        supervision.quiet_exit()


def demo_bundle(factory, path: Path, store_dir: Path) -> tuple[str, str | None]:
    """Import the demo's study bundle once; a missing or empty file is reported, not fatal.
    Returns the line to print and the study's suite name (None when nothing is there)."""
    from backend.bundle import BundleError
    from backend.bundle_import import import_bundle

    if not path.is_file() or path.stat().st_size == 0:
        return (
            f"no study bundle at {path} ({'empty' if path.is_file() else 'absent'}); showing the live suite only"
        ), None
    try:
        with factory() as s:
            out = import_bundle(s, path, store_dir=store_dir, source=path.name)
    except BundleError as exc:
        return f"{exc}; showing the live suite only", None
    if out["runs_conflicting"]:  # an older import of the study, or runs rebuilt here: never mixed
        return (
            f"study {out['suite']!r} from {path} imported before; "
            + import_conflicts_line(out["runs_conflicting"], path).removeprefix("layerscope: "),
            out["suite"],
        )
    if out["runs_added"] == 0 and not any(out["rows_added"].values()):
        return f"study {out['suite']!r} from {path} already imported ({out['runs_present']} runs)", out["suite"]
    return f"imported study {out['suite']!r} from {path}: {out['runs_added']} run(s)", out["suite"]
