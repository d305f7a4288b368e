"""The ``layerscope`` command line (typer).

    layerscope demo                      # the README's main command
    layerscope serve [--host --port]     # API + dashboard
    layerscope worker [--device --name --concurrency N]  # consume jobs (N slots on one device)
    layerscope suite --preset quick [--submit]  # run a suite in this process, or enqueue it
    layerscope suite --preset paper --force    # re-run runs already stored (default: skip them)
    layerscope export --suite NAME -o FILE     # a suite's results bundle (one portable file)
    layerscope import FILE                     # load a bundle; rows already present are kept
    layerscope report BUNDLE -o docs/RESULTS.md  # the study's claims next to this reproduction's
    layerscope probe|intervene|patch RUN_ID
    layerscope token create --name NAME
    layerscope task add FILE --name NAME      # your own labelled tokens (JSONL / Parquet) as a task
    layerscope export-model RUN_ID -o DIR      # a run's model as a folder transformers' AutoModel loads
    layerscope capture RUN_ID --site blocks.1.resid_post -o FILE   # named activations (run_with_cache)
    layerscope db upgrade

Wrong arguments, an unknown preset or run id give a one-line message and a non-zero exit.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from layerscope_core.plugins import method_names
from layerscope_core.registry import MEASURE_PARTS, PRESETS, family_names

FAMILIES = family_names()  # the registered families when the CLI is imported (built-ins + plugins)

try:  # typer ≥ 0.2x vendors its own click; its exceptions are not click's
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer on top of click
    from click import exceptions as _cx

app = typer.Typer(
    name="layerscope",
    help="Where does a sequence model keep its state? Train, probe, intervene, patch — and explore in the browser.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
token_app = typer.Typer(
    help="API tokens (needed for writes when the server listens beyond loopback).", no_args_is_help=True
)
db_app = typer.Typer(help="The results database.", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(db_app, name="db")
suite_app = typer.Typer()  # `suite --preset …` runs one (the callback); `suite delete|tag|note NAME`
app.add_typer(suite_app, name="suite")
from backend.cli_tasks import known_tasks, task_app, task_names  # noqa: E402 - registered after the app exists

app.add_typer(task_app, name="task")
from backend.cli_models import capture, export_model  # noqa: E402 - registered after the app exists

app.command("export-model")(export_model)
app.command("capture")(capture)

log = logging.getLogger("layerscope")


def _print_version(value: bool) -> None:
    if value:
        from layerscope_core.provenance import code_versions, commit_label

        v = code_versions()
        typer.echo(
            f"layerscope {v['layerscope']}"
            + (f" (commit {commit_label(v, 12)})" if v["git_commit"] else "")
            + f"; torch {v['torch']}, transformers {v['transformers']}, Python {v['python']}"
        )
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version (and commit) and exit."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", envvar="LAYERSCOPE_DEBUG", help="Print the traceback of an error too.")
    ] = False,
) -> None:
    """Where does a sequence model keep its state? Train, probe, intervene, patch — and explore in the browser."""
    global _DEBUG
    _DEBUG = debug


class CliError(Exception):
    """A known failure: printed as one line, exit status 1."""


# Choices from the one list of each (layerscope_core.registry), so `--help` and a typo's error list them.
Preset = StrEnum("Preset", {p: p for p in PRESETS})  # type: ignore[misc]
FamilyChoice = StrEnum("FamilyChoice", {f: f for f in FAMILIES})  # type: ignore[misc]
MeasurePartChoice = StrEnum("MeasurePartChoice", {p: p for p in MEASURE_PARTS})  # type: ignore[misc]
METHOD_NAMES = method_names()  # the built-ins, then the plugins'
MethodChoice = StrEnum("MethodChoice", {m: m for m in METHOD_NAMES})  # type: ignore[misc]


def _settings(**overrides: Any):
    from store.config import get_settings

    s = get_settings()
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return s.model_copy(update=overrides) if overrides else s


def _logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "huey", "alembic", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _init_db(settings) -> Any:
    from backend.core.startup import open_database
    from store.session import make_engine, make_sessionmaker

    open_database(settings)  # a StartupError (one line) for a bad home, URL or database file
    return make_sessionmaker(make_engine(settings.resolved_db_url))


_DEBUG = False  # --debug / LAYERSCOPE_DEBUG: an error's traceback is printed before its line


def _err(message: str) -> None:
    if (_DEBUG or os.environ.get("LAYERSCOPE_DEBUG", "").lower() in ("1", "true", "yes")) and sys.exc_info()[0]:
        import traceback

        traceback.print_exc()
    typer.echo(f"layerscope: error: {message}", err=True)


# ----------------------------------------------------------------------------- serve / worker


@app.command()
def serve(
    bundle: Annotated[
        Path | None,
        typer.Argument(help="A results bundle to show read-only, without a database (read into a temporary one)."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Interface to listen on (default 127.0.0.1; beyond loopback every write needs a token)."),
    ] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default 8050).")] = None,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard at / too.")] = True,
    limit_concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000,
            help="Heavy requests (exports, aggregates: /api/export/*, /api/curves, /api/profiles, "
            "/api/claims, suite bundles) served at once; more answer 503 with Retry-After, so "
            "/api/health and light reads stay fast (default 4: LAYERSCOPE_LIMIT_CONCURRENCY).",
        ),
    ] = None,
) -> None:
    """Serve the API (/api) and the dashboard (/); `serve BUNDLE.zip`: a bundle, read-only."""
    import uvicorn

    from backend.app import create_app

    _logging()
    if bundle is not None:
        from backend.serve_bundle import bundle_app

        settings, application = bundle_app(bundle, host=host, port=port, dashboard=dashboard)
        typer.echo(f"layerscope: {bundle} read into a temporary database, served read-only", err=True)
        _announce(settings)
        uvicorn.run(application, host=settings.host, port=settings.port, log_level="info", access_log=False)
        return
    settings = _settings(host=host, port=port)
    if limit_concurrency is not None:
        settings = settings.model_copy(update={"limit_concurrency": limit_concurrency})
    factory = _init_db(settings)
    application = create_app(settings, factory, dashboard=dashboard)
    _announce(settings)
    uvicorn.run(application, host=settings.host, port=settings.port, log_level="info", access_log=False)


def _announce(settings) -> None:
    typer.echo(
        f"layerscope: dashboard at {settings.resolved_api_url}/   API at {settings.resolved_api_url}/api/docs", err=True
    )
    if settings.listens_beyond_loopback:
        typer.echo(
            "layerscope: listening beyond loopback — every write needs 'Authorization: Bearer <token>' "
            "(layerscope token create --name NAME)",
            err=True,
        )


@app.command()
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

    _logging()
    settings = _settings()
    if device is not None:
        _check_device(device)
    factory = _init_db(settings)  # fails once, here, when the DB is unreachable
    if concurrency > 1:
        return _supervise(concurrency, name, device, executor, threads, max_jobs, idle_exit)
    if parent_pid is not None:
        packing.become_slot(parent_pid)
    else:
        signal.signal(signal.SIGTERM, _raise_interrupt)  # `docker stop`: release the job like Ctrl-C
    if threads is not None:
        packing.configure_threads(threads, torch_now=executor is None)
    runner = Runner(settings, device=device, name=name, executor=load_executor(executor), session_factory=factory)
    typer.echo(f"layerscope: worker {runner.name} on the {runner.queue.kind} queue (Ctrl-C to stop)", err=True)
    try:
        runner.run_forever(max_jobs=max_jobs, idle_exit_s=idle_exit)
    except KeyboardInterrupt:
        typer.echo(f"layerscope: worker {runner.name} stopped", err=True)
    finally:
        _quiet_exit()


def _supervise(
    n: int,
    name: str | None,
    device: str | None,
    executor: str | None,
    threads: int | None,
    max_jobs: int | None,
    idle_exit: float | None,
) -> int:
    from worker.packing import Supervisor

    extra = (["--max-jobs", str(max_jobs)] if max_jobs else []) + (
        ["--idle-exit", str(idle_exit)] if idle_exit is not None else []
    )
    sup = Supervisor(n, name=name, device=device, executor=executor, threads=threads, extra_args=extra)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `docker stop`: every slot hands its job back
    typer.echo(
        f"layerscope: {n} worker slots on {device or _settings().device}, {sup.threads} CPU thread(s) "
        f"each (Ctrl-C to stop)",
        err=True,
    )
    try:
        rc = sup.run()
    except KeyboardInterrupt:
        typer.echo(f"layerscope: {n} worker slots stopped", err=True)
        return 0
    finally:
        _quiet_exit()
    if rc:
        raise CliError(f"worker slot(s) failed (exit status {rc}); see the log above")
    return 0


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C, once: a second SIGTERM (the demo's worker also gets one when the demo
    exits) must not interrupt the job's release or the interpreter's exit (atexit callbacks)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _quiet_exit() -> None:
    """The work is handed back: a late SIGTERM/SIGINT while the interpreter exits is ignored
    (no "Exception ignored in atexit callback … KeyboardInterrupt" traceback). Registered last,
    this atexit callback runs before the others (LIFO); nothing changes before the exit."""
    import atexit

    atexit.unregister(_ignore_stop_signals)
    atexit.register(_ignore_stop_signals)


def _ignore_stop_signals() -> None:
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _check_device(device: str) -> None:
    import re

    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", device):
        raise typer.BadParameter(f"{device!r} is not one of auto, cpu, cuda, cuda:N", param_hint="'--device'")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter(
                f"{device!r}: no CUDA device is available on this machine", param_hint="'--device'"
            )
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise typer.BadParameter(
                f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)", param_hint="'--device'"
            )


# ----------------------------------------------------------------------------- in-process work


def _env(settings, factory, device: str | None):
    from worker.pipeline import WorkerEnv, resolve_device

    return WorkerEnv(factory, settings.resolved_store_dir, resolve_device(device or settings.device))


def _require_run(factory, run_id: int, store_dir: Path | None = None) -> None:
    """The run exists and its weights are here to load. Raises CliError (one line) otherwise."""
    from store.models import Run
    from worker.run_weights import missing_weights

    with factory() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise CliError(f"run {run_id} not found")
        if why := missing_weights(run, store_dir):
            raise CliError(why)


def _execute(kind: str, params: Any, settings, factory, device: str | None) -> dict:
    from science.context import JobContext
    from worker.pipeline import execute

    ctx = JobContext(description=kind)
    try:
        return execute(kind, params, ctx, _env(settings, factory, device))
    finally:
        ctx.close()


@suite_app.callback(invoke_without_command=True)
def suite(
    ctx: typer.Context,
    preset: Annotated[
        Preset | None,
        typer.Option(
            help="smoke (tests, < 2 min) | quick (~10–15 min on 2 cores) | paper (step budgets, controls) | pretrained | paper-75s (the first study's settings)"
        ),
    ] = None,
    family: Annotated[
        list[FamilyChoice] | None, typer.Option(help=f"Only these families (repeat the option): {', '.join(FAMILIES)}.")
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option(
            callback=known_tasks,
            help=(
                f"Only these tasks (repeat the option): {', '.join(task_names())} "
                "(built-in, plugin and file tasks: layerscope task add / task list)."
            ),
        ),
    ] = None,
    seed: Annotated[list[int] | None, typer.Option(help="These seeds instead of the preset's (repeat).")] = None,
    pretrained: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "Fine-tune these transformers models (hub names or local folders; repeat) instead of the preset's "
                "families: any architecture with a block list (GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, Mamba, "
                "Mamba-2, Falcon-Mamba, ...)."
            )
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Suite name stored with the runs (default: the preset).")] = None,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")] = None,
    submit: Annotated[
        bool,
        typer.Option(
            "--submit",
            help="Enqueue the suite as a job (the jobs table + the queue, as POST /api/jobs does) "
            "instead of running it here: the workers run its train jobs, several at a time "
            "with `layerscope worker --concurrency N`.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--force",
            help="--resume (default): skip runs already stored with the same config hash "
            "and measured, finish the rest (an interrupted suite resumes where it "
            "stopped); --force: train and measure every run again.",
        ),
    ] = True,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Override the preset's step cap per run.")] = None,
    max_seconds: Annotated[
        float | None, typer.Option(min=0.001, help="Override the preset's per-run training time budget (seconds).")
    ] = None,
    rebuild_weights: Annotated[
        bool,
        typer.Option(
            "--rebuild-weights",
            help="Rebuild the weights of stored runs that have none here (imported without "
            "--weights) within their recorded step budget, and measure them again, measured or "
            "not. (Unmeasured ones are rebuilt anyway.)",
        ),
    ] = False,
    controls: Annotated[
        bool | None,
        typer.Option(
            "--controls/--no-controls",
            help="Add (or leave out) each run's random-init control: the same architecture "
            "and seed, untrained, probed (default: the preset's choice; paper adds them).",
            show_default=False,
        ),
    ] = None,
    only_controls: Annotated[
        bool, typer.Option("--only-controls", help="Run only the random-init controls of the selected runs.")
    ] = False,
    measure: Annotated[
        list[MeasurePartChoice] | None,
        typer.Option(
            "--measure",
            help="Measure only these parts now (repeat: probes | interventions | patching; default all). "
            "`--measure probes` trains and probes every run first; the same suite without it adds "
            "the rest later, skipping what is stored.",
        ),
    ] = None,
) -> None:
    """Run a suite (families × tasks × seeds: train, probe, intervene, patch) in this process,
    or enqueue it for the workers with --submit. Runs already stored are skipped (--force re-runs).
    `layerscope suite delete|tag|note NAME` deletes or annotates a stored suite."""
    from worker.params import SuiteParams

    if ctx.invoked_subcommand is not None:
        return
    if preset is None:
        raise _cx.MissingParameter(ctx=ctx, param=next(p for p in ctx.command.params if p.name == "preset"))
    if device is not None:
        if submit:
            raise typer.BadParameter(
                "a submitted suite runs on the workers' devices (layerscope worker --device)", param_hint="'--device'"
            )
        _check_device(device)
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
        **({"pretrained": pretrained} if pretrained else {}),
    )
    from worker.presets import expand_suite

    jobs = expand_suite(params)
    n = len(jobs)
    settings = _settings()
    factory = _init_db(settings)
    _refuse_other_settings(jobs, factory)
    done = 0 if not resume else _count_stored(jobs, settings, factory)
    if submit:
        return _submit_suite(params, n, settings, factory, done)
    typer.echo(
        f"layerscope: suite {params.name or preset.value}: {n} run(s) into {_redact(settings.resolved_db_url)}"
        + (f"; {done} already stored, skipped (--force to re-run)" if done else ""),
        err=True,
    )
    out = _execute("suite", params, settings, factory, device)
    typer.echo(f"layerscope: stored run(s) {', '.join(map(str, out.get('run_ids', [])))}")


def _count_stored(jobs: list, settings, factory) -> int:
    """How many of a suite's runs are already stored complete (those a resumed suite skips)."""
    from worker.pipeline import WorkerEnv, stored_state

    env = WorkerEnv(factory, settings.resolved_store_dir)
    return sum(stored_state(j, env)[1] == "complete" for j in jobs)


