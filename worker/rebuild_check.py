"""Rebuild a stored run's weights and check them against what the run recorded, keeping its
results (``layerscope runs rebuild-weights RUN_ID``, the job kind ``rebuild``,
docs/SCIENCE.md#rebuilding-weights).

The run is trained again with its own config within the step budget it had where it was made
(``stored_runs.rebuild_of``), then compared with its record: the steps (equal), the held-out
accuracy (within ``acc_tolerance``) and the loss curve (the same steps, the loss within
``loss_tolerance`` nats at each). On agreement the rebuilt checkpoint is attached to the run and
nothing else of it changes: its result rows, status, record and so its suite's claims stay as
they were (the suite's rebuild, ``suite --rebuild-weights``, deletes them and measures again).
On disagreement nothing is stored (:class:`RebuildDisagrees` says by how much), or, with
``as_suite``, the rebuild is stored as a new run of that suite, unmeasured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select

from layerscope_core.hashing import config_hash
from layerscope_core.provenance import code_versions
from science.context import Context, SilentContext
from science.tasks import get_task
from store.models import Run
from store.session import session_scope
from worker import persist
from worker.env import WorkerEnv
from worker.job_params import RebuildParams, TrainParams
from worker.stored_runs import rebuild_of


class RebuildRefused(ValueError):
    """The run cannot be rebuilt here (unknown, its weights here, being rebuilt, or its stored
    train_config does not give its config hash)."""


class RebuildDisagrees(ValueError):
    """The rebuilt weights do not match the run's record; nothing was stored. ``check``: the
    :class:`Check`."""

    def __init__(self, run_id: int, check: Check, differences: list[str]) -> None:
        self.check = check
        super().__init__(
            f"run {run_id}: the rebuild disagrees with the run's record: {'; '.join(differences)}; "
            "nothing stored (its results are kept; --as-suite NAME stores the rebuild as a new run of another suite)"
        )


@dataclass(frozen=True)
class Check:
    """The rebuild beside the record: ``steps`` and ``heldout_acc`` as (rebuilt, recorded);
    ``loss_max_diff``: the largest |loss difference| (nats) at the steps both curves record
    (None: no common step); ``loss_points``: the points of each curve (rebuilt, recorded)."""

    steps: tuple[int, int | None]
    heldout_acc: tuple[float | None, float | None]
    loss_max_diff: float | None
    loss_points: tuple[int, int]

    def differences(self, acc_tolerance: float, loss_tolerance: float) -> list[str]:
        """What disagrees beyond the tolerances, one phrase each (empty: the rebuild agrees)."""
        out = []
        if self.steps[0] != self.steps[1]:
            out.append(f"steps {self.steps[0]} rebuilt, {self.steps[1]} recorded")
        got, recorded = self.heldout_acc
        if (got is None) != (recorded is None) or (
            got is not None and recorded is not None and abs(got - recorded) > acc_tolerance
        ):
            gap = (
                f" ({abs(got - recorded) * 100:.2f} pp, tolerance {acc_tolerance * 100:g} pp)"
                if got and recorded
                else ""
            )
            out.append(f"held-out accuracy {_acc(got)} rebuilt, {_acc(recorded)} recorded{gap}")
        if self.loss_points[0] != self.loss_points[1]:
            out.append(f"loss curve of {self.loss_points[0]} points rebuilt, {self.loss_points[1]} recorded")
        elif self.loss_max_diff is not None and self.loss_max_diff > loss_tolerance:
            out.append(f"loss curve apart by up to {self.loss_max_diff:.4f} nats (tolerance {loss_tolerance:g})")
        return out


def _acc(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def compare(run: Run, result: Any) -> Check:
    """The :class:`Check` of a rebuild's ``TrainResult`` against stored ``run``'s record."""
    rebuilt = {p["step"]: p["loss"] for p in result.loss_curve if p.get("loss") is not None}
    recorded = {p["step"]: p["loss"] for p in run.loss_curve or [] if p.get("loss") is not None}
    common = rebuilt.keys() & recorded.keys()
    return Check(
        steps=(result.steps, run.steps),
        heldout_acc=(result.final_heldout_acc, run.heldout_acc),
        loss_max_diff=max((abs(rebuilt[s] - recorded[s]) for s in common), default=None),
        loss_points=(len(result.loss_curve), len(run.loss_curve or [])),
    )


def train_params_of(run: Run) -> TrainParams:
    """The training params that made ``run`` (its stored train_config, its suite and name).

    Raises:
        RebuildRefused: a train_config that no longer validates, or does not hash to the run's
            config hash (made by code whose config fields differ)."""
    from pydantic import ValidationError

    try:
        params = TrainParams.model_validate(
            {**(run.train_config or {}), "suite": run.suite, "name": run.name, "measure": None}
        )
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        raise RebuildRefused(f"run {run.id}: its train_config is not one this code trains ({msg})") from exc
    if params.run_hash() != run.config_hash:
        raise RebuildRefused(
            f"run {run.id}: its train_config hashes to {params.run_hash()[:12]}, not its config hash "
            f"{run.config_hash[:12]} (made by other code): rebuild it with {_retrain(run)}"
        )
    return params


def _retrain(run: Run) -> str:
    from worker.run_weights import retrain_command

    return retrain_command(run)


def _refusal(run: Run | None, run_id: int, env: WorkerEnv, params: RebuildParams) -> str | None:
    if run is None:
        return f"run {run_id} not found"
    if run.checkpoint_id and env.store.exists(run.checkpoint_id):
        return f"run {run_id} has its weights here (checkpoint {run.checkpoint_id[:12]}): nothing to rebuild"
    if run.status == persist.REMEASURING:
        return f"run {run_id} is being rebuilt by its suite (status {persist.REMEASURING!r})"
    if params.as_suite is not None and params.as_suite == run.suite:
        return f"as_suite: {params.as_suite!r} is the run's own suite; name another"
    return None


def rebuild_weights(params: RebuildParams, env: WorkerEnv, ctx: Context | None = None) -> dict[str, Any]:
    """Rebuild run ``params.run_id``'s weights and check them (the module docstring). Returns
    ``{"run_id", "agrees", "check", "checkpoint_id"}``; with ``as_suite`` and a disagreement,
    ``run_id`` is the new run's and ``rebuild_of`` the stored one's.

    Raises:
        RebuildRefused: the run is unknown, has its weights here, is being rebuilt by its suite,
            or its config does not give its hash; ``as_suite`` is its own suite or holds the
            rebuild already.
        RebuildDisagrees: the rebuild does not match the record (nothing stored), without ``as_suite``.
    """
    from worker.pipeline import build_model_of, train_or_init

    ctx = ctx or SilentContext()
    with session_scope(env.session_factory) as s:
        run = s.get(Run, params.run_id)
        if why := _refusal(run, params.run_id, env, params):
            raise RebuildRefused(why)
        assert run is not None  # _refusal refused a missing run
        s.expunge(run)
    train = train_params_of(run)
    rebuild = rebuild_of(run.id, env)
    ctx.log(
        f"run {run.id} ({run.name}): rebuilding its weights within the {rebuild.steps} steps its budget gave it "
        f"(recorded: {run.steps} steps, held-out acc {_acc(run.heldout_acc)}); its results are kept"
    )
    task = get_task(train.task, **train.task_params)
    model = build_model_of(train, task)
    result = train_or_init(train, task, model, rebuild, env, ctx)
    check = compare(run, result)
    differences = check.differences(params.acc_tolerance, params.loss_tolerance)
    record = {**asdict(check), "acc_tolerance": params.acc_tolerance, "loss_tolerance": params.loss_tolerance}
    if not differences:
        return _attach(run, model, result, rebuild, record, env, ctx)
    if params.as_suite is None:
        raise RebuildDisagrees(run.id, check, differences)
    return _store_apart(run, train, task, model, result, rebuild, {**record, "differs": differences}, params, env, ctx)


def _provenance(run: Run, steps: int) -> dict[str, Any]:
    return {"run_config": run.train_config, "config_hash": run.config_hash, "steps": steps}


def _attach(run: Run, model, result, rebuild, record: dict[str, Any], env: WorkerEnv, ctx) -> dict[str, Any]:
    """Save the agreeing rebuild and point the run at it; nothing else of the run changes."""
    from worker.pipeline import made_on

    checkpoint_id = env.store.save(model, provenance=_provenance(run, result.steps))
    with session_scope(env.session_factory) as s:
        stored = s.get_one(Run, run.id)
        stored.checkpoint_id = checkpoint_id
        # what rebuilt the weights, beside the record they were checked against
        stored.made_with = {
            **(stored.made_with or {}),
            "weights_rebuilt": {
                **record,
                "made_on": made_on(env.device),
                "git_commit": code_versions().get("git_commit"),
                "step_budget": rebuild.steps,
            },
        }
    ctx.progress(1.0, "weights rebuilt, checked and attached")
    ctx.log(
        f"run {run.id}: the rebuild agrees with its record ({result.steps} steps, held-out acc "
        f"{_acc(result.final_heldout_acc)} rebuilt, {_acc(run.heldout_acc)} recorded, loss curve apart by at most "
        f"{record['loss_max_diff'] or 0:.4f} nats): weights {checkpoint_id[:12]} attached, its results kept"
    )
    return {"run_id": run.id, "agrees": True, "check": record, "checkpoint_id": checkpoint_id}


def _store_apart(
    run: Run, train: TrainParams, task, model, result, rebuild, record, params: RebuildParams, env: WorkerEnv, ctx
) -> dict[str, Any]:
    """Store a disagreeing rebuild as a new run of ``params.as_suite`` (unmeasured: status
    ``trained``), keyed apart from the stored run (one config hash a run)."""
    from science.training import behaviour
    from worker.pipeline import made_on

    key = config_hash({"rebuild_of": run.config_hash, "suite": params.as_suite})
    lengths = sorted(int(k) for k in (run.behaviour or {})) or [train.train_length]
    behav = behaviour(
        model, task, seed=train.seed, eval_lengths=lengths, n_sequences=train.n_eval_sequences, device=env.device
    )
    with session_scope(env.session_factory) as s:
        if (there := s.scalar(select(Run.id).where(Run.config_hash == key))) is not None:
            raise RebuildRefused(f"suite {params.as_suite!r} holds the rebuild of run {run.id} already (run {there})")
    checkpoint_id = env.store.save(model, provenance=_provenance(run, result.steps))
    with session_scope(env.session_factory) as s:
        new_id = persist.save_run(
            s,
            commit=False,
            name=f"{run.name} (rebuild)",
            suite=params.as_suite,
            family=run.family,
            task=run.task,
            seed=run.seed,
            pretrained=run.pretrained,
            n_layers=model.n_layers,
            d_model=model.d_model,
            n_params=model.n_params,
            task_params=run.task_params,
            model_config=model.config.to_dict(),
            train_config=run.train_config,
            config_hash=key,
            checkpoint_id=checkpoint_id,
            status="trained",
            **result.run_fields(),
            behaviour=behav,
            early_stop_acc=run.early_stop_acc,
            control=run.control,
            made_on=made_on(env.device),
            made_with={
                **code_versions(),
                "rebuilt_from": rebuild.of,
                "rebuild_of": {"run_id": run.id, "config_hash": run.config_hash, "suite": run.suite, **record},
            },
        )
    ctx.log(
        f"run {run.id}: the rebuild disagrees with its record ({'; '.join(record['differs'])}); stored as run "
        f"{new_id} of suite {params.as_suite!r}, run {run.id} and its results unchanged"
    )
    return {"run_id": new_id, "agrees": False, "check": record, "checkpoint_id": checkpoint_id, "rebuild_of": run.id}
