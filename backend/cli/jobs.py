"""``layerscope worker`` (consume jobs) and ``layerscope jobs …``: list, cancel, logs (the jobs
table is the source of truth; the same reads and the same cancel as GET /api/jobs and
POST /api/jobs/{id}/cancel).

    layerscope worker [--device D] [--name N] [--concurrency N] [--threads N] [--measure-memory-gb G]
    layerscope jobs list [--state S] [--kind K] [--limit N] [--json]
    layerscope jobs cancel ID
    layerscope jobs logs ID [--tail N]
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from backend.cli import common as C
from backend.cli import supervision

jobs_app = typer.Typer(help="Read and cancel jobs.", no_args_is_help=True)


def worker(
    device: Annotated[
        str | None,
        typer.Option(
            help="cpu | cuda | cuda:N | auto (default: LAYERSCOPE_DEVICE or auto). CUDA_VISIBLE_DEVICES is respected."
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="Worker name shown on its jobs (default host:pid:device; "
            "with --concurrency N: host-pid-slot, or NAME-slot)."
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            min=1,
            max=256,
            envvar="LAYERSCOPE_WORKER_CONCURRENCY",
            help="Job slots on this device: N worker processes share it, each running one job at a time "
            "(pack small runs onto one GPU, e.g. --device cuda:0 --concurrency 8).",
        ),
    ] = 1,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="CPU threads per slot (torch.set_num_threads; default: all cores, or cores // N "
            "with --concurrency N).",
        ),
    ] = None,
    measure_memory_gb: Annotated[
        float | None,
        typer.Option(
            min=0,
            envvar="LAYERSCOPE_MEASURE_MEMORY_GB",
            help="GiB of states a measurement holds at once beyond the model's weights (default 6; 0 = "
            "unbounded): layers are captured in groups that fit, the rest computed again; a measurement "
            "that cannot fit is refused before it starts.",
        ),
    ] = None,
    cpu_matmul: Annotated[
        str | None,
        typer.Option(
            envvar="LAYERSCOPE_CPU_MATMUL",
            help="How a measurement's float32 forward passes multiply their large linear layers on a CPU: "
            "onednn, blas (torch's BLAS, MKL) or auto (default: oneDNN on an AMD CPU with AVX-512, where MKL "
            "runs at about half the core's rate). The two agree at float rounding (measurement version 4).",
        ),
    ] = None,
    executor: Annotated[
        str | None, typer.Option(hidden=True, help="module:function replacing the pipeline (tests).")
    ] = None,
    max_jobs: Annotated[int | None, typer.Option(hidden=True, min=1, help="per slot")] = None,
    idle_exit: Annotated[float | None, typer.Option(hidden=True, min=0, help="per slot")] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True, min=1, help="run as a slot of this supervisor")] = None,
) -> int | None:
    """Consume jobs from the queue, one at a time per slot (--concurrency N: N slots on one device).

    Pack a study onto one GPU: `layerscope worker --device cuda:0 --concurrency 8`, then
    `layerscope suite --preset paper --submit`. Ctrl-C or SIGTERM stops every slot; running jobs
    are handed back to the queue."""
    from worker import packing
    from worker.runner import Runner, load_executor

    C.setup_logging()
    chosen = {"LAYERSCOPE_MEASURE_MEMORY_GB": measure_memory_gb, "LAYERSCOPE_CPU_MATMUL": cpu_matmul}
    if any(v is not None for v in chosen.values()):  # the slots and this process read them through the settings
        from store.settings import get_settings

        os.environ.update({k: str(v) for k, v in chosen.items() if v is not None})
        get_settings.cache_clear()
    settings = C.settings()
    if device is not None:
        C.check_device(device)
    factory = C.session_factory(settings)  # fails once, here, when the DB is unreachable
    if concurrency > 1:
        return supervision.supervise_slots(concurrency, name, device, executor, threads, max_jobs, idle_exit)
    if parent_pid is not None:
        packing.become_slot(parent_pid)
    else:  # Ctrl-C, `docker stop`, the demo stopping: release the job, once
        packing.stop_on_first_signal()
    if threads is not None:
        packing.configure_threads(threads, torch_now=executor is None)
    runner = Runner(settings, device=device, name=name, executor=load_executor(executor), session_factory=factory)
    typer.echo(f"layerscope: worker {runner.name} on the {runner.queue.kind} queue (Ctrl-C to stop)", err=True)
    try:
        runner.run_forever(max_jobs=max_jobs, idle_exit_s=idle_exit)
    except KeyboardInterrupt:
        typer.echo(f"layerscope: worker {runner.name} stopped", err=True)
    finally:
        supervision.quiet_exit()
    return None


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


def _suite_columns(row: dict) -> dict:
    """A suite job's progress and message as its train jobs stand (the suite job itself is done
    as soon as it has queued them)."""
    counts = row["children"]
    total = sum(counts.values())
    if not total:
        return {}
    done = counts.get("succeeded", 0)
    rest = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()) if state != "succeeded")
    return {
        "progress": row["children_progress"],
        "message": f"{done}/{total} runs done" + (f" ({rest})" if rest else ""),
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

    from store.jobs import STATES, children_summary, state_filter, suite_state
    from store.models import Job

    bad = [s for s in state or [] if s not in STATES]
    if bad:
        raise typer.BadParameter(f"{', '.join(bad)}: not one of {', '.join(STATES)}", param_hint="'--state'")
    q = select(Job)
    if state:
        q = q.where(state_filter(state))  # a suite job by its runs' states, as the API and /jobs read it
    if kind:
        q = q.where(Job.kind.in_(kind))
    with C.session_factory()() as s:
        rows = [_row(j) for j in s.execute(q.order_by(Job.id.desc()).limit(limit)).scalars()]
        kids = children_summary(s, [r["id"] for r in rows if r["kind"] == "suite"])
    for r in rows:
        if r["id"] in kids:  # a suite "succeeds" once fanned out: its runs are its children
            r.update(kids[r["id"]])
            r["job_state"], r["state"] = r["state"], suite_state(r["state"], r["children"])
            if not as_json:
                r.update(_suite_columns(r))
    if as_json:
        C.echo_json(rows)
        return
    C.echo_table(rows, COLUMNS)
    if not rows:  # a bare header would read like a listing that failed
        typer.echo(f"layerscope: no jobs{' match' if state or kind else ' here'}", err=True)


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
    """A job's log (the tail the jobs table keeps), and its error if it failed; a suite job that
    fanned out keeps no log of its own: its state is its runs' (as `jobs list` says) and the
    line names their jobs."""
    from sqlalchemy import select

    from store.jobs import children_summary, get_job, suite_state
    from store.models import Job

    with C.session_factory()() as s:
        job = get_job(s, job_id)
        lines = (job.log or "").splitlines()
        error = job.error
        state = suite_state(job.state, children_summary(s, [job_id])[job_id]["children"])
        runs = list(s.scalars(select(Job.id).where(Job.parent_id == job_id).order_by(Job.id)))
    for line in lines[-tail:] if tail else lines:
        typer.echo(line)
    if error:
        typer.echo(f"error: {error}", err=True)
    if not lines and not error:  # an empty answer would read like a job that ran and said nothing
        later = " yet" if state in ("queued", "running") else ""
        theirs = f"; its runs' jobs: {_ids(runs)} (layerscope jobs logs ID)" if runs else ""
        typer.echo(f"layerscope: job {job_id} ({state}) has no log{later}{theirs}", err=True)


def _ids(ids: list[int], shown: int = 10) -> str:
    """``5, 6, 7`` (the first ``shown``, then how many more)."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(map(str, ids[:shown])) + more