def _refuse_other_settings(jobs: list, factory) -> None:
    """A suite holds one run per seed (docs/SCIENCE.md#suites): refuse, in one line per group of
    stored runs of these cells made with other settings, before anything is trained or queued."""
    from worker.suite_settings import SuiteSettingsConflict, check_one_run_per_seed

    try:
        check_one_run_per_seed(jobs, factory)
    except SuiteSettingsConflict as exc:
        raise CliError(str(exc)) from exc


def _submit_suite(params: Any, n: int, settings, factory, done: int = 0) -> None:
    from worker.queue import JobQueue, submit

    queue = JobQueue.from_settings(settings)
    job_id = submit(factory, queue, "suite", params, max_attempts=settings.max_attempts)
    skipped = f"; {done} already stored are skipped by the workers" if done else ""
    typer.echo(
        f"layerscope: suite {params.name or params.preset} submitted as job {job_id} ({n} train job(s){skipped}) "
        f"to the {queue.kind} queue of {_redact(settings.resolved_db_url)}; start workers with "
        "`layerscope worker` and follow it at /jobs",
        err=True,
    )
    typer.echo(str(job_id))


@app.command()
def probe(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    eval_length: Annotated[list[int] | None, typer.Option(help="Eval lengths (repeat; default: the run's).")] = None,
    n_sequences: Annotated[int, typer.Option(min=20, help="Held-out sequences per eval length.")] = 500,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")] = None,
) -> None:
    """Fit the per-layer probes of a stored run again (replacing its probe rows)."""
    from worker.params import ProbeParams

    params = ProbeParams(run_id=run_id, eval_lengths=eval_length or None, n_probe_sequences=n_sequences)
    _run_on_stored("probe", params, run_id, device)


