"""A fast stand-in for ``worker.pipeline.execute`` (no torch): the job runner, the API and the
lab tests exercise the real queue / DB / worker processes with it.

``train`` "trains" for ``params.max_steps`` steps of ``LAYERSCOPE_FAKE_STEP_S`` seconds each
(checking the cancel flag between steps), then writes a run and probe rows through
``worker.persist`` exactly like the real pipeline. Set ``LAYERSCOPE_FAKE_FAIL=1`` to make it raise.
"""

from __future__ import annotations

import os
import time
from typing import Any

from store.session import session_scope
from worker import persist


def probe_rows(n_layers: int, eval_lengths: list[int], seed: int, family: str, config_hash: str) -> list[dict]:
    rows = []
    for L in eval_lengths:
        for layer in range(-1, n_layers):
            depth = (layer + 1) / n_layers
            late = family in ("lstm", "gru", "mamba", "mamba2")
            acc = 0.5 + 0.5 * (depth**4 if late else depth) - 0.01 * seed - 0.001 * (L - 40)
            rows.append(
                dict(
                    layer=layer,
                    eval_length=L,
                    accuracy=acc,
                    majority_baseline=0.5,
                    per_position=[acc] * 4,
                    n_train=16,
                    n_test=4,
                    converged=True,
                    n_iter=10,
                    config_hash=config_hash,
                )
            )
    return rows


def execute(kind: str, params: Any, ctx: Any, env: Any) -> dict:
    step_s = float(os.environ.get("LAYERSCOPE_FAKE_STEP_S", "0.02"))
    if os.environ.get("LAYERSCOPE_FAKE_FAIL") == "1":
        raise RuntimeError("fake pipeline asked to fail")
    if kind == "train":
        steps = params.max_steps
        write_every_step = os.environ.get("LAYERSCOPE_FAKE_WRITE_EVERY_STEP") == "1"
        for i in range(steps):
            ctx.check_cancelled()
            time.sleep(step_s)
            ctx.progress((i + 1) / steps * 0.8, f"step {i + 1}/{steps}")
            if write_every_step:  # hammer the DB: readers must never see "database is locked"
                _write(params, env, steps)
        ctx.log(f"trained {params.family} on {params.task} for {steps} steps")
        with ctx.storing():  # as the real pipeline: a cancel from here on is a 409
            run_id = _write(params, env, steps)
        ctx.progress(1.0, "done")
        return {"run_id": run_id}
    if kind in ("probe", "intervene", "patch"):
        ctx.check_cancelled()
        time.sleep(step_s)
        return {"run_id": params.run_id}
    raise ValueError(f"fake pipeline: unsupported kind {kind!r}")


def _write(params: Any, env: Any, steps: int) -> int:
    lengths = params.measure.eval_lengths if params.measure else [params.train_length]
    with session_scope(env.session_factory) as s:
        run_id = persist.save_run(
            s,
            name=params.name or f"{params.family}-{params.task}-s{params.seed}",
            suite=params.suite,
            family=params.family,
            task=params.task,
            seed=params.seed,
            n_layers=params.n_layers,
            d_model=params.d_model or 16,
            n_params=1000,
            train_config=params.run_config(),
            config_hash=params.run_hash(),
            steps=steps,
            loss_curve=[{"step": steps, "loss": 0.1}],
            behaviour={str(L): {"token_acc": 0.9, "last_acc": 0.9, "n": 8} for L in lengths},
            heldout_acc=0.995,
            early_stop_acc=0.99,
        )
        persist.replace_probe_results(
            s, run_id, probe_rows(params.n_layers, lengths, params.seed, params.family, params.config_hash())
        )
    return run_id
