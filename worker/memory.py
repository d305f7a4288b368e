"""A job's peak memory, estimated before it is queued: a job whose activations cannot fit is
refused at submit — a 422 naming the field through the API, one line from the CLI — instead of a
worker that dies or swaps. docs/DESIGN.md#memory-bound documents the estimate and its measured
factors; in short, float32 (4 bytes a number), each phase against ``Settings.max_job_memory_gib``
(``LAYERSCOPE_MAX_JOB_MEMORY_GIB``, default 16 GiB):

- training: ``16 · n_params`` (weights, gradients, AdamW's two moments) ``+ 4 · f · batch_size ·
  (train_length + START) · d_model · n_layers``, ``f`` the family's
  ``FamilySpec.activation_floats`` (measured; a random-init control trains nothing);
- measuring: ``4 · n_params + 4 · tokens · d_model · (n_layers + 1)``, every layer's captured
  states of the sequences held at once: the probes' at the longest eval length plus the
  interventions' fit set, or patching's pairs, whichever is more.

A measurement is also held to ``LAYERSCOPE_MEASURE_MEMORY_GB`` (``Settings.measure_memory_gb``,
science.bounded): its smallest piece (one probe layer at the longest eval length with its fit's
copies; the interventions' largest fit — both doublings where a method re-reads a doubled set —
beside one eval layer: its states and the fit's copies, or where those are over the bound, its
rows spilled to disk and one chunk of them held, science.streamed_fit) must fit it, else it is
refused at submit too (:func:`bound_problem`), naming that setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from layerscope_core.registry import EVAL_LENGTHS, get_family

GIB = 2**30
FLOAT_BYTES = 4
ADAMW_BYTES = 16  # a parameter's weight, gradient and two AdamW moments, float32
LIMIT_NAME = "LAYERSCOPE_MAX_JOB_MEMORY_GIB"

# (loc within the job's params, message, the value at loc): what the API's 422 and the CLI's line show
Problem = tuple[tuple[str | int, ...], str, Any]


@dataclass(frozen=True)
class ModelSize:
    """What the estimate reads of a model, and how messages name it.

    Attributes:
        field: the params field that sets the model's size (``param_target``, ``d_model``,
            ``pretrained``, ``from_config``, ``run_id``), where a problem of its size is reported.
        label: the model in a message, after "of" (``"the transformer"``, ``"pretrained 'x'"``,
            ``"run 3"``).
    """

    family: str
    d_model: int
    n_layers: int
    n_params: int
    field: str
    label: str


def limit_bytes(settings: Any = None) -> int:
    """The job memory limit in bytes (``settings``, default ``store.settings.get_settings()``)."""
    from store.settings import get_settings

    return int((settings or get_settings()).max_job_memory_gib * GIB)


def train_bytes(size: ModelSize, batch_size: int, length: int) -> int:
    """Estimated peak bytes of training ``size`` at ``batch_size`` × ``length`` positions."""
    floats = get_family(size.family).activation_floats
    return ADAMW_BYTES * size.n_params + int(FLOAT_BYTES * floats * batch_size * length * size.d_model * size.n_layers)


def measure_bytes(size: ModelSize, tokens: int) -> int:
    """Estimated peak bytes of holding every layer's states of ``tokens`` positions (and the weights)."""
    return FLOAT_BYTES * (size.n_params + tokens * size.d_model * (size.n_layers + 1))


def _gib(n: int) -> str:
    return f"{n / GIB:,.1f} GiB" if n >= GIB else f"{n / 2**20:,.1f} MiB"


def _over(what: str, need: int, limit: int, detail: str, lower: str) -> str:
    return (
        f"{what} needs about {_gib(need)} ({detail}), over the job memory limit of {_gib(limit)} "
        f"({LIMIT_NAME}); lower {lower}"
    )