@app.command()
def intervene(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    method: Annotated[
        list[MethodChoice] | None, typer.Option(help=f"Methods (repeat; default all): {', '.join(METHOD_NAMES)}.")
    ] = None,
    layer: Annotated[list[int] | None, typer.Option(help="Layers (repeat; default every layer).")] = None,
    eval_length: Annotated[list[int] | None, typer.Option(help="Eval lengths (repeat; default: the run's).")] = None,
    pca_k: Annotated[int, typer.Option(min=1, help="k of pca_top_k.")] = 8,
    conv1d: Annotated[bool, typer.Option(help="Conv1D removal on mamba / mamba2 runs.")] = True,
    n_permutations: Annotated[int, typer.Option(min=100)] = 2000,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")] = None,
) -> None:
    """Run the interventions (with the refit probe) on a stored run."""
    from worker.params import InterveneParams

    kw: dict[str, Any] = dict(
        run_id=run_id,
        layers=layer or None,
        eval_lengths=eval_length or None,
        pca_k=pca_k,
        conv1d=conv1d,
        n_permutations=n_permutations,
    )
    if method:
        kw["methods"] = [m.value for m in method]
    _run_on_stored("intervene", InterveneParams(**kw), run_id, device)


@app.command()
def patch(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    position: Annotated[
        list[int] | None, typer.Option(help="0-based positions (repeat; default every position).")
    ] = None,
    site: Annotated[
        list[str] | None,
        typer.Option(help="resid_pre | resid_post | state | state:ssm | state:conv (repeat; default the first three)."),
    ] = None,
    stride: Annotated[
        int, typer.Option(min=1, help="Without --position: every stride-th position (and the last).")
    ] = 1,
    eval_length: Annotated[int, typer.Option(min=4, help="Sequence length of the clean/corrupted pairs.")] = 40,
    n_pairs: Annotated[int, typer.Option(min=4, help="Clean/corrupted pairs.")] = 128,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")] = None,
) -> None:
    """Activation patching (site × layer × position grid) on a stored run."""
    from worker.params import PatchParams

    kw = {"sites": site} if site else {}
    params = PatchParams(
        run_id=run_id, positions=position or None, stride=stride, eval_length=eval_length, n_pairs=n_pairs, **kw
    )
    _run_on_stored("patch", params, run_id, device)


