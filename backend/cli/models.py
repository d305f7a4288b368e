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
    from backend.cli.common import session_factory
    from backend.cli.common import settings as get_settings
    from models_store.export import export_transformers
    from worker.pipeline import WorkerEnv, load_run

    settings = get_settings()
    env = WorkerEnv(session_factory(settings), settings.resolved_store_dir, "cpu")
    params, task, model = load_run(run_id, env)
    out = export_transformers(
        model, output, {"run_id": run_id, "task": params.task, "class_names": list(task.class_names)}
    )
    typer.echo(
        f"layerscope: run {run_id} ({model.config.family}, {params.task}) written to {out}; "
        "load it with transformers.AutoModel.from_pretrained"
    )


def capture(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id.")],
    site: Annotated[
        list[str],
        typer.Option(
            help="Site names in TransformerLens's style (repeat): embed, "
            "blocks.{i}.resid_pre, blocks.{i}.resid_post, blocks.{i}.state[.part]."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The safetensors file to write.")],
    n_sequences: Annotated[int, typer.Option(min=1, max=100_000, help="Held-out sequences of the run's task.")] = 16,
    length: Annotated[
        int | None, typer.Option(min=1, max=4096, help="Sequence length (default: the run's train length).")
    ] = None,
) -> None:
    """Capture named activations of a stored run on held-out sequences of its task (run_with_cache)."""
    from safetensors.torch import save_file

    from backend.cli.common import session_factory
    from backend.cli.common import settings as get_settings
    from layerscope_core.sites import parse_site
    from models_store.cache import run_with_cache
    from worker.pipeline import WorkerEnv, load_run

    for name in site:
        try:
            parse_site(name)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="'--site'") from None
    settings = get_settings()
    env = WorkerEnv(session_factory(settings), settings.resolved_store_dir, "cpu")
    params, task, model = load_run(run_id, env)
    data = task.generate(length or params.train_length, n_sequences, seed=0, split="test")
    _, cache = run_with_cache(model, data.tokens, site)
    tensors = {k: v.contiguous() for k, v in cache.items()}
    save_file({**tensors, "tokens": data.tokens.contiguous(), "labels": data.labels.contiguous()}, str(output))
    typer.echo(
        f"layerscope: {', '.join(f'{k} {tuple(v.shape)}' for k, v in tensors.items())} of run {run_id} "
        f"written to {output}"
    )
