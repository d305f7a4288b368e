"""The job list on /jobs: a row per job (its state badge, progress bar, message with its params
and error, cancel / retry), a fanned-out suite shown by its runs' progress, and one poll of the
list (``GET /api/jobs``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from dash import dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import api_alert
from dashboard.poll import done, failed

ACTIVE = ("queued", "running")


def _ago(ts: str | None) -> str:
    if not ts:
        return ""
    try:
        t = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        s = (datetime.now(UTC) - t).total_seconds()
    except ValueError:
        return str(ts)
    if s < 60:
        return f"{int(s)} s ago"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    return t.strftime("%Y-%m-%d %H:%M")


def suite_progress(j: dict) -> tuple[float, str] | None:
    """A suite job's own state ends at "succeeded" once it has fanned out: its progress is that of
    its runs (the children's mean) and its message how many are done. None for other jobs."""
    kids = j.get("children")
    if j.get("kind") != "suite" or not kids:
        return None
    counts = {k: v for k, v in kids.items() if isinstance(v, int) and v > 0}
    total = sum(counts.values())
    parts = [f"{counts.get('succeeded', 0)} done"] + [
        f"{counts[s]} {s}" for s in ("failed", "cancelled", "running", "queued") if counts.get(s)
    ]
    msg = ", ".join(parts) + f" of {total} runs"
    active = counts.get("queued", 0) + counts.get("running", 0)
    # finished children are as far as they will go: with none active the bar is full
    pct = float(j.get("children_progress") or 0.0) if active else 1.0
    return pct, msg


def job_row(j: dict, path_for) -> html.Tr:
    # the badge: the API's state (a fanned-out suite reads its runs'); the row's own state
    # (``job_state``) decides the actions (cancel, retry)
    shown = j.get("state", "")
    state = j.get("job_state") or shown
    pct = max(0.0, min(1.0, float(j.get("progress") or 0.0)))
    fanned = suite_progress(j)
    if fanned is not None:  # the suite's runs, not its fan-out, say how far it is
        pct = max(0.0, min(1.0, fanned[0]))
        j = {**j, "message": fanned[1]}
    actions = []
    if state in ACTIVE:
        actions.append(
            html.Button(
                "Cancel",
                id={"type": "job-cancel", "index": j["id"]},
                className="btn btn-sm btn-danger",
                n_clicks=0,
                disabled=bool(j.get("cancel_requested")),
            )
        )
    if state in ("failed", "cancelled"):
        actions.append(
            html.Button("Retry", id={"type": "job-retry", "index": j["id"]}, className="btn btn-sm", n_clicks=0)
        )
    details = html.Details(
        [
            html.Summary(j.get("message") or ("waiting for a worker" if state == "queued" else state)),
            html.Pre(json.dumps(j.get("params") or {}, indent=2)),
            html.Pre(j["error"], className="job-error") if j.get("error") else None,
            html.Div(
                f"worker: {j.get('worker') or '–'} · config {str(j.get('config_hash') or '')[:10]}", className="muted"
            ),
        ]
    )
    return html.Tr(
        [
            html.Td(f"#{j['id']}"),
            html.Td(j.get("kind", "")),
            html.Td(
                html.Span(
                    shown + (" (cancelling)" if j.get("cancel_requested") and state in ACTIVE else ""),
                    className=f"badge state-{shown}",
                    **{"data-state": state},
                )
            ),
            html.Td(
                html.Div(
                    [
                        html.Div(className=f"progress-bar state-{shown}", style={"width": f"{100 * pct:.0f}%"}),
                        html.Span(f"{100 * pct:.0f}%", className="progress-label"),
                    ],
                    className="progress",
                    title=f"{100 * pct:.1f}%",
                )
            ),
            html.Td(details, className="job-message"),
            html.Td(attempt_text(j)),
            html.Td(dcc.Link(f"run #{j['run_id']}", href=path_for(f"/?run={j['run_id']}")) if j.get("run_id") else ""),
            html.Td(_ago(j.get("created_at")), title=str(j.get("created_at", ""))),
            html.Td(html.Div(actions), className="job-actions"),
        ],
        className="job-row",
        id=f"job-{j['id']}",
        **{"data-state": state},
    )


def attempt_text(j: dict) -> str:
    """``attempt/max`` for a job a worker ran; "–" for a record no worker attempted (an import
    row is written finished, attempt 0: "0/3" would read as a job that never started)."""
    if j.get("kind") == "import":
        return "–"
    return f"{j.get('attempt', 0)}/{j.get('max_attempts', '')}"


def job_table(jobs: list[dict], total: int, path_for) -> Any:
    if not jobs:
        return html.P("No jobs yet. Launch one with the form.", className="muted")
    head = html.Thead(
        html.Tr([html.Th(h) for h in ("job", "kind", "state", "progress", "message", "attempt", "run", "created", "")])
    )
    return html.Div(
        [
            html.Table([head, html.Tbody([job_row(j, path_for) for j in jobs])], className="table jobs-table"),
            html.Div(f"{len(jobs)} of {total} jobs (newest first)", className="muted") if total > len(jobs) else None,
        ]
    )


def poll_jobs(api: ApiClient, show: str | None, shown: Any, path_for) -> tuple[Any, dict]:
    """One poll of the job list → (the list, or ``no_update`` to keep the last one; the poll's
    outcome for the age line). ``shown``: when the last good list landed (None: none yet) —
    an error then replaces nothing but says why the list is not newer."""
    states = (
        list(ACTIVE) if show == "active" else (["succeeded", "failed", "cancelled"] if show == "finished" else None)
    )
    try:
        page = api.jobs(limit=50, state=states)
    except ApiError as exc:
        return (api_alert(exc) if shown is None else no_update), failed(f"{exc.status} {exc.message}")
    except Exception as exc:  # noqa: BLE001 - never stop polling on a surprise: say it, keep the list
        return (api_alert(exc) if shown is None else no_update), failed(f"{type(exc).__name__}: {exc}")
    return job_table(page["items"], page["total"], path_for), done()