def _run_on_stored(kind: str, params: Any, run_id: int, device: str | None) -> None:
    if device is not None:
        _check_device(device)
    settings = _settings()
    factory = _init_db(settings)
    _require_run(factory, run_id, settings.resolved_store_dir)
    _execute(kind, params, settings, factory, device)
    typer.echo(f"layerscope: {kind} results stored for run {run_id}")


# ----------------------------------------------------------------------------- bundles


@app.command("export")
def export_cmd(
    suite: Annotated[str, typer.Option(help="The suite to export (runs.suite).")],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The bundle file to write (a zip; docs: backend/bundle.py).")
    ],
    weights: Annotated[bool, typer.Option(help="Include the model checkpoints (off: results only).")] = False,
    note: Annotated[
        str | None,
        typer.Option(
            help="Why the study is partial (kept in the manifest's partial.notes, with earlier exports' notes)."
        ),
    ] = None,
) -> None:
    """Write a suite's results bundle: runs, behaviour, probes, interventions, patching, profiles
    and a manifest (versions, commit, config hashes, devices, wall time) in one portable file."""
    from backend.bundle import export_bundle

    if output.is_dir():
        raise CliError(
            f"{output} is a folder: -o takes the bundle's file name (e.g. {output / (suite + '.layerscope.zip')})"
        )
    settings = _settings()
    factory = _init_db(settings)
    output.parent.mkdir(parents=True, exist_ok=True)
    with factory() as s:
        manifest = export_bundle(s, suite, output, weights=weights, store_dir=settings.resolved_store_dir, note=note)
    n = len(manifest["runs"])
    included, missing = manifest.get("weights_included", 0), manifest.get("weights_missing", 0)
    with_w = (
        ", with weights"
        if weights and not missing
        else f", with weights of {included} of {n} run(s)"
        if weights and included
        else ""
    )
    typer.echo(
        f"layerscope: wrote {output} ({n} run(s) of suite {suite!r}{with_w}, {output.stat().st_size / 1e6:.2f} MB)",
        err=True,
    )
    if weights and missing:
        typer.echo(
            f"layerscope: warning: {missing} of {n} run(s) have no checkpoint in the model store "
            f"({settings.resolved_store_dir}) to include"
            + (" — the bundle holds no weights" if not included else "")
            + " (imported without weights, or trained elsewhere)",
            err=True,
        )


