"""Task generators: Parity, S3, bounded Dyck-k and Code-Depth (docs/SCIENCE.md#tasks).

>>> from science.tasks import get_task, TASK_NAMES
>>> task = get_task("dyck", k=2, m=10, target="top")
>>> data = task.generate(length=40, n=512, seed=0)       # TaskData: tokens/labels [n, L]
>>> clean, corrupted, pos = task.corruption_pairs(length=40, n=256, seed=0)
"""

from __future__ import annotations

from layerscope_core.registry import TASKS

from .base import Task, TaskData, early_positions
from .code_depth import CodeDepthTask
from .dyck import DyckTask
from .parity import ParityTask
from .s3 import S3Task

TASK_NAMES: tuple[str, ...] = TASKS  # layerscope_core.registry; the classes below
_REGISTRY: dict[str, type[Task]] = {
    "parity": ParityTask, "s3": S3Task, "dyck": DyckTask, "code_depth": CodeDepthTask}


def get_task(name: str, **params) -> Task:
    """The task ``name`` with ``params`` (defaults for the rest).

    Raises:
        ValueError: for an unknown task name, an unknown parameter, or a bad value — the
            message names the task and the parameter.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASK_NAMES)}")
    return _REGISTRY[name](**params)


__all__ = ["TASK_NAMES", "Task", "TaskData", "early_positions", "get_task",
           "CodeDepthTask", "DyckTask", "ParityTask", "S3Task"]
