"""``layerscope export-model RUN_ID -o DIR``: a stored run as a transformers folder (``AutoModel``
loads it; ``models_store.export`` says what is written beside the backbone)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def export_model(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The folder to write (new or empty).")],
) -> None:
    """Export a stored run's model as a transformers folder that AutoModel.from_pretrained loads."""
    from backend.cli import _init_db, _settings
    from models_store.export import export_transformers
    from worker.pipeline import WorkerEnv, load_run

    settings = _settings()
    env = WorkerEnv(_init_db(settings), settings.resolved_store_dir, "cpu")
    params, task, model = load_run(run_id, env)
    out = export_transformers(model, output, {"run_id": run_id, "task": params.task,
                                              "class_names": list(task.class_names)})
    typer.echo(f"layerscope: run {run_id} ({model.config.family}, {params.task}) written to {out}; "
               "load it with transformers.AutoModel.from_pretrained")
