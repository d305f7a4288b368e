"""/jobs — a launch form for train / probe / intervene / patch / suite (the server validates;
a 422 is shown at the field it names), and the job list with live progress, cancel and retry.

The page's parts: the form's fields and submission (``dashboard.jobs_form``), the job list
(``dashboard.jobs_table``), the task upload (``dashboard.task_upload``) and the rebuild card
(``pages/run_actions``); here the layout and the callbacks, one group per part."""

from __future__ import annotations

import uuid
from typing import Any

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import Bind, api_alert, page_frame
from dashboard.controls import radio
from dashboard.jobs_form import (
    FIELDS,
    build_params,
    field_errors,
    form_fields,
    form_values,
    is_key,
    local_errors,
    next_refresh,
    submit_job,
)
from dashboard.jobs_table import ACTIVE, attempt_text, job_row, job_table, poll_jobs, suite_progress
from dashboard.page_callbacks import register_page
from dashboard.pages import PageDef, run_actions
from dashboard.poll import guard, poll_components, poll_status, register_age
from dashboard.state import INT_MAX, F, PageState, parse_int
from dashboard.task_upload import task_upload_card
from dashboard.theme import JOB_KINDS

KEY = "jobs"
PATH = "/jobs"
LOC = "jb-loc"
POLL_MS = 1500
POLL = "jb-poll"
SHOW = (("all", "all"), ("active", "active"), ("finished", "finished"))
SPEC = PageState([F("kind", "str", "train", JOB_KINDS), F("show", "str", "all", tuple(v for v, _ in SHOW))])
BINDS = [Bind("kind", "jb-kind"), Bind("show", "jb-show")]


def _meta(api: ApiClient) -> dict | None:
    """The API's vocabularies (plugins and file tasks included); None when the API is unreachable
    (the form then offers the built-in choices and the page shows the API error elsewhere)."""
    try:
        return api.meta()
    except ApiError:
        return None


def launch_card(s: dict, api: ApiClient) -> html.Div:
    """The launch form: the job kind, its fields (the API's tasks and methods), the Launch button."""
    return html.Div(
        [
            html.H2("Launch", className="card-title"),
            radio("jb-kind", [(k, k) for k in JOB_KINDS], s["kind"], className="radio kind-tabs"),
            html.Div(form_fields(s["kind"], _meta(api)), className="form-grid", id="jb-form"),
            html.Div(
                [
                    html.Button("Launch job", id="jb-submit", className="btn btn-primary", n_clicks=0),
                    html.Div(id="jb-result", className="submit-result"),
                ],
                className="form-actions",
            ),
        ],
        className="card form-card",
    )