def model_size(params: Any, *, local_files_only: bool = True) -> ModelSize | None:
    """The :class:`ModelSize` of a ``TrainParams``' model: built from scratch exactly as the worker
    builds it, or read from a transformers config (its ``meta`` model: no weights). None for a
    config not readable here (a hub name not cached: not checked, as at submit elsewhere)."""
    source = params.pretrained or params.from_config
    if source:
        from models_store.any_model import layer_count, meta_backbone, read_config

        field = "pretrained" if params.pretrained else "from_config"
        try:
            hf_cfg = read_config(source, field, local_files_only)
            n_params = sum(p.numel() for p in meta_backbone(hf_cfg).parameters())
        except ValueError:
            return None
        return ModelSize(
            params.family, int(hf_cfg.hidden_size), layer_count(hf_cfg), n_params, field, f"{field} {source!r}"
        )
    from science.tasks import get_task

    cfg = params.scratch_config(get_task(params.task, **params.task_params))
    field = "d_model" if params.d_model is not None else "param_target"
    return ModelSize(params.family, cfg.d_model, cfg.n_layers, cfg.n_params, field, f"the {params.family}")


# a set of sequences whose states are held: (field of its count, count, length, field of its length)
_Held = tuple[str, int, int, str]


def _measure_problem(size: ModelSize, limit: int, probes: _Held, fit: int, patch: _Held | None) -> Problem | None:
    """The measuring phase over ``limit``: the ``probes`` (with ``fit`` more positions held beside
    them: the interventions' fit set), or ``patch``, whichever holds more."""
    held = probes
    tokens = probes[1] * probes[2] + fit
    if patch is not None and patch[1] * patch[2] > tokens:
        held, tokens, fit = patch, patch[1] * patch[2], 0
    need = measure_bytes(size, tokens)
    if need <= limit:
        return None
    field, n, length, length_field = held
    count, length_name = field.rsplit(".", 1)[-1], length_field.rsplit(".", 1)[-1]
    extra = f" + the interventions' fit set of {fit:,} positions" if fit else ""
    shown = f"max({length_name})" if length_name == "eval_lengths" else length_name
    detail = (
        f"every layer's states of {count} {n:,} × {shown} {length}{extra} × d_model {size.d_model} "
        f"× (n_layers {size.n_layers} + 1) of {size.label} × 4 bytes"
    )
    return tuple(field.split(".")), _over("measuring", need, limit, detail, f"{count} or {length_name}"), n


def bound_problem(
    size: ModelSize, n: int, longest: int, fit_length: int, methods: list[str], field: str
) -> Problem | None:
    """The measurement's smallest piece over ``LAYERSCOPE_MEASURE_MEMORY_GB`` (science.bounded), at
    ``field`` (the sequence count's): the probes' one layer of ``n`` × ``longest`` with its fit's
    copies, or with ``methods`` the interventions' largest fit beside one eval layer."""
    from science.bounded import FIT_COPIES, MeasureMemoryError, MemoryBound, refuse_over, state_bytes
    from science.fit_memory import fit_need
    from science.interventions import n_fit_sequences
    from science.measure import MAX_FIT_DOUBLINGS
    from science.methods import accumulates, refits_until_removed
    from store.settings import get_settings

    bound = MemoryBound.of_gib(get_settings().measure_memory_gb)
    layer = state_bytes(n, longest, size.d_model)

    def check(b: MemoryBound) -> None:
        b.require(FIT_COPIES * layer, f"probes at L={longest} of {size.label} (one layer and its fit)")
        if methods:
            fit_n = n_fit_sequences(size.d_model, fit_length, n)
            # a doubled set is read in full by a method refitted until removed that does not
            # accumulate (an accumulating one adds the new sequences' statistics a batch at a time)
            fit_n *= 2**MAX_FIT_DOUBLINGS if any(refits_until_removed(m) and not accumulates(m) for m in methods) else 1
            need, streamed = fit_need(b, fit_n, fit_length, size.d_model, methods, beside=2 * layer)
            how = " from rows on disk" if streamed else ""
            b.require(need, f"fitting an edit on {fit_n:,} sequences at L={fit_length} of {size.label}{how}")

    try:
        refuse_over(check, bound)
    except MeasureMemoryError as exc:
        return tuple(field.split(".")), f"measuring: {exc}", n
    return None


