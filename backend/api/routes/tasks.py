"""File-defined tasks over HTTP: ``GET /api/tasks`` lists them; ``POST /api/tasks/upload`` takes
one as a multipart upload (the jobs page's, streamed to a spooled file, up to the CLI's limit,
``MAX_FILE_BYTES``) and ``POST /api/tasks`` as base64 in JSON (within the API's body limit). The file
is validated as ``layerscope task add`` does and stored by content hash in the model store, where
every worker sharing the store reads it."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, UploadFile, status
from pydantic import BaseModel, ConfigDict, Field

from backend.api.deps import UNAUTHORIZED, ReadAuth, SettingsDep, WriteAuth
from backend.task_files import parse_naming_every_bad_row
from science.tasks.file_task import MAX_FILE_BYTES, TaskFileError
from science.tasks.task_store import TaskStore

router = APIRouter(prefix="/tasks", tags=["tasks"], responses=UNAUTHORIZED)

UPLOAD_PATH = "/api/tasks/upload"
LIMIT_TEXT = f"a task file may be up to {MAX_FILE_BYTES // 2**20} MiB"
# the body limit of the upload route (the file plus its multipart framing and the name), streamed
# rather than buffered by ``BodySizeLimit`` (backend/api/main.py)
STREAMED_UPLOADS = {UPLOAD_PATH: (MAX_FILE_BYTES + 2**16, f" ({LIMIT_TEXT})")}


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
    try:
        data = base64.b64decode(body.content_base64, validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(
            422, detail=[{"loc": ["body", "content_base64"], "msg": "not base64", "type": "value_error"}]
        ) from None
    return _add_task(body.name, body.filename, data, settings, field="content_base64")


@router.post(
    "/upload",
    response_model=TaskOut,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAuth],
    summary=f"Upload a labelled JSONL / Parquet file as a task (multipart, streamed; {LIMIT_TEXT})",
    responses={
        413: {"description": f"the file is over the limit ({LIMIT_TEXT})"},
        422: {"description": "a bad file (one message per bad row) or a taken name"},
    },
)
def upload_task_file(
    name: Annotated[
        str, Form(max_length=64, description="the task's name (lower-case letter, then letters, digits, _)")
    ],
    file: Annotated[UploadFile, File(description="the JSONL / Parquet file; .parquet reads Parquet, else JSONL")],
    settings: SettingsDep,
) -> TaskOut:
    """The browser's upload (the jobs page): the file arrives spooled to disk by the multipart
    parser, is read once within ``MAX_FILE_BYTES`` and validated as ``layerscope task add`` does."""
    data = file.file.read(MAX_FILE_BYTES + 1)
    filename = (file.filename or "upload.jsonl")[:200]
    if len(data) > MAX_FILE_BYTES:
        raise HTTPException(413, detail=f"{filename}: over {MAX_FILE_BYTES:,} bytes; {LIMIT_TEXT}")
    return _add_task(name, filename, data, settings, field="file")


def _add_task(name: str, filename: str, data: bytes, settings, *, field: str) -> TaskOut:
    """Validate ``data`` (every bad row named, at ``body.<field>``) and store it as task ``name``."""
    from layerscope_core.registry import BUILTIN_TASKS, added_task_names

    try:
        file = parse_naming_every_bad_row(
            filename, data=data, max_memory_bytes=settings.task_file_max_memory_mib * 2**20
        )
    except TaskFileError as e:
        raise HTTPException(
            422, detail=[{"loc": ["body", field], "msg": m, "type": "value_error"} for m in e.errors]
        ) from None
    store = _store(settings)
    try:
        store.add(file, name, source=filename, builtin=BUILTIN_TASKS, plugins=added_task_names())
    except ValueError as e:
        raise HTTPException(422, detail=[{"loc": ["body", "name"], "msg": str(e), "type": "value_error"}]) from None
    return TaskOut(name=name, **store.info(name))
