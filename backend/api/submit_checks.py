"""What a job's params can be checked against at submit, before anything is queued: the run it
names (its model's layers, its position table), the transformers config a run is built from. A
job that could only fail later (a traceback in its log minutes after a 201) is a 422 at the
field instead.

Plain functions over a ``store.models.Run`` and the validated params (worker.job_params)."""

from __future__ import annotations

from typing import Any

from layerscope_core.model_sources import is_folder, missing_folder_problem
from models_store.positions import stored_position_limit
from worker.method_fields import width_problems

# A start token precedes every sequence (models_store: start_token), so a length-L sequence
# takes L + 1 positions of a learned position table.
START_TOKEN_POSITIONS = 1


def _error(field: str | tuple[str, ...], msg: str, value: Any) -> dict[str, Any]:
    where = (field,) if isinstance(field, str) else field
    return {"type": "value_error", "loc": ("body", "params", *where), "msg": msg, "input": value}


def run_param_errors(params: Any, run: Any) -> list[dict[str, Any]]:
    """FastAPI-style errors (``loc`` at the field) for ``params`` that do not fit ``run``.

    - ``layers``: each in -1..n_layers-1 (-1 is the embedding output);
    - ``eval_lengths`` / ``eval_length``: within the model's learned absolute position table,
      when it has one (``learned_positions`` of ours, GPT-2's ``n_positions``, OPT's table; rotary
      and recurrent models have none), and within a file task's longest row
      (``FileTask.eval_length_problem``): what the worker checks before measuring;
    - a method parameter its method declares width-bound (``pca_k`` with ``pca_top_k`` among the
      ``methods``, ``method_params.<method>.<name>``): at most the run's ``d_model``;
    - ``methods``: none at all measures nothing, unless Conv1D removal runs (``conv1d`` on a
      family with a Conv1D);
    - ``sites``: at least one the run's family has (``state`` needs a recurrent state);
    - ``positions`` against ``eval_length`` is checked by ``PatchParams`` itself.
    """
    errors: list[dict[str, Any]] = [*_width_errors(params, run), *_site_errors(params, run), *_file_errors(params, run)]
    n_layers = int(run.n_layers)
    layers = getattr(params, "layers", None)
    if layers:
        bad = sorted({lay for lay in layers if not -1 <= lay < n_layers})
        if bad:
            errors.append(
                _error(
                    "layers",
                    f"layers {bad} out of range for run {run.id}'s {n_layers}-layer model "
                    f"(-1..{n_layers - 1}; -1 is the embedding output)",
                    layers,
                )
            )
    table = _position_table(run)
    if table is not None:
        longest = table[0] - START_TOKEN_POSITIONS
        for field, value, lengths in _eval_lengths(params):
            bad = sorted({L for L in lengths if longest < L})
            if bad:
                errors.append(
                    _error(
                        field,
                        f"eval length(s) {bad} longer than run {run.id}'s model takes "
                        f"({table[1]} {table[0]}: at most {longest} tokens)",
                        value,
                    )
                )
    return errors


def _eval_lengths(params: Any) -> list[tuple[str, Any, list[int]]]:
    """(field, value, lengths) of the job's eval-length fields it sets (``eval_lengths``, ``eval_length``)."""
    out = []
    for field in ("eval_lengths", "eval_length"):
        value = getattr(params, field, None)
        lengths = value if isinstance(value, list) else ([value] if isinstance(value, int) else [])
        if lengths:
            out.append((field, value, lengths))
    return out


def _file_errors(params: Any, run: Any) -> list[dict[str, Any]]:
    """Eval lengths past the longest row of ``run``'s file task (``FileTask.eval_length_problem``,
    the worker's own check); a task that is not a file task here, or whose file changed, is left to
    the worker."""
    from science.tasks import FileTask, file_task_names, get_task

    if run.task not in file_task_names() or not _eval_lengths(params):
        return []
    try:
        task = get_task(run.task, **(run.task_params or {}))
    except ValueError:  # the stored file no longer matches the run's sha256: the worker says so
        return []
    if not isinstance(task, FileTask):
        return []
    return [
        _error(field, why, value)
        for field, value, lengths in _eval_lengths(params)
        if (why := task.eval_length_problem(lengths))
    ]


def _family(run: Any) -> Any:
    """The registry's spec of ``run``'s family, or None for a family not registered here (a
    plugin's run imported from elsewhere: not checked)."""
    from layerscope_core.registry import get_family

    try:
        return get_family(run.family)
    except ValueError:
        return None


def _position_table(run: Any) -> tuple[int, str] | None:
    """(size, what it is) of ``run``'s learned absolute position table, or None: read from the
    model its stored config builds, as the worker reads the built model (models_store.positions);
    rotary and recurrent models have none."""
    limit = stored_position_limit(run.model_config or {})
    return None if limit is None else (limit, "learned position table")


def _width_errors(params: Any, run: Any) -> list[dict[str, Any]]:
    """An intervene job's method parameters wider than the run's model (those their method
    declares ``width_bound``: ``pca_top_k`` removes at most d_model directions), and one that
    would measure nothing (no methods, no Conv1D removal)."""
    methods = getattr(params, "methods", None)
    if methods is None:
        return []
    model = f"run {run.id}'s model"
    errors = [_error(w, msg, v) for w, msg, v in width_problems(params, int(run.d_model), model)]
    spec = _family(run)
    if not methods and spec is not None and not (params.conv1d and spec.has_conv1d):
        why = "conv1d is off" if spec.has_conv1d else f"{run.family} has no Conv1D to remove"
        errors.append(_error("methods", f"no methods and {why}: nothing to measure on run {run.id}", methods))
    return errors