def jobs_card(s: dict) -> html.Div:
    """The job list (polled), its filter, and the stores behind a launch (refresh, Idempotency-Key)."""
    return html.Div(
        [
            html.Div(
                [html.H2("Jobs", className="card-title"), radio("jb-show", SHOW, s["show"]), poll_status(POLL)],
                className="card-header",
            ),
            html.Div(id="jb-list"),
            *poll_components(POLL, POLL_MS),
            dcc.Store(id="jb-refresh", data=0),
            # this submission's Idempotency-Key: a double click on Launch sends it twice, the API makes
            # one job; renewed once a job is made
            dcc.Store(id="jb-key", data=uuid.uuid4().hex),
            html.Div(id="jb-action-msg"),
        ],
        className="card",
    )


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = SPEC.decode(search, base)
    form = html.Div([launch_card(s, api), task_upload_card()])
    return page_frame(
        title="Jobs",
        subtitle="Train, probe, intervene, patch — or a whole suite. A worker picks jobs up "
        "from the queue; progress updates live.",
        page_key=KEY,
        controls=None,
        body=[html.Div([html.Div([form, run_actions.rebuild_card()]), jobs_card(s)], className="jobs-layout")],
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def register(app, api: ApiClient, path_for) -> None:
    register_page(app, api, path_for, key=KEY, path=PATH, spec=SPEC, binds=BINDS, loc_id=LOC)
    run_actions.register_rebuild_card(app, api)
    register_form(app, api)
    register_list(app, api, path_for)


def register_form(app, api: ApiClient) -> None:
    """The fields the chosen kind takes, and Launch (``submit_job``)."""

    @app.callback(
        Output({"type": "jf-wrap", "name": ALL}, "style"),
        Input("jb-kind", "value"),
        State({"type": "jf-wrap", "name": ALL}, "id"),
    )
    def _show_fields(kind, ids):
        if form_values(ids, ids) is None:
            raise PreventUpdate
        return [None if kind in FIELDS[i["name"]][2] else {"display": "none"} for i in ids]

    @app.callback(
        Output({"type": "jf-msg", "name": ALL}, "children"),
        Output({"type": "jf", "name": ALL}, "className"),
        Output("jb-result", "children"),
        Output("jb-refresh", "data"),
        Output("jb-key", "data"),
        Input("jb-submit", "n_clicks"),
        State("jb-kind", "value"),
        State({"type": "jf", "name": ALL}, "value"),
        State({"type": "jf", "name": ALL}, "id"),
        State({"type": "jf", "name": ALL}, "className"),
        State("jb-refresh", "data"),
        State("jb-key", "data"),
        running=[(Output("jb-submit", "disabled"), True, False)],  # no second click while in flight
        prevent_initial_call=True,
    )
    def _submit(n, kind, values, ids, classes, refresh, key):
        form = form_values(ids, values)
        if form is None or kind not in JOB_KINDS or not isinstance(classes, list) or len(classes) != len(form):
            raise PreventUpdate
        return submit_job(api, n, kind, form, classes, refresh, key)


def job_action(api: ApiClient, trig: Any) -> tuple[Any, bool]:
    """Cancel or retry the job a button names (``{"type": "job-cancel" | "job-retry", "index": id}``):
    (the message, or an alert; whether the job list should refresh) — (``no_update``, False) for an
    id that names no job."""
    job_id = parse_int(trig.get("index"))
    if job_id is None or not 1 <= job_id <= INT_MAX:
        return no_update, False
    try:
        if trig["type"] == "job-cancel":
            job = api.cancel_job(job_id)
            msg = f"Cancel requested for job #{job['id']} ({job['state']})."
        else:
            job = api.retry_job(job_id)
            msg = f"Job #{job['id']} queued again."
    except ApiError as exc:
        return api_alert(exc), False
    return html.Div(msg, className="alert alert-info"), True


def register_list(app, api: ApiClient, path_for) -> None:
    """The job list's poll (with its age line), and its cancel / retry buttons."""
    register_age(app, POLL)

    # running=guard: no poll starts while one is pending (a slow API never piles polls up);
    # on an error the last list stays and the age line says why it is not newer.
    @app.callback(
        Output("jb-list", "children"),
        Output(f"{POLL}-done", "data"),
        Input(POLL, "n_intervals"),
        Input("jb-refresh", "data"),
        Input("jb-show", "value"),
        State(f"{POLL}-at", "data"),
        running=guard(POLL),
    )
    def _list(_n, _r, show, shown):
        return poll_jobs(api, SPEC.value("show", show), shown, path_for)

    @app.callback(
        Output("jb-action-msg", "children"),
        Output("jb-refresh", "data", allow_duplicate=True),
        Input({"type": "job-cancel", "index": ALL}, "n_clicks"),
        Input({"type": "job-retry", "index": ALL}, "n_clicks"),
        State("jb-refresh", "data"),
        prevent_initial_call=True,
    )
    def _action(_c, _r, refresh):
        trig = ctx.triggered_id
        if not isinstance(trig, dict) or not (ctx.triggered and ctx.triggered[0].get("value")):
            return no_update, no_update
        msg, refreshed = job_action(api, trig)
        return msg, (next_refresh(refresh) if refreshed else no_update)


PAGE = PageDef(key=KEY, path=PATH, title="Jobs", layout=layout, register=register)
# the form's, the list's and the upload's names, kept importable from the page (tests, callers)
__all__ = [
    "ACTIVE",
    "FIELDS",
    "PAGE",
    "SPEC",
    "attempt_text",
    "build_params",
    "field_errors",
    "form_fields",
    "form_values",
    "is_key",
    "job_row",
    "job_table",
    "local_errors",
    "next_refresh",
    "poll_jobs",
    "suite_progress",
]
