"""What a job's params can be checked against at submit, before anything is queued: the run it
names (its model's layers, its position table), the transformers config a run is built from. A
job that could only fail later (a traceback in its log minutes after a 201) is a 422 at the
field instead.

Plain functions over a ``store.models.Run`` and the validated params (worker.params)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A start token precedes every sequence (models_store: start_token), so a length-L sequence
# takes L + 1 positions of the transformer's rotary table.
START_TOKEN_POSITIONS = 1


def _error(field: str, msg: str, value: Any) -> dict[str, Any]:
    return {"type": "value_error", "loc": ("body", "params", field), "msg": msg, "input": value}


def run_param_errors(params: Any, run: Any) -> list[dict[str, Any]]:
    """FastAPI-style errors (``loc`` at the field) for ``params`` that do not fit ``run``.

    - ``layers``: each in -1..n_layers-1 (-1 is the embedding output);
    - ``eval_lengths`` / ``eval_length``: within the model's position table, when it has one
      (``model_config.max_position_embeddings``: the transformer);
    - ``positions`` against ``eval_length`` is checked by ``PatchParams`` itself.
    """
    errors: list[dict[str, Any]] = []
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
    table = (run.model_config or {}).get("max_position_embeddings")
    if isinstance(table, int) and table > 0:
        longest = table - START_TOKEN_POSITIONS
        for field in ("eval_lengths", "eval_length"):
            value = getattr(params, field, None)
            lengths = value if isinstance(value, list) else ([value] if isinstance(value, int) else [])
            bad = sorted({L for L in lengths if longest < L})
            if bad:
                errors.append(
                    _error(
                        field,
                        f"eval length(s) {bad} longer than run {run.id}'s model takes "
                        f"(position table {table}: at most {longest} tokens)",
                        value,
                    )
                )
    return errors


def from_config_errors(params: Any) -> list[dict[str, Any]]:
    """FastAPI-style errors at ``from_config`` for a train job built from a transformers config
    (``TrainParams.from_config``): a local folder must hold a readable config of a supported
    architecture that makes the run's ``family``; so must a hub name found in this machine's hub
    cache. A hub name not in the cache is not looked up here (the hub may be unreachable from the
    API: a request would wait out transformers' retries); the worker reads it, and a bad one fails
    the job with the same words. Reads configs only (no weights); imports torch only when set."""
    source = getattr(params, "from_config", None)
    if not isinstance(source, str):
        return []
    from models_store.any_model import PretrainedLoadError, pretrained_family

    local = Path(source).expanduser().is_dir()
    if not local and (source.startswith((".", "/", "~")) or source.count("/") > 1):
        return [_error("from_config", f"from_config {source!r}: no such local folder", source)]
    try:
        family = pretrained_family(source, "from_config", local_files_only=True)
    except PretrainedLoadError as e:  # unreadable: in a folder, an error; a hub name: not cached here
        return [_error("from_config", str(e), source)] if local else []
    except ValueError as e:  # an unsupported architecture: the message names the model and why
        return [_error("from_config", str(e), source)]
    if family != params.family:
        msg = f"from_config {source!r} builds a {family!r} model, but the run asks for family {params.family!r}"
        return [_error("from_config", msg, source)]
    return []
