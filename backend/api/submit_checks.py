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


def _read_here(source: str, role: str) -> tuple[str | None, str | None]:
    """``(family, error)`` of a transformers model named in a job, read from this machine only:
    a local folder, or a hub name in the hub cache. ``(None, None)``: a hub name not cached here,
    not looked up (the hub may be unreachable from the API, and a request would wait out
    transformers' retries); the worker reads it, and a bad one fails the job with the same words.
    Reads configs only (no weights); imports torch."""
    from models_store.any_model import PretrainedLoadError, pretrained_family

    local = Path(source).expanduser().is_dir()
    if not local and (source.startswith((".", "/", "~")) or source.count("/") > 1):
        return None, f"{role} {source!r}: no such local folder"
    try:
        return pretrained_family(source, role, local_files_only=True), None
    except PretrainedLoadError as e:  # unreadable: in a folder, an error; a hub name: not cached here
        return None, str(e) if local else None
    except ValueError as e:  # an unsupported architecture: the message names the model and why
        return None, str(e)


def model_source_errors(params: Any) -> tuple[list[dict[str, Any]], bool]:
    """FastAPI-style errors for the transformers models a train or suite job names, and whether
    every one was read here (then ``expand_suite(params, local_files_only=True)`` needs no hub).

    - a train job's ``from_config`` (``TrainParams.from_config``): readable (see
      :func:`_read_here`), a supported architecture, making the run's ``family``;
    - a suite's ``pretrained`` and ``from_config`` entries: readable and supported (each
      one's family is found from its blocks), errors at ``(field, index)``.
    """
    errors: list[dict[str, Any]] = []
    read = True
    source = getattr(params, "from_config", None)
    if isinstance(source, str):  # a train job
        family, why = _read_here(source, "from_config")
        if why is None and family is not None and family != params.family:
            why = f"from_config {source!r} builds a {family!r} model, but the run asks for family {params.family!r}"
        return ([_error("from_config", why, source)] if why else []), family is not None
    for field, role in (("pretrained", "pretrained model"), ("from_config", "from_config")):
        names = getattr(params, field, None)
        for i, name in enumerate(names if isinstance(names, list) else []):
            family, why = _read_here(name, role)
            read = read and family is not None
            if why:
                errors.append({**_error(field, why, name), "loc": ("body", "params", field, i)})
    return errors, read
