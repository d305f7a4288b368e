"""The fake pipeline plus a rendezvous, for the packing tests (``layerscope worker --concurrency N``).

A ``train`` job first waits (polling the ``jobs`` table, checking its cancel flag) until
``LAYERSCOPE_FAKE_RENDEZVOUS`` train jobs have been claimed (running, or already succeeded), then
runs the fake pipeline. A job cannot finish before the others started, so the jobs provably
overlap when the worker runs them concurrently, and a worker running them one at a time never
gets past the first (the rendezvous fails after ``LAYERSCOPE_FAKE_RENDEZVOUS_S``). The result records
the process id, device, thread setting and CUDA_VISIBLE_DEVICES of the slot that ran it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from sqlalchemy import func, select

from store import jobs as J
from store.models import Job
from tests.lab import fake_pipeline


def execute(kind: str, params: Any, ctx: Any, env: Any) -> dict:
    want = int(os.environ.get("LAYERSCOPE_FAKE_RENDEZVOUS", "0"))
    if kind == "train" and want > 1:
        _rendezvous(want, float(os.environ.get("LAYERSCOPE_FAKE_RENDEZVOUS_S", "120")), ctx, env)
    out = fake_pipeline.execute(kind, params, ctx, env)
    return {
        **out,
        "pid": os.getpid(),
        "device": env.device,
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def _rendezvous(want: int, patience_s: float, ctx: Any, env: Any) -> None:
    deadline = time.monotonic() + patience_s
    while True:
        ctx.check_cancelled()
        with env.session_factory() as s:
            running = s.execute(
                select(func.count())
                .select_from(Job)
                .where(Job.kind == "train", Job.state.in_((J.RUNNING, J.SUCCEEDED)))
            ).scalar_one()
        if running >= want:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"rendezvous: {running} of {want} train jobs running after {patience_s:g} s")
        time.sleep(0.05)
