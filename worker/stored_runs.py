"""What the results DB holds of a run already: whether it is new, trained, complete or stored
without weights (:func:`stored_state`), which of its measurement parts are stored
(:func:`stored_parts`), and the step budget a weightless run is rebuilt within (:func:`rebuild_of`,
docs/SCIENCE.md#rebuilding-weights). Read by ``worker.pipeline.train`` before it trains anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from science.budget import recorded_step_budget, step_budget
from store.models import Run
from store.session import session_scope
from worker.env import WorkerEnv
from worker.job_params import TrainParams
from worker.persist import REMEASURING
from worker.run_measurement import PARTS


def stored_state(params: TrainParams, env: WorkerEnv) -> tuple[int | None, str]:
    """Where this run stands in the results DB: ``(run_id, state)`` with state ``"new"`` (no run
    with this config hash), ``"complete"`` (trained and measured with these measurement settings
    — for a staged suite, :attr:`TrainParams.parts`: those parts stored, and not marked
    ``persist.REMEASURING``; train-only runs: trained),
    ``"trained"`` (trained, measurements missing or made with other settings; its checkpoint can be
    measured without training again) or ``"weightless"`` (stored and still to be measured — or
    complete, when ``params.rebuild_weights`` — but its weights are not here: imported from a
    bundle without them; they are rebuilt within its recorded step budget, :func:`rebuild_of`)."""
    from sqlalchemy import select

    with session_scope(env.session_factory) as s:
        run = s.execute(select(Run).where(Run.config_hash == params.run_hash())).scalar_one_or_none()
        if run is None:
            return None, "new"
        weights = bool(run.checkpoint_id and env.store.exists(run.checkpoint_id))
        if params.measure is None:
            complete = run.status in ("trained", "complete", REMEASURING)
        else:
            done = stored_parts(s, run.id, params.measure.config_hash())
            # a whole suite asks for the run's status (set with its last part); a staged one
            # for the parts it measures (the run stays "trained" until every part is stored)
            # (a retrained run marked REMEASURING: its parts stored, the mark is not cleared yet)
            staged = params.parts is not None and not params.control and run.status != REMEASURING
            complete = "probes" in done and (
                run.status == "complete" or (staged and set(measured_parts(params)) <= done)
            )
        if complete and (weights or not params.rebuild_weights):
            return run.id, "complete"
        if params.measure is None and run.status not in ("trained", "complete", REMEASURING):
            return run.id, "new"
        return run.id, "trained" if weights else "weightless"


def stored_parts(session, run_id: int, measure_hash: str) -> set[str]:
    """The measurement parts (of :data:`~worker.run_measurement.PARTS`) stored for ``run_id`` with the
    measurement settings hashed ``measure_hash``: a part counts once one of its rows is there
    (each part is written in one transaction, so one row means the whole part)."""
    from sqlalchemy import select

    from store.models import InterventionResult, PatchingResult, ProbeResult

    tables: dict[str, type[ProbeResult] | type[InterventionResult] | type[PatchingResult]] = {
        "probes": ProbeResult,
        "interventions": InterventionResult,
        "patching": PatchingResult,
    }
    return {
        part
        for part, table in tables.items()
        if session.execute(
            select(table.id).where(table.run_id == run_id, table.config_hash == measure_hash).limit(1)
        ).first()
        is not None
    }


@dataclass(frozen=True)
class Rebuild:
    """A stored run whose weights are trained again with its own config, the wall-clock cap
    replaced by the step budget that cap gave on the machine that made the run (``steps``), so the
    same seed, data stream, schedule and early stop give the run it recorded whatever this
    machine's speed (docs/SCIENCE.md#rebuilding-weights). ``of`` is what the run recorded before
    (``made_on``, ``git_commit``, ``steps``, ``train_seconds``, ``heldout_acc``, ``stopped_early``),
    kept in the rebuilt run's ``made_with["rebuilt_from"]``."""

    steps: int
    of: dict[str, Any]


def rebuild_of(run_id: int, env: WorkerEnv) -> Rebuild:
    """The :class:`Rebuild` of stored run ``run_id``: from its recorded training, or, for a run
    rebuilt before, from what it recorded first (a rebuild's own seconds were not under the cap)."""
    with session_scope(env.session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None
        first = (run.made_with or {}).get("rebuilt_from")
        cfg = run.train_config or {}
        if first:
            budget = recorded_step_budget(first, cfg)
            return Rebuild(steps=budget, of={**first, "step_budget": budget})
        budget = step_budget(
            run.steps,
            run.train_seconds,
            run.stopped_early,
            int(cfg.get("max_steps") or run.steps),
            cfg.get("max_seconds"),
        )
        return Rebuild(
            steps=budget,
            of={
                "made_on": run.made_on,
                "made_with": run.made_with,
                "git_commit": (run.made_with or {}).get("git_commit"),
                "steps": run.steps,
                "train_seconds": run.train_seconds,
                "heldout_acc": run.heldout_acc,
                "stopped_early": run.stopped_early,
                "step_budget": budget,
            },
        )


def measured_parts(params: TrainParams) -> tuple[str, ...]:
    """What a suite run measures: a random-init control only the probes (docs/SCIENCE.md#controls),
    every other run probes, interventions and patching — or the ``params.parts`` of them asked for
    now (a staged suite, docs/SCIENCE.md#staged-measurement), in that order."""
    if params.control:
        return ("probes",)
    return tuple(p for p in PARTS if params.parts is None or p in params.parts)
