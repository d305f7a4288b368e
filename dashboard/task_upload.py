"""Your own labelled data as a task, from /jobs: the upload card and the call that sends the file
to ``POST /api/tasks`` (validated there: one message per bad row)."""

from __future__ import annotations

from dash import dcc, html

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import api_alert


def task_upload_card() -> html.Div:
    """Your own labelled data as a task: a JSONL / Parquet file and a name, sent to
    ``POST /api/tasks`` (validated there: one message per bad row)."""
    return html.Div(
        [
            html.H2("Add a task from a file", className="card-title"),
            html.P(
                "JSONL or Parquet rows {tokens, labels} — token ids or strings, one label per token, null = not "
                "probed. Runs of it train and are measured at the file's sequences.",
                className="field-help",
            ),
            dcc.Upload(
                id="jb-task-file",
                children=html.Div(["Drop a file here or ", html.A("choose one")]),
                className="upload-box",
                multiple=False,
            ),
            html.Label("Task name", className="field-label", htmlFor="jb-task-name"),
            dcc.Input(id="jb-task-name", type="text", value="", className="input", placeholder="my_task"),
            html.Div(
                [
                    html.Button("Add task", id="jb-task-add", className="btn", n_clicks=0),
                    html.Div(id="jb-task-result", className="submit-result"),
                ],
                className="form-actions",
            ),
        ],
        className="card form-card",
    )


def upload_task(api: ApiClient, contents: str | None, filename: str | None, name: str | None) -> html.Div:
    """Send an upload (``dcc.Upload``'s ``data:...;base64,...`` contents) to ``POST /api/tasks``."""
    if not all(isinstance(v, (str, type(None))) for v in (contents, filename, name)):
        return html.Div("Choose one file and give the task a name.", className="alert alert-danger")
    if not contents or not filename:
        return html.Div("Choose a file first.", className="alert alert-danger")
    if not name:
        return html.Div("Give the task a name.", className="alert alert-danger")
    try:
        task = api.post(
            "/api/tasks", {"name": name, "filename": filename, "content_base64": contents.split(",", 1)[-1]}
        )
    except ApiError as exc:
        if exc.status == 422 and isinstance(exc.detail, list):
            return html.Div(
                [html.Div(f"Not added ({filename}):"), *[html.Div(str(d.get("msg", d))) for d in exc.detail[:20]]],
                className="alert alert-danger",
                id="jb-task-errors",
            )
        return api_alert(exc)
    return html.Div(
        f"Task {task['name']} added: {task['n_rows']} rows, lengths {task['lengths'][0]}..{task['lengths'][-1]}, "
        f"classes {', '.join(task['class_names'])}. Reload to pick it in the form.",
        className="alert alert-success",
        id="jb-task-added",
    )