@app.command("import")
def import_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle written by `layerscope export`.")],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Where a run is stored here with the same config but another training (trained "
            "again, or its weights rebuilt), delete the stored model's results and take the "
            "bundle's run and rows instead of keeping the stored one.",
        ),
    ] = False,
) -> None:
    """Load a results bundle into the results DB (SQLite or PostgreSQL). Rows already present
    are kept, not doubled: importing the same bundle twice changes nothing. Results of two
    trainings of one config are never mixed (--replace takes the bundle's)."""
    from backend.bundle import import_bundle

    if not bundle.is_file():
        raise CliError(f"{bundle}: no such file")
    settings = _settings()
    factory = _init_db(settings)
    with factory() as s:
        out = import_bundle(s, bundle, store_dir=settings.resolved_store_dir, source=bundle.name, replace=replace)
    rows = sum(out["rows_added"].values())
    typer.echo(
        f"layerscope: suite {out['suite']!r}: {out['runs_added']} run(s) and {rows} result row(s) added, "
        f"{out['runs_present']} run(s) already present"
        + (f", {out['runs_replaced']} replaced by the bundle's" if out["runs_replaced"] else "")
        + f", into {_redact(settings.resolved_db_url)}",
        err=True,
    )
    if out["runs_conflicting"]:
        typer.echo(import_conflicts_line(out["runs_conflicting"], bundle), err=True)


