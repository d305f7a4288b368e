"""One job, in process: train → behaviour → probes → interventions → patching, each result
written as soon as it exists (so the dashboard shows results as they land). Every measurement,
the suite's and the follow-up jobs', goes through ``worker.run_measurement.measure_run``.

Used by the job runner (``worker.runner``) and by the CLI's in-process ``suite``; usable from
a notebook with a :class:`WorkerEnv` built by :func:`local_env`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel
from sqlalchemy import select

from layerscope_core.provenance import code_versions
from models_store import build_model
from models_store.binding import config_problem
from models_store.positions import check_positions
from science.context import Context, SilentContext
from science.tasks import FileTask, get_task
from science.training import behaviour, train_model, untrained_result
from store.models import Run
from store.session import session_scope
from worker import in_flight, persist
from worker.env import WorkerEnv
from worker.job_params import (
    InterveneParams,
    MeasureParams,
    PatchParams,
    ProbeParams,
    SuiteParams,
    TrainParams,
    config_folder_sha256,
    params_of,
)
from worker.position_checks import model_label, run_lengths
from worker.presets import expand_suite
from worker.run_measurement import (
    PARTS,
    MeasuredRun,
    check_measure_memory,
    intervene_settings,
    measure_run,
    patch_settings,
    probe_settings,
    share_measured,
    stored_eval_lengths,
)
from worker.run_weights import missing_weights
from worker.stored_runs import Rebuild, measured_parts, rebuild_of, stored_parts, stored_state
from worker.suite_settings import check_one_run_per_seed, mixed_versions_warning


class RunNotFound(LookupError):
    """A job names a run id that is not in the results DB."""


class CheckpointNotItsRun(ValueError):
    """A run's checkpoint holds another model than the run records (its config differs)."""


def local_env(db_url: str | None = None, store_dir: Path | None = None, device: str = "auto") -> WorkerEnv:
    """A :class:`WorkerEnv` from settings (``LAYERSCOPE_DB_URL``, ``LAYERSCOPE_STORE_DIR``) or
    explicit arguments; the DB schema is brought to head first."""
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker
    from store.settings import get_settings

    settings = get_settings()
    url = db_url or settings.resolved_db_url
    init_db(url)
    return WorkerEnv(
        make_sessionmaker(make_engine(url)), Path(store_dir or settings.resolved_store_dir), resolve_device(device)
    )


