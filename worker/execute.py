"""Every job kind, in process: the runner's default executor and the CLI's ``run_here``. The
measuring kinds and the suite are ``worker.pipeline``'s; a ``rebuild`` is ``worker.rebuild_check``'s
(which trains through the pipeline, so the pipeline cannot dispatch to it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from science.context import Context
from worker.env import WorkerEnv


def execute(kind: str, params: BaseModel, ctx: Context, env: WorkerEnv) -> dict[str, Any]:
    """Run one job of ``kind`` in process; returns a summary (``run_id`` or ``run_ids``; a
    rebuild's ``agrees`` and ``check`` too).

    Raises:
        ValueError: unknown kind; RunNotFound: a missing run; JobCancelled: cancelled;
        RebuildRefused / RebuildDisagrees (ValueErrors): a rebuild with nothing to do, or that
        does not match the run's record.
    """
    if kind == "rebuild":
        from worker.job_params import RebuildParams, params_of
        from worker.rebuild_check import rebuild_weights

        return rebuild_weights(params_of(kind, params, RebuildParams), env, ctx)
    from worker.pipeline import execute as run_in_pipeline

    return run_in_pipeline(kind, params, ctx, env)