def import_conflicts_line(conflicting: list[dict], bundle: Path) -> str:
    """One line on the runs an import left out: stored here from another training of their config."""
    names = ", ".join(c["name"] for c in conflicting[:5]) + (
        f" and {len(conflicting) - 5} more" if len(conflicting) > 5 else ""
    )
    return (
        f"layerscope: {len(conflicting)} run(s) kept as stored, the bundle's left out: stored here from another "
        f"training of the same config (steps or held-out accuracy differ): {names}; "
        f"`layerscope import --replace {bundle}` takes the bundle's"
    )


@app.command("report")
def report_cmd(
    bundle: Annotated[Path, typer.Argument(help="A results bundle (`layerscope export`).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The Markdown file to write.")] = Path(
        "docs/RESULTS.md"
    ),
    figures_dir: Annotated[
        Path | None, typer.Option(help="Where the PNGs go (default: <output folder>/figures).")
    ] = None,
    figures: Annotated[bool, typer.Option(help="Export the figures to PNG (plotly + kaleido + Chromium).")] = True,
) -> None:
    """Regenerate the results page from a bundle: each claim of the study next to this
    reproduction's verdict (agrees / disagrees / cannot tell), numbers with intervals, figures."""
    from backend.report import build_report

    if not bundle.is_file():
        raise CliError(f"{bundle}: no such file")
    out = build_report(bundle, output, figures_dir=figures_dir, figures=figures)
    verdicts = ", ".join(f"{c['id']}: {c['verdict']}" for c in out["claims"])
    typer.echo(f"layerscope: wrote {output} ({verdicts})", err=True)
    if out["figures_error"]:
        typer.echo(f"layerscope: PNG figures skipped: {out['figures_error']}", err=True)


# ----------------------------------------------------------------------------- demo


@app.command()
def demo(
    host: Annotated[str | None, typer.Option(help="Interface (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default 8050).")] = None,
    preset: Annotated[Preset, typer.Option(help="The suite to run.")] = Preset.quick,
    device: Annotated[str | None, typer.Option(help="The local worker's device.")] = None,
    rerun: Annotated[bool, typer.Option(help="Train again even if this suite already ran here.")] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            help="A results bundle to show at once (imported once; `make demo` passes examples/paper.layerscope.zip)."
        ),
    ] = None,
    executor: Annotated[str | None, typer.Option(hidden=True, help="module:function for the worker (tests).")] = None,
) -> None:
    """Serve the dashboard on a trained study (--bundle, imported once), start a local worker
    beside it, and run the quick preset live as its own suite: results appear as they land.
    Ctrl-C stops everything."""
    import uvicorn

    from backend.app import create_app
    from worker.params import SuiteParams
    from worker.queue import JobQueue, submit

    _logging()
    if device is not None:
        _check_device(device)
    settings = _settings(host=host, port=port)
    _check_port_free(settings.host, settings.port)  # before the worker starts and the links are printed
    factory = _init_db(settings)
    queue = JobQueue.from_settings(settings)
    study = None
    if bundle is not None:
        line, study = demo_bundle(factory, bundle, settings.resolved_store_dir)
        typer.echo(f"layerscope: {line}", err=True)
    params = SuiteParams(preset=preset.value)
    job_id = None if rerun else _existing_suite(factory, params)
    conflict = None
    if job_id is None:
        from worker.presets import expand_suite
        from worker.suite_settings import SuiteSettingsConflict, check_one_run_per_seed

        try:  # e.g. the quick suite of an older version, made with other settings: shown, not doubled
            check_one_run_per_seed(expand_suite(params), factory)
        except SuiteSettingsConflict as exc:
            conflict = str(exc)
    if conflict:
        typer.echo(f"layerscope: the {preset.value} suite is not run again: {conflict}", err=True)
    elif job_id is None:
        job_id = submit(factory, queue, "suite", params, max_attempts=settings.max_attempts)
        typer.echo(f"layerscope: submitted the {preset.value} suite as job {job_id}", err=True)
    else:
        typer.echo(
            f"layerscope: the {preset.value} suite already ran here (job {job_id}); "
            "showing its results (--rerun to train again)",
            err=True,
        )
    proc = None
    try:
        proc = _start_worker(settings, device, executor)
        application = create_app(settings, factory, queue=queue)
        _announce(settings)
        typer.echo(f"\n  Open {settings.resolved_api_url}/   (jobs: {settings.resolved_api_url}/jobs)\n")
        if study:
            from urllib.parse import quote

            typer.echo(
                f"  The imported study: {settings.resolved_api_url}/?suite={quote(study)}   "
                f"the live suite: {settings.resolved_api_url}/?suite={quote(params.name or preset.value)}\n"
            )
        # uvicorn stops on SIGINT/SIGTERM, then raises the signal again: SIGTERM (`kill`, `docker
        # stop`) then stops the worker here like Ctrl-C does instead of killing this process
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            uvicorn.run(application, host=settings.host, port=settings.port, log_level="warning", access_log=False)
        except KeyboardInterrupt:
            pass  # Ctrl-C / SIGTERM: the worker is stopped below, quietly
    finally:
        if proc is not None:
            _stop_worker(proc)
        _quiet_exit()