def _train_problems(params: Any, limit: int, size: ModelSize | None) -> list[Problem]:
    if size is None:
        return []
    out: list[Problem] = []
    if params.control is None:
        start = int(bool(params.start_token))
        need = train_bytes(size, params.batch_size, params.train_length + start)
        if need > limit:
            weights = ADAMW_BYTES * size.n_params
            loc = ("batch_size",) if need - weights >= weights else (size.field,)
            detail = (
                f"activations of batch_size {params.batch_size} × train_length {params.train_length}"
                f"{' + the START token' if start else ''} × d_model {size.d_model} × n_layers {size.n_layers} "
                f"of {size.label} × {get_family(size.family).activation_floats:g} numbers × 4 bytes, "
                f"and {size.n_params:,} parameters × 16 bytes with AdamW"
            )
            lower = "batch_size or train_length, or train a smaller model"
            out.append((loc, _over("training", need, limit, detail, lower), getattr(params, loc[0])))
    m = params.measure
    if m is not None:
        from science.interventions import n_fit_sequences

        n, L = m.n_probe_sequences, params.train_length
        fit = n_fit_sequences(size.d_model, L, n) * L if m.methods else 0
        probes = ("measure.n_probe_sequences", n, max(m.eval_lengths), "measure.eval_lengths")
        patch = ("measure.n_patch_pairs", m.n_patch_pairs, m.patch_eval_length, "measure.patch_eval_length")
        problem = _measure_problem(size, limit, probes, fit, patch) or bound_problem(
            size, n, max(m.eval_lengths), L, list(m.methods), "measure.n_probe_sequences"
        )
        out += [problem] if problem else []
    return out


def train_job_problems(params: Any, limit: int) -> list[Problem]:
    """The phases of a ``TrainParams`` job over ``limit`` bytes (nothing is checked for a
    transformers model whose config is not readable here)."""
    return _train_problems(params, limit, model_size(params))


def run_job_problems(params: Any, run: Any, limit: int, measured: list[int] | None = None) -> list[Problem]:
    """A probe, intervene or patch job on stored ``run`` (a ``store.models.Run``) over ``limit``
    bytes. Eval lengths left out are the run's own, those it was measured at (``measured``:
    ``store.measured.eval_lengths_in``; not given or none recorded: the longest of the default
    eval lengths and the run's train length)."""
    train_length = int((run.train_config or {}).get("train_length", max(EVAL_LENGTHS)))
    size = ModelSize(run.family, int(run.d_model), int(run.n_layers), int(run.n_params), "run_id", f"run {run.id}")
    if hasattr(params, "n_pairs"):  # a patch job
        problem = _measure_problem(size, limit, ("n_pairs", params.n_pairs, params.eval_length, "eval_length"), 0, None)
    else:
        from science.interventions import n_fit_sequences

        n = params.n_probe_sequences
        longest = max(params.eval_lengths or measured or [*EVAL_LENGTHS, train_length])
        fit = n_fit_sequences(size.d_model, train_length, n) * train_length if getattr(params, "methods", None) else 0
        problem = _measure_problem(
            size, limit, ("n_probe_sequences", n, longest, "eval_lengths"), fit, None
        ) or bound_problem(
            size, n, longest, train_length, list(getattr(params, "methods", None) or []), "n_probe_sequences"
        )
    return [problem] if problem else []


def suite_problems(jobs: list[Any], limit: int) -> list[tuple[Any, Problem]]:
    """(job, problem) for every train job of a suite over ``limit`` bytes, each transformers
    model's config read once."""
    sizes: dict[tuple[str | None, str | None], ModelSize | None] = {}
    out = []
    for job in jobs:
        key = (job.pretrained, job.from_config)
        if key == (None, None):
            size = model_size(job)
        elif key in sizes:
            size = sizes[key]
        else:
            size = sizes[key] = model_size(job)
        out += [(job, p) for p in _train_problems(job, limit, size)]
    return out


def one_line(
    problems: list[Problem], run: str | None = None, *, fields: bool = True, options: dict[str, str] | None = None
) -> str:
    """``problems`` as the CLI's one line: ``[run NAME: ]field: message; ...`` (``fields``
    False: without the job field, for a command that has no option of that name). ``options``:
    a command's option for a job field (``{"n_probe_sequences": "--n-sequences"}``), said instead
    of the field's name, in the prefix and in the message's advice."""
    prefix = f"run {run}: " if run else ""
    lines = []
    for loc, msg, _ in problems:
        field = ".".join(map(str, loc))
        for name, option in (options or {}).items():
            field = option if field == name else field
            if "_" in name:  # a field name in the advice (n_probe_sequences), never an English word (layers)
                msg = re.sub(rf"\b{re.escape(name)}\b", option, msg)
        lines.append(f"{prefix}{field + ': ' if fields else ''}{msg}")
    return "; ".join(lines)
