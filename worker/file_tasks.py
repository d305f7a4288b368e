"""File tasks in a run's settings: their lengths are the file's, not generated ones.

A file-defined task (``science.tasks.file_task``) has no length rule: a run of it trains at the
file's longest sequence and is measured there (``fit_file_task``); its task parameters pin the
content hash, so the run's config hash names the data it saw.
"""

from __future__ import annotations

from typing import Any

from science.tasks import FileTask


def fit_file_task(params: Any, task: Any) -> None:
    """Set, in place, a ``TrainParams`` of a file task to the file's sequences: ``train_length`` and
    the measurements' ``eval_lengths`` / ``patch_eval_length`` = the longest row, the curriculum
    off when it would start at or past it, ``task_params`` = ``{"sha256": <content hash>}``.
    A built-in task is left alone."""
    if not isinstance(task, FileTask):
        return
    L = task.max_length
    params.train_length = L
    params.task_params = dict(task.params)
    if params.curriculum_start is not None and params.curriculum_start >= L:
        params.curriculum_start = None
    if params.measure is not None:
        params.measure.eval_lengths = [L]
        params.measure.patch_eval_length = L
        if params.measure.patch_positions is not None:
            params.measure.patch_positions = [p for p in params.measure.patch_positions if p < L] or None