def _check_port_free(host: str, port: int) -> None:
    """Raises CliError when ``host:port`` cannot be listened on (in use, or not this machine's)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no conflict
        try:
            sock.bind(addr)
        except OSError as exc:
            raise CliError(
                f"cannot listen on {host}:{port}: {exc.strerror} (another server there? pick one with --port)"
            ) from None


def demo_bundle(factory, path: Path, store_dir: Path) -> tuple[str, str | None]:
    """Import the demo's study bundle once; a missing or empty file is reported, not fatal.
    Returns the line to print and the study's suite name (None when nothing is there)."""
    from backend.bundle import BundleError, import_bundle

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


def _existing_suite(factory, params) -> int | None:
    """A suite job with these params that succeeded (or is under way), children not failed."""
    from sqlalchemy import select

    from store import jobs as J
    from store.models import Job

    with factory() as s:
        for job in s.execute(
            select(Job).where(Job.kind == "suite", Job.config_hash == J.params_hash(params)).order_by(Job.id.desc())
        ).scalars():
            if job.state in (J.QUEUED, J.RUNNING):
                return job.id
            if job.state == J.SUCCEEDED:
                bad = s.execute(
                    select(Job.id).where(Job.parent_id == job.id, Job.state.in_((J.FAILED, J.CANCELLED)))
                ).first()
                if bad is None:
                    return job.id
    return None


def _start_worker(settings, device: str | None, executor: str | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        LAYERSCOPE_DB_URL=settings.resolved_db_url,
        LAYERSCOPE_QUEUE_URL=settings.resolved_queue_url,
        LAYERSCOPE_STORE_DIR=str(settings.resolved_store_dir),
        LAYERSCOPE_QUEUE_NAME=settings.queue_name,
    )
    cmd = [sys.executable, "-m", "backend.cli", "worker", "--name", "demo-worker"]
    if device:
        cmd += ["--device", device]
    if executor:
        cmd += ["--executor", executor]
    return subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent if sys.platform == "linux" else None)


