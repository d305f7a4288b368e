"""``layerscope probe|intervene|patch RUN_ID``: measure a stored run again in this process (its
rows of that kind are replaced)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from backend.cli import common as C
from layerscope_core.registry import METHODS

_ADDED_METHODS = C.METHOD_NAMES[len(METHODS) :]  # the plugins' methods: run only when named

RunId = Annotated[int, typer.Argument(min=1, help="A stored run's id.")]
EvalLengths = Annotated[list[int] | None, typer.Option(help="Eval lengths (repeat; default: the run's).")]
Device = Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")]


NSequences = Annotated[
    int | None,
    typer.Option(
        min=20,
        help="Held-out sequences per eval length (default: the run's own measurement's, else 500); an edit's "
        "fit set is sized from it too, but never below ⌈64·d_model / L⌉ sequences (64 tokens a dimension: "
        "docs/SCIENCE.md, Fitting set size).",
    ),
]


def probe(
    run_id: RunId,
    eval_length: EvalLengths = None,
    n_sequences: NSequences = None,
    device: Device = None,
    precision: C.PrecisionOption = C.PrecisionChoice.fp32,
) -> None:
    """Fit the per-layer probes of a stored run again (replacing its probe rows), with the run's own
    measurement settings where not given."""
    from worker.job_params import ProbeParams

    own = _measured_with(run_id, ("n_probe_sequences",))
    params = ProbeParams(
        run_id=run_id,
        eval_lengths=eval_length or None,
        precision=precision.value,
        **{**own, **({"n_probe_sequences": n_sequences} if n_sequences is not None else {})},
    )
    _run_on_stored("probe", params, run_id, device)


def intervene(
    run_id: RunId,
    method: Annotated[
        list[C.MethodChoice] | None,
        typer.Option(
            help=f"Methods (repeat; default the built-ins): {', '.join(METHODS)}"
            + (f"; a plugin's, when named: {', '.join(_ADDED_METHODS)}." if _ADDED_METHODS else ".")
        ),
    ] = None,
    layer: Annotated[list[int] | None, typer.Option(help="Layers (repeat; default every layer).")] = None,
    eval_length: EvalLengths = None,
    pca_k: Annotated[int | None, typer.Option(help="k of pca_top_k (default: its declared k).")] = None,
    inlp_max_rounds: Annotated[
        int | None,
        typer.Option(min=1, help="INLP's round budget (default: the run's own measurement's, else none)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="A plugin method's parameter, METHOD.NAME=VALUE (repeat), e.g. my_edit.k=8 for the "
            "my_edit method of docs/BRING_YOUR_OWN.md; each method's parameters: GET /api/meta "
            "(method_params). The built-ins' are options: --pca-k, --inlp-max-rounds."
        ),
    ] = None,
    conv1d: Annotated[bool, typer.Option(help="Conv1D removal on mamba / mamba2 runs.")] = True,
    n_permutations: Annotated[
        int | None, typer.Option(min=100, help="Permutations (default: the run's own measurement's, else 2000).")
    ] = None,
    n_sequences: NSequences = None,
    device: Device = None,
    precision: C.PrecisionOption = C.PrecisionChoice.fp32,
) -> None:
    """Run the interventions (with the refit probe) on a stored run, with the run's own measurement
    settings (sequences, permutations, INLP's round budget) where not given."""
    from worker.job_params import InterveneParams

    kw: dict[str, Any] = dict(
        run_id=run_id,
        layers=layer or None,
        eval_lengths=eval_length or None,
        conv1d=conv1d,
        precision=precision.value,
        **_measured_with(run_id, ("n_probe_sequences", "n_permutations", "inlp_max_rounds")),
    )
    if n_permutations is not None:
        kw["n_permutations"] = n_permutations
    if n_sequences is not None:
        kw["n_probe_sequences"] = n_sequences
    if pca_k is not None:
        kw["pca_k"] = pca_k
    if inlp_max_rounds is not None:
        kw["inlp_max_rounds"] = inlp_max_rounds
    if param:
        kw["method_params"] = method_params(param)
    if method:
        kw["methods"] = [m.value for m in method]
    _run_on_stored("intervene", InterveneParams(**kw), run_id, device)


def method_params(given: list[str]) -> dict[str, dict[str, Any]]:
    """``["my_edit.k=8", ...]`` → ``{"my_edit": {"k": 8}}`` (a value read as JSON: a number, or
    ``null``); the job params check names and values against each method's declaration.

    Raises:
        CliError: an item not of the form METHOD.NAME=VALUE, or a value that is not JSON.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in given:
        key, eq, text = item.partition("=")
        method, dot, name = key.strip().partition(".")
        if not (eq and dot and method and name):
            raise C.CliError(f"--param {item!r}: expected METHOD.NAME=VALUE, e.g. my_edit.k=8")
        try:
            value = json.loads(text)
        except ValueError:
            raise C.CliError(f"--param {item!r}: the value {text!r} is not a number (or null)") from None
        out.setdefault(method, {})[name.strip()] = value
    return out


def patch(
    run_id: RunId,
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
    n_pairs: Annotated[
        int | None,
        typer.Option(min=4, help="Clean/corrupted pairs (default: the run's own measurement's, else 128)."),
    ] = None,
    device: Device = None,
    precision: C.PrecisionOption = C.PrecisionChoice.fp32,
) -> None:
    """Activation patching (site × layer × position grid) on a stored run."""
    from worker.job_params import PatchParams

    kw = {"sites": site} if site else {}
    params = PatchParams(
        run_id=run_id,
        positions=position or None,
        stride=stride,
        eval_length=eval_length,
        n_pairs=n_pairs
        if n_pairs is not None
        else _measured_with(run_id, ("n_patch_pairs",)).get("n_patch_pairs", 128),
        precision=precision.value,
        **kw,
    )
    _run_on_stored("patch", params, run_id, device)


def _measured_with(run_id: int, names: tuple[str, ...]) -> dict[str, Any]:
    """``names`` of the measurement settings run ``run_id``'s stored rows were made with (its probe
    rows' settings, else its intervention rows'); ``{}`` for a run not measured yet. A stored run
    measured again keeps its own settings unless an option says otherwise (the defaults of a job
    are the ``paper`` preset's, not a ``quick`` run's)."""
    from sqlalchemy import select

    from store.models import InterventionResult, MeasureSettings, ProbeResult

    with C.session_factory(C.settings())() as s:
        for table in (ProbeResult, InterventionResult):
            sid = s.scalar(
                select(table.settings_id).where(table.run_id == run_id, table.settings_id.is_not(None)).limit(1)
            )
            if sid is not None and (row := s.get(MeasureSettings, sid)) is not None:
                return {k: row.params[k] for k in names if k in (row.params or {})}
    return {}


# the results table each re-measure writes
TABLES = {"probe": "probe_results", "intervene": "intervention_results", "patch": "patching_results"}


def _run_on_stored(kind: str, params: Any, run_id: int, device: str | None) -> None:
    if device is not None:
        C.check_device(device)
    settings = C.settings()
    factory = C.session_factory(settings)
    _require_run(factory, run_id, settings.resolved_store_dir, params, settings)
    _warn_other_precision(factory, run_id, TABLES[kind], params.precision)
    C.run_here(kind, params, settings, factory, device)
    typer.echo(f"layerscope: {kind} results stored for run {run_id}")


def _warn_other_precision(factory, run_id: int, table: str, precision: str) -> None:
    """Say, before it runs, that a re-measure at ``precision`` joins rows of another precision:
    rows are replaced by their own keys (layer, length, method, ...), so the rows it does not
    measure again keep theirs and the run's rows then mix precisions (`runs show` says so)."""
    from store.measured import precisions_in

    with factory() as s:
        other = sorted(p for p in precisions_in(s, run_id).get(table, {}) if p != precision)
    if other:
        typer.echo(
            f"layerscope: run {run_id}'s {table} hold rows measured at {', '.join(other)}; these are measured at "
            f"{precision} and replace only the rows they measure again: any others stay at {', '.join(other)} "
            "(`layerscope runs show` says when a run's rows mix; a study's runs should share one precision, "
            "docs/SCIENCE.md#precision)",
            err=True,
        )


def _require_run(factory, run_id: int, store_dir: Path | None = None, params: Any = None, settings=None) -> None:
    """The run exists, its weights are here to load, and (with ``params`` and ``settings``) the
    job's estimated peak memory is within ``settings.max_job_memory_gib`` (``worker.memory``).
    Raises CliError (one line) otherwise."""
    from backend.cli.validation import OPTION_OF
    from store.measured import eval_lengths_in
    from store.models import Run
    from worker.memory import limit_bytes, one_line, run_job_problems
    from worker.run_weights import missing_weights

    with factory() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise C.CliError(f"run {run_id} not found")
        if why := missing_weights(run, store_dir):
            raise C.CliError(why)
        measured = eval_lengths_in(s, run_id) if params is not None else None  # what a job without lengths reads
        if params is not None and (over := run_job_problems(params, run, limit_bytes(settings), measured)):
            raise C.CliError(one_line(over, options=OPTION_OF[type(params).__name__]))  # the options typed
