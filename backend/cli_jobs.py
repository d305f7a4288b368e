"""``layerscope jobs …``: list, cancel, logs (the jobs table is the source of truth; the same
reads and the same cancel as GET /api/jobs and POST /api/jobs/{id}/cancel).

    layerscope jobs list [--state S] [--kind K] [--limit N] [--json]
    layerscope jobs cancel ID
    layerscope jobs logs ID [--tail N]
"""

from __future__ import annotations

from typing import Annotated

import typer

from backend import cli_common as C

jobs_app = typer.Typer(help="Read and cancel jobs.", no_args_is_help=True)

COLUMNS = ["id", "kind", "state", "progress", "run_id", "parent_id", "worker", "created_at", "message"]


def _row(job) -> dict:
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "progress": job.progress,
        "run_id": job.run_id,
        "parent_id": job.parent_id,
        "attempt": job.attempt,
        "worker": job.worker,
        "message": job.message,
        "error": job.error,
        "params": job.params,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


@jobs_app.command("list")
def jobs_list(
    state: Annotated[
        list[str] | None, typer.Option(help="queued | running | succeeded | failed | cancelled (repeat).")
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option(help="train | probe | intervene | patch | suite | import (repeat).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Newest N jobs.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (a list of jobs, for scripts).")] = False,
) -> None:
    """Jobs, newest first."""
    from sqlalchemy import select

    from store.jobs import STATES
    from store.models import Job

    bad = [s for s in state or [] if s not in STATES]
    if bad:
        raise typer.BadParameter(f"{', '.join(bad)}: not one of {', '.join(STATES)}", param_hint="'--state'")
    q = select(Job)
    if state:
        q = q.where(Job.state.in_(state))
    if kind:
        q = q.where(Job.kind.in_(kind))
    with C.session_factory()() as s:
        rows = [_row(j) for j in s.execute(q.order_by(Job.id.desc()).limit(limit)).scalars()]
    if as_json:
        C.echo_json(rows)
        return
    C.echo_table(rows, COLUMNS)


@jobs_app.command("cancel")
def jobs_cancel(job_id: Annotated[int, typer.Argument(min=1, help="A job's id.")]) -> None:
    """Cancel a job: a queued one at once, a running one at its worker's next check (a suite's
    unfinished children too)."""
    from store.jobs import request_cancel

    with C.session_factory()() as s:
        job = request_cancel(s, job_id)
    typer.echo(f"layerscope: job {job_id} {job.state}" + (" (cancel requested)" if job.state == "running" else ""))


@jobs_app.command("logs")
def jobs_logs(
    job_id: Annotated[int, typer.Argument(min=1, help="A job's id.")],
    tail: Annotated[int | None, typer.Option(min=1, help="Only the last N lines.")] = None,
) -> None:
    """A job's log (the tail the jobs table keeps), and its error if it failed."""
    from store.jobs import get_job

    with C.session_factory()() as s:
        job = get_job(s, job_id)
        lines = (job.log or "").splitlines()
        error = job.error
    for line in lines[-tail:] if tail else lines:
        typer.echo(line)
    if error:
        typer.echo(f"error: {error}", err=True)
