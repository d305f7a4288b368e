"""A read-only server (``layerscope serve BUNDLE.zip``: ``GET /api/meta``'s ``read_only``): every
page says so at its top, and the controls that would write — Launch, Save view, the task upload —
are disabled with the reason on hover, rather than live until pressed (the API refuses each write
with a 405 anyway)."""

from __future__ import annotations

from typing import Any

from dash import html

# the controls that write through the API: the jobs form's Launch, the task upload's Add task (its
# file input, made by assets/task_upload.js, is disabled with it), Save view
WRITE_IDS = ("jb-submit", "jb-task-add")
WRITE_SUFFIXES = ("-save-open", "-save-submit")


def read_only_banner(why: str) -> html.Div:
    """The line at the top of every page."""
    return html.Div(
        f"Read-only: {why}. Launching jobs, saving views and adding tasks are off.",
        className="alert alert-warning read-only-banner",
        id="read-only-banner",
    )


def _writes(cid: Any) -> bool:
    return isinstance(cid, str) and (cid in WRITE_IDS or cid.endswith(WRITE_SUFFIXES))


def disable_writes(body: Any, why: str) -> Any:
    """``body`` with every write control (:data:`WRITE_IDS`, Save view) disabled, in place."""
    stack = [body]
    while stack:
        c = stack.pop()
        if _writes(getattr(c, "id", None)):
            c.disabled = True
            c.title = f"read-only: {why}"
        kids = getattr(c, "children", None)
        if isinstance(kids, (list, tuple)):
            stack.extend(kids)
        elif kids is not None and not isinstance(kids, str):
            stack.append(kids)
    return body
