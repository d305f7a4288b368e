"""Your own labelled data as a task, from /jobs: the upload card. The browser sends the file itself
(``assets/task_upload.js``: a multipart ``POST /api/tasks/upload`` with a progress bar), not a
Dash callback, whose JSON body carried the file base64-encoded and was refused past ~730 KB; so the
page takes what ``layerscope task add`` takes (``MAX_FILE_BYTES``, 64 MiB). The API validates the
file (one message per bad row); the page says in one line why a file is refused, its limit included."""

from __future__ import annotations

from dash import dcc, html

from dashboard.data_attrs import data_attrs

# the API route the browser posts to, and the largest file it takes (science.tasks.file_task)
UPLOAD_URL = "/api/tasks/upload"
MAX_FILE_BYTES = 64 * 2**20


def task_upload_card() -> html.Div:
    """The file, the task's name, Add task, the progress bar and the outcome's line (written by
    ``assets/task_upload.js``; ``data-url`` and ``data-max-bytes`` tell it where and how much)."""
    return html.Div(
        [
            html.H2("Add a task from a file", className="card-title"),
            html.P(
                "JSONL or Parquet rows {tokens, labels} — token ids or strings, one label per token, null = not "
                f"probed; up to {MAX_FILE_BYTES // 2**20} MiB. Runs of it train and are measured at the file's "
                "sequences.",
                className="field-help",
            ),
            html.Label("File", className="field-label", htmlFor="jb-task-file"),
            # Dash has no file input: assets/task_upload.js puts one here (disabled with Add task)
            html.Div(id="jb-task-file-slot", **data_attrs(accept=".jsonl,.json,.parquet,.pq")),
            html.Label("Task name", className="field-label", htmlFor="jb-task-name"),
            dcc.Input(id="jb-task-name", type="text", value="", className="input", placeholder="my_task"),
            html.Div(
                [
                    html.Button(
                        "Add task",
                        id="jb-task-add",
                        className="btn",
                        **data_attrs(url=UPLOAD_URL, max_bytes=str(MAX_FILE_BYTES)),
                    ),
                    html.Progress(id="jb-task-progress", max="100", value="0", style={"display": "none"}),
                    html.Div(id="jb-task-result", className="submit-result", role="status"),
                ],
                className="form-actions",
            ),
        ],
        className="card form-card",
    )
