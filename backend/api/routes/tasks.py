"""File-defined tasks over HTTP: ``GET /api/tasks`` lists them, ``POST /api/tasks`` uploads one
(the jobs page's upload). The file is validated as ``layerscope task add`` does and stored by
content hash in the model store, where every worker sharing the store reads it."""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, ConfigDict, Field

from backend.api.deps import UNAUTHORIZED, ReadAuth, SettingsDep, WriteAuth
from backend.task_files import parse_naming_every_bad_row
from science.tasks.file_task import TaskFileError
from science.tasks.task_store import TaskStore

router = APIRouter(prefix="/tasks", tags=["tasks"], responses=UNAUTHORIZED)


class TaskUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=64, description="the task's name (lower-case letter, then letters, digits, _)")
    filename: str = Field(max_length=200, description="the file's name; .parquet reads Parquet, anything else JSONL")
    content_base64: str = Field(description="the file's bytes, base64-encoded")


class TaskOut(BaseModel):
    name: str
    sha256: str
    n_rows: int
    lengths: list[int]
    vocab_size: int
    class_names: list[str]
    source: str = ""
    added_at: str | None = None


def _store(settings) -> TaskStore:
    return TaskStore(settings.resolved_store_dir / "tasks")


@router.get("", response_model=list[TaskOut], dependencies=[ReadAuth], summary="File-defined tasks of the model store")
def list_tasks(settings: SettingsDep) -> list[TaskOut]:
    store = _store(settings)
    return [TaskOut(name=n, **store.info(n)) for n in store.names()]


@router.post(
    "",
    response_model=TaskOut,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAuth],
    summary="Upload a labelled JSONL / Parquet file as a task",
    responses={422: {"description": "a bad file (one message per bad row) or a taken name"}},
)
def upload_task(body: TaskUpload, settings: SettingsDep) -> TaskOut:
    from layerscope_core.registry import TASKS

    try:
        data = base64.b64decode(body.content_base64, validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(
            422, detail=[{"loc": ["body", "content_base64"], "msg": "not base64", "type": "value_error"}]
        ) from None
    try:
        file = parse_naming_every_bad_row(body.filename, data=data)
    except TaskFileError as e:
        raise HTTPException(
            422, detail=[{"loc": ["body", "content_base64"], "msg": m, "type": "value_error"} for m in e.errors]
        ) from None
    store = _store(settings)
    try:
        store.add(file, body.name, source=body.filename, builtin=TASKS)
    except ValueError as e:
        raise HTTPException(422, detail=[{"loc": ["body", "name"], "msg": str(e), "type": "value_error"}]) from None
    return TaskOut(name=body.name, **store.info(body.name))
