"""``layerscope suite --preset P``: train and measure a suite (families × tasks × seeds) in this
process, or enqueue it for the workers with ``--submit``.

    layerscope suite --preset quick [--submit]
    layerscope suite --preset paper --force    # re-run runs already stored (default: skip them)

``suite delete|tag|note|move NAME`` are registered on the same group by ``backend.cli.runs``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import ValidationError

from backend.cli import common as C
from backend.cli.tasks import known_tasks, task_names
from layerscope_core.registry import BUILTIN_TASKS, MEASURE_PARTS

suite_app = typer.Typer()  # `suite --preset …` runs one (the callback); `suite delete|tag|note|move NAME`

# The options of `suite`, named here so the command reads as its steps.
PresetOption = Annotated[
    C.Preset | None,
    typer.Option(
        help="smoke (tests, < 2 min) | quick (~8–25 min on 2 cores) | paper (step budgets, controls) | pretrained | paper-75s (the first study's settings)"
    ),
]
FamilyOption = Annotated[
    list[C.FamilyChoice] | None,
    typer.Option(help=f"Only these families (repeat the option): {', '.join(C.FAMILIES)}."),
]


def _help_task_names() -> tuple[str, ...]:
    """The task names the help lists; the built-ins alone where the settings cannot be read (a
    malformed ``LAYERSCOPE_*`` variable: ``backend.cli.entry.main`` says which, in one line)."""
    try:
        return task_names()
    except ValidationError:
        return BUILTIN_TASKS


TaskOption = Annotated[
    list[str] | None,
    typer.Option(
        callback=known_tasks,
        help=(
            f"Only these tasks (repeat the option): {', '.join(_help_task_names())} "
            "(built-in, plugin and file tasks: layerscope task add / task list)."
        ),
    ),
]
SeedOption = Annotated[list[int] | None, typer.Option(help="These seeds instead of the preset's (repeat).")]
PretrainedOption = Annotated[
    list[str] | None,
    typer.Option(
        callback=C.model_sources,
        help=(
            "Fine-tune these transformers models (hub names or local folders; repeat) instead of the preset's "
            "families: any architecture with a block list (GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, Mamba, "
            "Mamba-2, Falcon-Mamba, ...)."
        ),
    ),
]
FromConfigOption = Annotated[
    list[str] | None,
    typer.Option(
        "--from-config",
        callback=C.model_sources,
        help=(
            "Train these transformers architectures from scratch (hub names or local folders holding a "
            "config.json; repeat): built from the config with random weights, then trained on the task, "
            "instead of (or with --pretrained: beside) the preset's families."
        ),
    ),
]
NameOption = Annotated[
    str | None,
    typer.Option(
        callback=C.new_suite_name,
        help="Suite name stored with the runs (default: the preset): 1–100 ASCII letters, digits, '.', '_' "
        "and '-', starting with a letter or a digit.",
    ),
]
DeviceOption = Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")]
SubmitOption = Annotated[
    bool,
    typer.Option(
        "--submit",
        help="Enqueue the suite as a job (the jobs table + the queue, as POST /api/jobs does) "
        "instead of running it here: the workers run its train jobs, several at a time "
        "with `layerscope worker --concurrency N`.",
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume/--force",
        help="--resume (default): skip runs already stored with the same config hash "
        "and measured, finish the rest (an interrupted suite resumes where it "
        "stopped); --force: train and measure every run again.",
    ),
]
MaxStepsOption = Annotated[int | None, typer.Option(min=1, help="Override the preset's step cap per run.")]
MaxSecondsOption = Annotated[
    float | None, typer.Option(min=0.001, help="Override the preset's per-run training time budget (seconds).")
]
RebuildOption = Annotated[
    bool,
    typer.Option(
        "--rebuild-weights",
        help="Rebuild the weights of stored runs that have none here (imported without "
        "--weights) within their recorded step budget, and measure them again, measured or "
        "not. (Unmeasured ones are rebuilt anyway.)",
    ),
]
ControlsOption = Annotated[
    bool | None,
    typer.Option(
        "--controls/--no-controls",
        help="Add (or leave out) each run's random-init control: the same architecture "
        "and seed, untrained, probed (default: the preset's choice; paper adds them).",
        show_default=False,
    ),
]
OnlyControlsOption = Annotated[
    bool, typer.Option("--only-controls", help="Run only the random-init controls of the selected runs.")
]
MeasureOption = Annotated[
    list[C.MeasurePartChoice] | None,
    typer.Option(
        "--measure",
        help="Measure only these parts now (repeat: probes | interventions | patching; default all). "
        "`--measure probes` trains and probes every run first; the same suite without it adds "
        "the rest later, skipping what is stored.",
    ),
]


@suite_app.callback(invoke_without_command=True)
def suite(
    ctx: typer.Context,
    preset: PresetOption = None,
    family: FamilyOption = None,
    task: TaskOption = None,
    seed: SeedOption = None,
    pretrained: PretrainedOption = None,
    from_config: FromConfigOption = None,
    name: NameOption = None,
    device: DeviceOption = None,
    submit: SubmitOption = False,
    resume: ResumeOption = True,
    max_steps: MaxStepsOption = None,
    max_seconds: MaxSecondsOption = None,
    rebuild_weights: RebuildOption = False,
    controls: ControlsOption = None,
    only_controls: OnlyControlsOption = False,
    measure: MeasureOption = None,
    precision: C.PrecisionOption = C.PrecisionChoice.fp32,
) -> None:
    """Run a suite (families × tasks × seeds: train, probe, intervene, patch) in this process,
    or enqueue it for the workers with --submit. Runs already stored are skipped (--force re-runs).
    `layerscope suite delete|tag|note|move NAME` deletes, annotates or moves runs of a stored suite."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    if ctx.invoked_subcommand is not None:
        return
    if preset is None:
        raise C.click_exceptions.MissingParameter(
            ctx=ctx,
            param=next(p for p in ctx.command.params if p.name == "preset"),  # type: ignore[arg-type]  # typer's own parameter class, typed as click's
        )
    if device is not None:
        if submit:
            raise typer.BadParameter(
                "a submitted suite runs on the workers' devices (layerscope worker --device)", param_hint="'--device'"
            )
        C.check_device(device)
    params = SuiteParams(
        preset=preset.value,
        families=[f.value for f in family] if family else None,
        tasks=list(task) if task else None,
        seeds=seed or None,
        name=name,
        force=not resume,
        max_steps=max_steps,
        max_seconds=max_seconds,
        rebuild_weights=rebuild_weights,
        controls="only" if only_controls else controls,
        parts=[m.value for m in measure] if measure else None,
        precision=precision.value,
        **({"pretrained": pretrained} if pretrained else {}),
        **({"from_config": from_config} if from_config else {}),
    )
    jobs = expand_suite(params)
    settings = C.settings()
    _refuse_over_memory(jobs, settings)  # before the database is opened: nothing written or queued
    _refuse_short_positions(jobs)
    factory = C.session_factory(settings)
    _refuse_other_settings(jobs, factory)
    done = 0 if not resume else _count_stored(jobs, settings, factory)
    if done < len(jobs):  # something will be measured: beside rows of another version?
        _warn_mixed_versions(jobs, factory)
    if submit:
        return _submit_suite(params, len(jobs), settings, factory, done)
    typer.echo(
        f"layerscope: suite {params.name or preset.value}: {len(jobs)} run(s) into {C.redact(settings.resolved_db_url)}"
        + (f"; {done} already stored, skipped (--force to re-run)" if done else ""),
        err=True,
    )
    out = C.run_here("suite", params, settings, factory, device)
    typer.echo(f"layerscope: {stored_runs(out.get('run_ids', []))}")
    if params.parts:
        rest = [p for p in MEASURE_PARTS if p not in params.parts]
        if rest:
            typer.echo(
                f"layerscope: measured {', '.join(params.parts)} only; {', '.join(rest)} still to measure: "
                "run the same suite without --measure",
                err=True,
            )


