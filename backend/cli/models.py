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
    """Capture named activations of a stored run on held-out sequences of its task (run_with_cache).
    A capture that would hold more than 4 GiB is refused before anything large is allocated."""
    from safetensors import SafetensorError
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
    if not output.parent.is_dir():
        raise typer.BadParameter(f"folder {output.parent} does not exist (create it first)", param_hint="'-o'")
    if output.is_dir():  # before the capture, not after it
        raise typer.BadParameter(
            f"{output} is a folder: -o takes the file to write (e.g. {output / 'states.safetensors'})",
            param_hint="'-o'",
        )
    settings = get_settings()
    env = WorkerEnv(session_factory(settings), settings.resolved_store_dir, "cpu")
    params, task, model = load_run(run_id, env)
    length = length or params.train_length

    def held_out(n: int) -> dict:
        """The capture of ``n`` held-out sequences: the sites' tensors, tokens and labels."""
        data = task.generate(length, n, seed=0, split="test")
        _, cache = run_with_cache(model, data.tokens, site)
        return {**{k: v.contiguous() for k, v in cache.items()}, "tokens": data.tokens, "labels": data.labels}

    _check_capture_size(held_out(1), n_sequences, length, site, run_id)  # one sequence's size, times n
    captured = held_out(n_sequences)
    tensors = {k: v for k, v in captured.items() if k not in ("tokens", "labels")}
    try:
        save_file({k: v.contiguous() for k, v in captured.items()}, str(output))
    except SafetensorError as exc:  # a full disk, no write permission: one line, not the Rust error's traceback
        raise OSError(f"cannot write {output}: {exc}") from exc
    typer.echo(
        f"layerscope: {', '.join(f'{k} {tuple(v.shape)}' for k, v in tensors.items())} of run {run_id} "
        f"written to {output}"
    )


CAPTURE_LIMIT_BYTES = 4 * 2**30  # what one capture may hold (its tensors, tokens and labels)


def _check_capture_size(one_sequence: dict, n: int, length: int, sites: list[str], run_id: int) -> None:
    """Refuse a capture over :data:`CAPTURE_LIMIT_BYTES` before generating its data: every tensor
    grows with the number of sequences, so ``n`` times the size of one sequence's capture."""
    total = n * sum(t.numel() * t.element_size() for t in one_sequence.values())
    if total > CAPTURE_LIMIT_BYTES:
        raise ValueError(
            f"a capture of {n:,} sequences of length {length:,} at {', '.join(sites)} of run {run_id} would "
            f"hold {total / 2**30:,.1f} GiB, over the {CAPTURE_LIMIT_BYTES / 2**30:.0f} GiB one capture may hold; "
            "capture fewer sequences (--n-sequences) or shorter ones (--length), in several files if need be"
        )
