"""Task generators: Parity, S3, bounded Dyck-k and Code-Depth (docs/SCIENCE.md#tasks), and tasks
defined by your own labelled file (``file_task``, kept by ``task_store``).

The task classes are registered in ``layerscope_core.registry`` (``TaskSpec``, ``register_task``;
plugins through entry points); ``get_task`` builds one by name. Importing this package adds the
file tasks of the registered stores to ``task_names`` (the registry's one list of every task).

>>> from science.tasks import get_task, task_names
>>> task = get_task("dyck", k=2, m=10, target="top")
>>> data = task.generate(length=40, n=512, seed=0)       # TaskData: tokens/labels [n, L]
>>> clean, corrupted, pos = task.corruption_pairs(length=40, n=256, seed=0)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from layerscope_core.registry import add_task_source, task_names, task_spec

from .base import Task, TaskData, early_positions
from .code_depth import CodeDepthTask
from .dyck import DyckTask
from .file_task import FileTask
from .parity import ParityTask
from .s3 import S3Task
from .task_store import TaskStore

# Where file tasks are looked up: callables giving a folder (the settings' store, read when asked,
# so a test's settings apply; the worker package adds it), and the one folder of the process's
# current model store (a WorkerEnv's, the API's), replaced, not accumulated, when another is set.
_TASK_STORES: list[Callable[[], Path]] = []
_CURRENT: list[Path] = []


def use_task_store(root: Path | Callable[[], Path]) -> None:
    """Look file tasks up in ``root``: a callable giving a ``<store>/tasks`` folder (kept), or the
    folder of the current model store (it replaces the previous current one)."""
    if callable(root):
        if root not in _TASK_STORES:
            _TASK_STORES.append(root)
    else:
        _CURRENT[:] = [Path(root)]


def task_stores() -> list[TaskStore]:
    """The ``TaskStore`` of the current folder, then of each callable's (duplicates once)."""
    seen, out = set(), []
    for r in (*_CURRENT, *(folder() for folder in _TASK_STORES)):
        path = Path(r).resolve()
        if path not in seen:
            seen.add(path)
            out.append(TaskStore(path))
    return out


def file_task_names() -> tuple[str, ...]:
    """Names of the file tasks in the registered stores."""
    return tuple(dict.fromkeys(n for s in task_stores() for n in s.names()))


add_task_source(file_task_names)  # task_names(): the registered tasks, then these


def get_task(name: str, **params) -> Task:
    """The task ``name`` with ``params`` (defaults for the rest); a file task takes only
    ``sha256`` (checked against the stored content).

    Raises:
        ValueError: for an unknown task name, an unknown parameter, or a bad value — the
            message names the task and the parameter.
    """
    spec = task_spec(name)
    if spec is not None:  # a registered task: built in, added with register_task, or a plugin's
        task = spec.task_class(**params)
        if not isinstance(task, Task):
            raise ValueError(f"task {name!r} built a {type(task).__name__}, not a science.tasks.Task")
        return task
    for store in task_stores():
        if name in store.names():
            unknown = sorted(set(params) - {"sha256"})
            if unknown:
                raise ValueError(f"{name}: unknown parameter(s) {unknown}; a file task takes only sha256")
            return store.load(name, params.get("sha256"))
    raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(task_names())}")


__all__ = [
    "Task",
    "TaskData",
    "early_positions",
    "file_task_names",
    "get_task",
    "task_names",
    "task_stores",
    "use_task_store",
    "CodeDepthTask",
    "DyckTask",
    "FileTask",
    "ParityTask",
    "S3Task",
    "TaskStore",
]