def stored_runs(run_ids: list[int]) -> str:
    """What a suite stored, its run ids said as ids (not read as a count): "stored run id 2",
    "stored run ids 2, 5", "stored no run"."""
    if not run_ids:
        return "stored no run"
    return f"stored run id{'s' if len(run_ids) > 1 else ''} {', '.join(map(str, run_ids))}"


def _count_stored(jobs: list, settings, factory) -> int:
    """How many of a suite's runs are already stored complete (those a resumed suite skips)."""
    from worker.env import WorkerEnv
    from worker.stored_runs import stored_state

    env = WorkerEnv(factory, settings.resolved_store_dir)
    return sum(stored_state(j, env)[1] == "complete" for j in jobs)


def _refuse_over_memory(jobs: list, settings) -> None:
    """Refuse, in one line, a suite with a run whose estimated peak memory is over
    ``settings.max_job_memory_gib`` (``worker.memory``): the first such run and how many more."""
    from worker.memory import LIMIT_NAME, limit_bytes, one_line, suite_problems

    over = suite_problems(jobs, limit_bytes(settings))
    if over:
        job, problem = over[0]
        # a suite's job fields (measure.n_probe_sequences, batch_size) are its preset's, not options
        # of this command: the message names what to change (the memory setting, the preset)
        raise C.CliError(
            one_line([problem], job.name, fields=False)
            + _more_runs(over)
            + "; this command sets none of those: they are the preset's (another preset, a smaller model, "
            f"or a higher {LIMIT_NAME})"
        )


