"""Whether a train job's sequences fit its transformers model's learned position table (GPT-2's
``wpe``, OPT's), checked before the job is queued: the worker would refuse it only once it has
built the model (``models_store.positions.check_positions``). Our own models' ``learned_positions``
is checked by ``TrainParams`` itself."""

from __future__ import annotations

from typing import Any

from models_store.positions import config_position_limit, position_problem
from worker.memory import Problem


def run_lengths(params: Any) -> dict[str, int]:
    """Every sequence length a run (``TrainParams``) will feed its model: training, then behaviour
    and measurement at the measurement's lengths."""
    from layerscope_core.registry import task_spec
    from models_store.positions import FILE_ROWS

    if task_spec(params.task) is None:  # a file task: trained and measured at its rows' length
        return {FILE_ROWS: params.train_length}
    lengths = {"train_length": params.train_length}
    if params.measure is not None:
        lengths["measure.eval_lengths"] = max(params.measure.eval_lengths)
        lengths["measure.patch_eval_length"] = params.measure.patch_eval_length
    return lengths


def model_label(params: Any) -> str:
    """How a position-table error names a run's model."""
    if params.pretrained or params.from_config:
        role = "pretrained model" if params.pretrained else "model config"
        return f"{role} {params.pretrained or params.from_config!r}"
    return f"this {params.family} model"


def position_problems(jobs: list[Any]) -> list[tuple[Any, Problem]]:
    """(job, problem at ``pretrained`` / ``from_config``) for each train job (``TrainParams``) whose
    longest sequence is longer than its transformers model's learned position table, each config
    read once; a config not readable here is not checked (the worker checks the model it builds)."""
    limits: dict[str, int | None] = {}
    out: list[tuple[Any, Problem]] = []
    for job in jobs:
        field = "pretrained" if job.pretrained else "from_config" if job.from_config else None
        if field is None:
            continue
        source = getattr(job, field)
        if source not in limits:
            limits[source] = config_position_limit(source, field)
        why = position_problem(limits[source], run_lengths(job), bool(job.start_token), model_label(job))
        if why:
            out.append((job, ((field,), why, source)))
    return out