def _site_errors(params: Any, run: Any) -> list[dict[str, Any]]:
    """Patching ``sites`` of which ``run``'s family has none (the job would fail on them)."""
    sites = getattr(params, "sites", None)
    if not sites or _family(run) is None:
        return []
    from layerscope_core.registry import ALL_PATCH_SITES, patch_sites_of

    keep, skipped = patch_sites_of(run.family, sites)
    if keep:
        return []
    msg = (
        f"patching sites {skipped}: run {run.id} is a {run.family} model, which has no such state; "
        f"its sites are {patch_sites_of(run.family, ALL_PATCH_SITES)[0]}"
    )
    return [_error("sites", msg, sites)]


def _read_here(source: str, role: str) -> tuple[str | None, str | None]:
    """``(family, error)`` of a transformers model named in a job, read from this machine only:
    a local folder, or a hub name in the hub cache. ``(None, None)``: a hub name not cached here,
    not looked up (the hub may be unreachable from the API, and a request would wait out
    transformers' retries); the worker reads it, and a bad one fails the job with the same words.
    Reads configs only (no weights); imports torch."""
    from models_store.any_model import PretrainedLoadError, pretrained_family

    if why := missing_folder_problem(source):
        return None, f"{role} {source!r}: {why}"
    local = is_folder(source)
    try:
        return pretrained_family(source, role, local_files_only=True), None
    except PretrainedLoadError as e:  # unreadable: in a folder, an error; a hub name: not cached here
        return None, str(e) if local else None
    except ValueError as e:  # an unsupported architecture: the message names the model and why
        return None, str(e)


def model_source_errors(params: Any) -> tuple[list[dict[str, Any]], bool]:
    """FastAPI-style errors for the transformers models a train or suite job names, and whether
    every one was read here (then ``expand_suite(params, local_files_only=True)`` needs no hub).

    - a train job's ``from_config`` or ``pretrained`` (``TrainParams``): readable (see
      :func:`_read_here`), a supported architecture, making the run's ``family``;
    - a suite's ``pretrained`` and ``from_config`` entries: readable and supported (each
      one's family is found from its blocks), errors at ``(field, index)``.
    """
    errors: list[dict[str, Any]] = []
    read = True
    for field, role, makes in (("from_config", "from_config", "builds"), ("pretrained", "pretrained model", "is")):
        source = getattr(params, field, None)
        if isinstance(source, str):  # a train job (one of the two at most)
            family, why = _read_here(source, role)
            if why is None and family is not None and family != params.family:
                why = f"{role} {source!r} {makes} a {family!r} model, but the run asks for family {params.family!r}"
            return ([_error(field, why, source)] if why else []), family is not None
    for field, role in (("pretrained", "pretrained model"), ("from_config", "from_config")):
        names = getattr(params, field, None)
        for i, name in enumerate(names if isinstance(names, list) else []):
            family, why = _read_here(name, role)
            read = read and family is not None
            if why:
                errors.append({**_error(field, why, name), "loc": ("body", "params", field, i)})
    return errors, read


def memory_errors(
    params: Any, limit: int, *, run: Any = None, jobs: list[Any] | None = None, measured: list[int] | None = None
) -> list[dict[str, Any]]:
    """FastAPI-style errors for a job whose estimated peak memory (``worker.memory``) is over
    ``limit`` bytes, each naming the estimate and the limit:

    - a probe / intervene / patch job on ``run``, or a train job: at the field to lower
      (``batch_size``, ``measure.n_probe_sequences``, ``n_pairs``, …, or the model's own field);
    - a suite (``jobs``: its train jobs, ``expand_suite``): at the ``pretrained`` / ``from_config``
      entry of the run's model, else at ``params``, each message naming the run and the field.
    """
    from worker.memory import run_job_problems, suite_problems, train_job_problems

    if jobs is None:
        problems = (
            run_job_problems(params, run, limit, measured) if run is not None else train_job_problems(params, limit)
        )
        return [{**_error("", msg, value), "loc": ("body", "params", *loc)} for loc, msg, value in problems]
    errors = []
    for job, (loc, msg, value) in suite_problems(jobs, limit):
        field_name = ".".join(map(str, loc))
        errors.append({**_error("", f"run {job.name}: {field_name}: {msg}", value), "loc": _source_loc(job, params)})
    return errors


def _source_loc(job: Any, params: Any) -> tuple[str | int, ...]:
    """Where a suite's run's problem is reported: the ``pretrained`` / ``from_config`` entry of
    its model, else the params."""
    where: tuple[str | int, ...] = ()
    for field in ("pretrained", "from_config"):
        source, names = getattr(job, field), getattr(params, field) or []
        if source in names:
            where = (field, names.index(source))
    return ("body", "params", *where)


def position_errors(params: Any, *, jobs: list[Any] | None = None) -> list[dict[str, Any]]:
    """FastAPI-style errors for a train job (or, with ``jobs``, a suite's train jobs) longer than
    its transformers model's learned position table (``worker.position_checks``), at the model's
    ``pretrained`` / ``from_config`` (a suite's entry of it, each message naming the run)."""
    from worker.position_checks import position_problems

    if jobs is None:
        return [
            {**_error("", msg, v), "loc": ("body", "params", *loc)} for _, (loc, msg, v) in position_problems([params])
        ]
    return [
        {**_error("", f"run {job.name}: {msg}", v), "loc": _source_loc(job, params)}
        for job, (_, msg, v) in position_problems(jobs)
    ]
