"""``layerscope task add FILE --name NAME`` and ``layerscope task list``: file-defined tasks.

The file is validated (one line per bad row), then stored by content hash in the model store
(``<LAYERSCOPE_STORE_DIR>/tasks``), where every worker sharing the store reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import worker  # noqa: F401  (the settings' file tasks join task_names, read at call time)
from backend.cli import common as C
from layerscope_core.registry import task_names  # every task a run may name: built-in, plugin and file tasks

task_app = typer.Typer(help="Tasks defined by your own labelled file (JSONL / Parquet).", no_args_is_help=True)


def add_task_file(path: Path, name: str, tokenizer: str | None = None, data: bytes | None = None) -> dict:
    """Validate ``path`` (or its uploaded ``data``) and store it under ``name`` in the settings' model
    store; returns the stored record (sha256, n_rows, lengths, vocab_size, class_names).

    Raises:
        TaskFileError / ValueError: a bad file (every bad row named) or a taken / bad name.
    """
    from backend.task_files import parse_naming_every_bad_row
    from layerscope_core.registry import BUILTIN_TASKS, added_task_names
    from science.tasks.task_store import TaskStore
    from store.settings import get_settings
    from worker import settings_task_store

    tok = None
    if tokenizer:
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(tokenizer, trust_remote_code=False)  # a tokenizer's own code: never
        except Exception as e:  # noqa: BLE001 - transformers raises OSError / ValueError here
            raise ValueError(
                f"tokenizer {tokenizer!r} could not be loaded ({type(e).__name__}: "
                f"{str(e).strip().splitlines()[0] if str(e).strip() else ''})"
            ) from None
    budget = get_settings().task_file_max_memory_mib * 2**20
    file = parse_naming_every_bad_row(path, tokenizer=tok, data=data, max_memory_bytes=budget)
    store = TaskStore(settings_task_store())
    store.add(file, name, source=Path(path).name, builtin=BUILTIN_TASKS, plugins=added_task_names())
    return store.info(name)


@task_app.command("add")
def add(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSONL or Parquet rows: {tokens, labels} (null = not probed) or {text, spans} with --tokenizer."
        ),
    ],
    name: Annotated[str, typer.Option(help="The task's name (lower-case letters, digits, _).")],
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="A transformers tokenizer (hub name or folder) for text rows: spans are aligned by its offsets."
        ),
    ] = None,
) -> None:
    """Add a task defined by FILE (validated; stored by content hash in the model store)."""
    rec = add_task_file(file, name, tokenizer)
    typer.echo(
        f"task {name}: {rec['n_rows']} rows, lengths {rec['lengths'][0]}..{rec['lengths'][-1]}, "
        f"{rec['vocab_size'] - 1} token ids (and the padding token), classes {rec['class_names']}; sha256 {rec['sha256']}"
    )
    typer.echo(f"use it: layerscope suite --preset smoke --task {name}")


@task_app.command("list")
def list_tasks(
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON on stdout (a list of the tasks' records, for scripts).")
    ] = False,
) -> None:
    """The file tasks of the model store."""
    from science.tasks.task_store import TaskStore
    from worker import settings_task_store

    store = TaskStore(settings_task_store())
    records = [{"name": name, **store.info(name)} for name in store.names()]
    if as_json:
        C.echo_json(records)
        return
    for rec in records:
        lengths = f"lengths {rec['lengths'][0]}..{rec['lengths'][-1]}"
        typer.echo(f"{rec['name']}\t{rec['n_rows']} rows\t{lengths}\t{rec['sha256'][:12]}")


def known_tasks(values: list[str] | None) -> list[str] | None:
    """``--task`` values checked against ``task_names()`` when the command runs (file tasks added
    after the CLI was imported count)."""
    known = task_names()
    for v in values or []:
        if v not in known:
            raise typer.BadParameter(f"{v!r} is not one of {', '.join(map(repr, known))}.", param_hint="'--task'")
    return values