def _refuse_short_positions(jobs: list) -> None:
    """Refuse, in one line, a suite with a run longer than its transformers model's learned position
    table (``worker.position_checks``): said here, not by the worker once the run is queued."""
    from worker.position_checks import position_problems

    short = position_problems(jobs)
    if short:
        job, (_, msg, _) = short[0]
        raise C.CliError(f"run {job.name}: {msg}{_more_runs(short)}")


def _more_runs(problems: list) -> str:
    """`` (and N more run(s))`` beside the first of ``problems`` ((job, problem) pairs), or ""."""
    more = len({job.name for job, _ in problems}) - 1
    return f" (and {more} more run(s))" if more else ""


def _warn_mixed_versions(jobs: list, factory) -> None:
    """Say, before anything runs, that the suite holds results of another measurement version."""
    from worker.suite_settings import mixed_versions_warning

    warning = mixed_versions_warning(jobs, factory)
    if warning:
        typer.echo(f"layerscope: {warning}", err=True)


def _refuse_other_settings(jobs: list, factory) -> None:
    """A suite holds one run per seed (docs/SCIENCE.md#suites): refuse, in one line per group of
    stored runs of these cells made with other settings, before anything is trained or queued."""
    from worker.suite_settings import SuiteSettingsConflict, check_one_run_per_seed

    try:
        check_one_run_per_seed(jobs, factory)
    except SuiteSettingsConflict as exc:
        raise C.CliError(str(exc)) from exc


def _submit_suite(params: Any, n: int, settings, factory, done: int = 0) -> None:
    from worker.queue import JobQueue, submit

    queue = JobQueue.from_settings(settings)
    job_id = submit(factory, queue, "suite", params, max_attempts=settings.max_attempts)
    skipped = f"; {done} already stored are skipped by the workers" if done else ""
    typer.echo(
        f"layerscope: suite {params.name or params.preset} submitted as job {job_id} ({n} train job(s){skipped}) "
        f"to the {queue.kind} queue of {C.redact(settings.resolved_db_url)}; start workers with "
        "`layerscope worker` and follow it at /jobs",
        err=True,
    )
    typer.echo(str(job_id))