def _die_with_parent() -> None:
    """In the demo's worker (Linux): get SIGTERM when the demo process dies, however it dies
    (uvicorn re-raises SIGTERM, so the demo's ``finally`` may never run); the worker then hands
    its job back to the queue."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # the worker releases its job back to the queue
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    typer.echo("layerscope: stopped", err=True)


# ----------------------------------------------------------------------------- tokens, db


@token_app.command("create")
def token_create(name: Annotated[str, typer.Option(help="Who or what the token is for.")]) -> None:
    """Create a token; it is printed once (stdout) and stored as SHA-256 only."""
    from backend.core.security import create_token

    factory = _init_db(_settings())
    with factory() as s:
        token_id, token = create_token(s, name)
    typer.echo(f"layerscope: token {token_id} ({name!r}) created; it is shown only now:", err=True)
    typer.echo(token)


@token_app.command("revoke")
def token_revoke(name_or_id: Annotated[str, typer.Argument(help="Token name or id.")]) -> None:
    """Revoke tokens by name or id."""
    from backend.core.security import revoke_token

    factory = _init_db(_settings())
    with factory() as s:
        n = revoke_token(s, name_or_id)
    if n == 0:
        raise CliError(f"no active token named or numbered {name_or_id!r}")
    typer.echo(f"layerscope: revoked {n} token(s)")


@token_app.command("list")
def token_list() -> None:
    """List tokens (names and ids; never the tokens)."""
    from sqlalchemy import select

    from store.models import ApiToken

    factory = _init_db(_settings())
    with factory() as s:
        for t in s.execute(select(ApiToken).order_by(ApiToken.id)).scalars():
            typer.echo(f"{t.id}\t{t.name}\t{t.created_at:%Y-%m-%d %H:%M}\t{'revoked' if t.revoked else 'active'}")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the results DB to the newest schema (alembic upgrade head).

    A SQLite file is first copied to ``<file>.bak-<UTC time>-<revision>`` next to it."""
    from backend.core.startup import check_db_url, check_folders, explain
    from store.migrate import MigrationError, backup_sqlite, database_revision, head_revision, init_db

    settings = _settings()
    url = settings.resolved_db_url
    shown = _redact(url)
    check_folders(settings)
    check_db_url(url)
    try:
        was, head = database_revision(url), head_revision()
    except Exception as exc:  # a garbage file, an unreachable server: one line, not a traceback
        raise explain(exc, url) from exc
    if was == head:
        typer.echo(f"layerscope: {shown} at revision {head} already; nothing to do")
        return
    backup = backup_sqlite(url)
    if backup is not None:
        typer.echo(f"layerscope: backed up {shown} (revision {was or 'none'}) to {backup}")
    try:
        rev = init_db(url)
    except MigrationError as exc:
        raise CliError(f"upgrade of {shown} failed: {exc}" + (f"; backup at {backup}" if backup else "")) from exc
    except Exception as exc:  # one line naming the database and what to do, plus where the backup is
        if backup is None:
            raise explain(exc, url) from exc
        raise CliError(f"{explain(exc, url)}; the database is unchanged, and a backup is at {backup}") from exc
    typer.echo(f"layerscope: {shown} at revision {rev}" + (f" (was {was})" if was else ""))


def _redact(url: str) -> str:
    from backend.core.startup import redact

    return redact(url)


# ----------------------------------------------------------------------------- read and housekeeping commands

from backend import cli_jobs, cli_runs, cli_views  # noqa: E402 - their own modules; registered here

app.add_typer(cli_runs.runs_app, name="runs")
app.add_typer(cli_jobs.jobs_app, name="jobs")
app.add_typer(cli_views.views_app, name="views")
cli_runs.register_suite_commands(suite_app)


# ----------------------------------------------------------------------------- entry point


def _validation_message(exc: Any) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()))
        msg = str(e.get("msg")).removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: known errors → one line on stderr and a non-zero exit status."""
    from pydantic import ValidationError
    from sqlalchemy.exc import ArgumentError as SQLAlchemyArgumentError
    from sqlalchemy.exc import OperationalError

    from backend.core.startup import StartupError

    try:
        rv = app(args=argv, standalone_mode=False, prog_name="layerscope")
    except _cx.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "layerscope --help", err=True)
        return 2
    except _cx.NoSuchOption as exc:
        # click reads any token starting with "-" as an option: a negative number meant as a value
        # (`intervene -3`) would read "No such option: -3"
        number = next(
            (
                a
                for a in (sys.argv[1:] if argv is None else argv)
                if a.startswith(exc.option_name or "-") and re.fullmatch(r"-\d+(\.\d*)?", a)
            ),
            None,
        )
        _err(
            f"{number} is not a valid value here: ids, seeds and counts are ≥ 0 (a run id ≥ 1)"
            if number
            else " ".join(exc.format_message().split())
        )
        return 2
    except _cx.UsageError as exc:  # includes BadParameter / MissingParameter
        _err(" ".join(exc.format_message().split()))
        return 2
    except (typer.Abort, KeyboardInterrupt):
        _err("interrupted")
        return 130
    except _cx.ClickException as exc:
        _err(exc.format_message())
        return exc.exit_code
    except ValidationError as exc:
        _err(_validation_message(exc))
        return 2
    except StartupError as exc:
        _err(str(exc))
        return 1
    except OperationalError as exc:
        _err(f"database not reachable: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}")
        return 1
    except SQLAlchemyArgumentError as exc:  # e.g. LAYERSCOPE_DB_URL=bogus://x
        _err(f"bad database URL (LAYERSCOPE_DB_URL): {exc}")
        return 2
    except (CliError, LookupError, ValueError, OSError) as exc:  # BundleError is a ValueError
        _err(str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc))
        return 1
    return rv if isinstance(rv, int) else 0


def _entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