def resolve_device(device: str = "auto") -> str:
    """``auto`` → ``cuda`` when available, else ``cpu``; anything else is passed through."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def made_on(device: str) -> str:
    """Where a run is made, for provenance: the torch device (with the GPU's name) and the host."""
    import platform

    where = device
    if device.startswith("cuda") and torch.cuda.is_available():
        where = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"{where} on {platform.node() or 'unknown host'}"[:200]


def trained_on(devices: list[list[Any]]) -> list[dict[str, Any]]:
    """``made_with.trained_on`` of a resumed run: ``[{"from_step", "device"}]`` per attempt, oldest
    first. A first entry after step 0 means the earlier attempts ran before attempts were recorded
    (their device is not known to the run)."""
    return [{"from_step": int(step), "device": str(where)} for step, where in devices]


def build_model_of(params: TrainParams, task) -> torch.nn.Module:
    """The untrained model of run ``params`` on ``task`` (seeded by ``params.seed``): a scratch
    family's, or a transformers model's (its weights, or with ``from_config`` its config alone).

    Raises:
        PretrainedLoadError: a transformers model whose blocks make another family than ``params.family``."""
    torch.manual_seed(params.seed)
    source = params.pretrained or params.from_config
    if params.from_config and params.from_config_sha256:
        now = config_folder_sha256(params.from_config)
        if now is not None and now != params.from_config_sha256:
            raise ValueError(
                f"from_config {params.from_config!r}: its config.json changed since this run was made "
                f"(sha256 {params.from_config_sha256[:12]}… then, {now[:12]}… now); put the run's config "
                "back to rebuild it, or make a new run from the folder as it is"
            )
    if source:  # a transformers model: its weights, or its config alone
        from models_store.pretrained import PretrainedLoadError, load_pretrained

        model = load_pretrained(
            source, n_classes=task.n_classes, task_vocab_size=task.vocab_size, weights=not params.from_config
        )
        if model.config.family != params.family:  # else the run would be stored under the wrong family
            role = "pretrained model" if params.pretrained else "from_config"
            raise PretrainedLoadError(
                f"{role} {source!r} is a {model.config.family!r} model, but the run asks for family {params.family!r}"
            )
        return model
    return build_model(params.scratch_config(task))


def train(params: TrainParams, env: WorkerEnv, ctx: Context | None = None) -> int:
    """Train one run, store it, then run its measurements. Returns the run id.

    Resumable and idempotent unless ``params.force``: a run already stored with the same
    config hash and measured with the same measurement settings is returned as it is; one
    stored but not (or differently) measured is measured from its checkpoint, not trained again;
    one stored without usable weights has them rebuilt within its recorded step budget (:class:`Rebuild`)
    and is then measured; one whose training was killed part-way resumes from its last training
    checkpoint (:func:`training_checkpoint`). ``params.force`` trains afresh under the run's own budget."""
    ctx = ctx or SilentContext()
    task = get_task(params.task, **params.task_params)
    rebuild: Rebuild | None = None
    if not params.force:
        done, rebuild = _stored_run(params, task, env, ctx)
        if done is not None:
            return done
    model = build_model_of(params, task)
    # before any training (start_token: a bool once TrainParams is validated)
    check_positions(model, run_lengths(params), bool(params.start_token), model_label(params))
    if params.measure:  # the measurement's memory bound, before training rather than after it
        check_measure_memory(model, task, params.measure, measured_parts(params), None, params.train_length)
    result = train_or_init(params, task, model, rebuild, env, ctx)
    run_id = _store_run(params, task, model, result, rebuild, env, ctx)
    ctx.attach_run(run_id)
    if params.measure:
        run_measurements(
            run_id,
            model,
            task,
            params.seed,
            params.measure,
            env,
            ctx.sub(0.5, 1.0),
            train_length=params.train_length,
            parts=measured_parts(params),
            complete=set(measured_parts(params)) >= set(PARTS) or bool(params.control),
        )
    return run_id


def _stored_run(params: TrainParams, task, env: WorkerEnv, ctx: Context) -> tuple[int | None, Rebuild | None]:
    """What is stored of run ``params`` already: (its id, None) when nothing is left to do — it
    was complete, or it was trained and its missing parts are measured now — else (None, the
    :class:`Rebuild` of a run stored without usable weights, or None: train it)."""
    measure = params.measure
    run_id, state = stored_state(params, env)
    if state == "complete":
        ctx.log(f"run {run_id} ({params.name}) already stored with this config: skipped (force to re-run)")
        ctx.progress(1.0, "already stored")
        return run_id, None
    if run_id is None:  # "new": nothing of it is stored
        return None, None
    if state == "weightless":
        return None, _rebuilding(run_id, params, env, ctx)
    if state != "trained" or measure is None:
        return None, None
    try:
        _, _, model = load_run(run_id, env)
    except (RunNotFound, FileNotFoundError, KeyError, OSError, ValueError, RuntimeError) as exc:
        ctx.log(f"run {run_id}: checkpoint unusable ({exc}); rebuilding its weights")
        return None, _rebuilding(run_id, params, env, ctx)
    with session_scope(env.session_factory) as s:
        done = stored_parts(s, run_id, measure.config_hash())
        if s.get_one(Run, run_id).status != persist.REMEASURING:  # a retrained run's mark stays until it is measured
            persist.set_run_status(s, run_id, "trained")
    todo = tuple(p for p in measured_parts(params) if p not in done)
    # its bar goes on where a job that trained it would be: training done, the stored parts measured
    start = 0.5 + 0.5 * share_measured(measured_parts(params), done)
    ctx.attach_run(run_id)
    ctx.log(
        f"run {run_id}{f' ({params.name})' if params.name else ''} trained before: measuring only"
        + (f" ({', '.join(todo)}; {', '.join(sorted(done))} stored before)" if done else "")
    )
    run_measurements(
        run_id,
        model,
        task,
        params.seed,
        measure,
        env,
        ctx.sub(start, 1.0),
        train_length=params.train_length,
        parts=todo,
        complete=set(todo) | done >= set(PARTS) or bool(params.control),
    )
    return run_id, None


def _rebuilding(run_id: int, params: TrainParams, env: WorkerEnv, ctx: Context) -> Rebuild:
    """The :class:`Rebuild` of stored run ``run_id``, said in the job's log."""
    rebuild = rebuild_of(run_id, env)
    ctx.log(
        f"run {run_id} ({params.name}): no weights here; rebuilding them within the "
        f"{rebuild.steps} steps its budget gave it (recorded: {rebuild.of['steps']} steps, "
        f"{'early stop' if rebuild.of['stopped_early'] else 'stopped by its budget'})"
    )
    return rebuild


def train_or_init(params: TrainParams, task, model, rebuild: Rebuild | None, env: WorkerEnv, ctx: Context):
    """Train ``model`` in place (resuming its training checkpoint, or within a rebuild's step
    budget), or — for a random-init control — evaluate it untrained. Returns the ``TrainResult``."""
    if params.control == "init":  # the random-init control: the same build, never trained
        ctx.progress(0.0, f"random-init control of {params.family} on {params.task}")
        return untrained_result(
            model,
            task,
            seed=params.seed,
            train_length=params.train_length,
            n_eval_sequences=params.n_eval_sequences,
            device=env.device,
        )
    ctx.progress(0.0, f"training {params.family} on {params.task}")
    config = params.train_config()
    if rebuild:  # the step budget replaces the wall-clock cap (docs/SCIENCE.md#rebuilding-weights)
        config = dataclasses.replace(config, max_seconds=None)
    resume_file = training_checkpoint(params, env)
    if params.force:  # trains afresh: a killed earlier attempt's state is not resumed
        resume_file.unlink(missing_ok=True)
    for other in in_flight.other_states(env.store_dir, params):  # this run made with other settings: left unused
        ctx.log(in_flight.other_state_warning(params, other))
    # the note names the suite of the state and the command that resumes it (export --in-flight)
    in_flight.write_note(resume_file, params)
    result = train_model(
        model,
        task,
        config,
        seed=params.seed,
        stop_at_step=rebuild.steps if rebuild else None,
        device=env.device,
        ctx=ctx.sub(0.0, 0.5 if params.measure else 0.9),
        checkpoint=resume_file,
        checkpoint_key=params.run_hash(),
        where=made_on(env.device),
    )
    in_flight.remove_note(resume_file)  # train_model removed the checkpoint itself
    return result


def _acc(x: float | None) -> str:
    """A held-out accuracy as a log line says it (4 decimals, as the run pages; "-" when none)."""
    return "-" if x is None else f"{x:.4f}"


def _store_run(params: TrainParams, task, model, result, rebuild: Rebuild | None, env: WorkerEnv, ctx) -> int:
    """Evaluate the behaviour, save the weights and store the run (one transaction with the
    deletion of the rows of a model it replaces). Returns the run id."""
    measure = params.measure
    eval_lengths = measure.eval_lengths if measure else [params.train_length]
    behav = behaviour(
        model, task, seed=params.seed, eval_lengths=eval_lengths, n_sequences=params.n_eval_sequences, device=env.device
    )
    run_hash = params.run_hash()
    checkpoint_id = env.store.save(
        model, provenance={"run_config": params.run_config(), "config_hash": run_hash, "steps": result.steps}
    )
    with ctx.storing(), session_scope(env.session_factory) as s:  # one transaction: the run and the end of its old rows
        before = s.execute(select(Run.status).where(Run.config_hash == run_hash)).scalar()
        run_id = persist.save_run(
            s,
            commit=False,
            name=params.name or f"{params.family}-{params.task}-s{params.seed}",
            suite=params.suite,
            family=params.family,
            task=params.task,
            seed=params.seed,
            pretrained=params.pretrained,
            n_layers=model.n_layers,
            d_model=model.d_model,
            n_params=model.n_params,
            task_params=task.params,
            model_config=model.config.to_dict(),
            train_config=params.run_config(),
            config_hash=run_hash,
            checkpoint_id=checkpoint_id,
            status="trained",
            **result.run_fields(),
            behaviour=behav,
            early_stop_acc=params.early_stop_acc,
            control=params.control,
            made_on=made_on(env.device),
            made_with={
                **code_versions(),
                **({"rebuilt_from": rebuild.of} if rebuild else {}),
                **({"resumed_at_steps": result.resumed_at} if result.resumed_at else {}),
                # where each attempt ran, when it was resumed: a GPU lease's steps, then a CPU's
                **({"trained_on": trained_on(result.devices)} if result.resumed_at else {}),
            },
        )
        dropped = persist.drop_results(s, run_id, commit=False)  # a retrained run: its old model's rows go
        # marked until it is measured again (run_measurements); a rebuild of a rebuild cut short keeps it
        if measure is not None and (dropped or before == persist.REMEASURING):
            persist.set_run_status(s, run_id, persist.REMEASURING, commit=False)
    if dropped:
        ctx.log(
            f"run {run_id}: retrained; {dropped} result row(s) of the model it replaces deleted"
            + (f" (status {persist.REMEASURING!r} until it is measured again)" if measure is not None else "")
        )
    ctx.log(
        f"run {run_id}: {result.steps} steps in {result.seconds:.1f} s, "
        f"held-out acc {_acc(result.final_heldout_acc)}"
        + (
            f" (recorded before the rebuild: {rebuild.of['steps']} steps, held-out acc {_acc(rebuild.of['heldout_acc'])})"
            if rebuild
            else ""
        )
    )
    return run_id


def training_checkpoint(params: TrainParams, env: WorkerEnv) -> Path:
    """Where run ``params`` keeps its mid-run training state (docs/SCIENCE.md#resuming-training):
    ``<store>/training/<run hash>.pt``, so the same run started again by any worker resumes it."""
    return Path(env.store_dir) / "training" / f"{params.run_hash()}.pt"


def run_measurements(
    run_id: int,
    model,
    task,
    seed: int,
    measure: MeasureParams,
    env: WorkerEnv,
    ctx: Context,
    *,
    train_length: int,
    parts: tuple[str, ...] = PARTS,
    complete: bool = True,
) -> None:
    """Probes, interventions, patching on a trained model (``parts`` of them), each stored as it
    finishes, then — when ``complete`` (every part is stored now) — the run marked ``complete``:
    :func:`worker.run_measurement.measure_run` (the one entry path), with interventions fitted at the
    run's ``train_length``. A run retrained with its old rows deleted (``persist.REMEASURING``)
    is ``trained`` again once its ``parts`` are stored, not before."""
    measure_run(MeasuredRun(run_id, seed, train_length, task, model), measure, env, ctx, parts=parts, complete=complete)
    with ctx.storing(), session_scope(env.session_factory) as s:
        persist.end_remeasuring(s, run_id)


def load_run(run_id: int, env: WorkerEnv):
    """The stored run's params, task and model (on ``env.device``).

    Raises:
        RunNotFound: no such run, or it has no checkpoint.
        CheckpointNotItsRun: the checkpoint's config is not the run's model config
            (``models_store.binding``; its tensors' shapes are checked against that config by
            ``load_state_dict(strict=True)``).
    """
    with session_scope(env.session_factory) as s:
        run = s.get(Run, run_id)
        if run is None or not run.checkpoint_id:
            raise RunNotFound(f"run {run_id} not found" if run is None else missing_weights(run))
        train_config, checkpoint_id = dict(run.train_config), run.checkpoint_id
        row = {k: getattr(run, k) for k in ("id", "name", "model_config", "n_layers", "d_model")}
    # the weights must be this run's model before anything is measured on them
    why = config_problem(env.store.config(checkpoint_id).to_dict(), row)
    if why is not None:
        raise CheckpointNotItsRun(f"run {run_id}: its checkpoint {checkpoint_id[:12]}… is refused: {why}")
    params = TrainParams(**train_config)
    task = get_task(params.task, **params.task_params)
    model = env.store.load(checkpoint_id).to(env.device).eval()
    return params, task, model


def _loaded(run_id: int, env: WorkerEnv, lengths: list[int] | None = None) -> tuple[MeasuredRun, TrainParams]:
    """The stored run ready to measure; ``lengths``: the eval lengths the job asks for, checked
    against the model's learned position table first (a clear error, not an index error mid-job)."""
    params, task, model = load_run(run_id, env)
    if lengths:
        check_file_lengths(task, lengths)
        check_positions(model, {"eval_length": max(lengths)}, params.start_token, f"run {run_id}'s model")
    return MeasuredRun(run_id, params.seed, params.train_length, task, model), params


def check_file_lengths(task, lengths: list[int]) -> None:
    """Refuse eval lengths past a file task's longest row (``FileTask.eval_length_problem``; the
    API's submit checks say the same as a 422).

    Raises:
        ValueError: a length above the file's longest row, naming the task and its lengths.
    """
    if isinstance(task, FileTask) and (why := task.eval_length_problem(lengths)):
        raise ValueError(why)


def probe(params: ProbeParams, env: WorkerEnv, ctx: Context | None = None) -> int:
    """A probe job: :func:`measure_run` with the probes only (eval lengths default to the run's)."""
    run, trained = _loaded(params.run_id, env, params.eval_lengths)
    lengths = params.eval_lengths or stored_eval_lengths(params.run_id, env, trained.train_length)
    measure_run(run, probe_settings(params, lengths), env, ctx, parts=["probes"], result_hash=params.config_hash())
    return params.run_id


def intervene(params: InterveneParams, env: WorkerEnv, ctx: Context | None = None) -> int:
    """An intervene job: :func:`measure_run` with the interventions only, fitted at the run's
    ``train_length`` like the suite's."""
    run, trained = _loaded(params.run_id, env, params.eval_lengths)
    lengths = params.eval_lengths or stored_eval_lengths(params.run_id, env, trained.train_length)
    measure_run(
        run,
        intervene_settings(params, lengths),
        env,
        ctx,
        parts=["interventions"],
        layers=params.layers,
        result_hash=params.config_hash(),
    )
    return params.run_id


def patch(params: PatchParams, env: WorkerEnv, ctx: Context | None = None) -> int:
    """A patch job: :func:`measure_run` with the patching grid only."""
    run, trained = _loaded(params.run_id, env)
    lengths = stored_eval_lengths(params.run_id, env, trained.train_length)
    if "eval_length" not in params.model_fields_set and isinstance(run.task, FileTask):
        params = params.model_copy(update={"eval_length": run.task.max_length})  # the file's sequences
    check_file_lengths(run.task, [params.eval_length])
    check_positions(
        run.model, {"eval_length": params.eval_length}, bool(trained.start_token), f"run {params.run_id}'s model"
    )
    measure_run(run, patch_settings(params, lengths), env, ctx, parts=["patching"], result_hash=params.config_hash())
    return params.run_id


def run_suite(params: SuiteParams, env: WorkerEnv, ctx: Context | None = None) -> list[int]:
    """Every run of a suite, one after another in this process. Returns the run ids."""
    ctx = ctx or SilentContext()
    jobs = expand_suite(params)
    check_one_run_per_seed(jobs, env.session_factory)
    if warning := mixed_versions_warning(jobs, env.session_factory):
        ctx.log(warning)  # the job's log: a suite is meant to be measured by one version
    ids = []
    # Resume (the default): train() skips the runs already stored with their config hash.
    for i, job in enumerate(jobs):
        ctx.check_cancelled()
        ctx.log(f"[{i + 1}/{len(jobs)}] {job.name}")
        ids.append(train(job, env, ctx.sub(i / len(jobs), (i + 1) / len(jobs))))
    return ids


def execute(kind: str, params: BaseModel, ctx: Context, env: WorkerEnv) -> dict[str, Any]:
    """Run one job of ``kind`` in process; returns a summary (``run_id`` or ``run_ids``).

    Raises:
        ValueError: unknown kind; RunNotFound: a missing run; JobCancelled: cancelled.
    """
    if kind == "train":
        return {"run_id": train(params_of(kind, params, TrainParams), env, ctx)}
    if kind == "probe":
        return {"run_id": probe(params_of(kind, params, ProbeParams), env, ctx)}
    if kind == "intervene":
        return {"run_id": intervene(params_of(kind, params, InterveneParams), env, ctx)}
    if kind == "patch":
        return {"run_id": patch(params_of(kind, params, PatchParams), env, ctx)}
    if kind == "suite":
        return {"run_ids": run_suite(params_of(kind, params, SuiteParams), env, ctx)}
    raise ValueError(f"unknown job kind {kind!r}")
