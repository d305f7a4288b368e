"""/jobs — a launch form for train / probe / intervene / patch / suite (the server validates;
a 422 is shown at the field it names), and the job list with live progress, cancel and retry."""

from __future__ import annotations

import json
import math
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import Bind, api_alert, page_frame, register_url_sync
from dashboard.pages import PageDef, run_actions
from dashboard.poll import done, failed, guard, poll_components, poll_status, register_age
from dashboard.state import INT_MAX, F, PageState, parse_int
from dashboard.theme import (
    EVAL_LENGTHS,
    JOB_KINDS,
    MEASURE_PARTS,
    METHODS,
    PRESETS,
    TASKS,
    family_label,
    family_names,
    method_label,
    task_label,
)

KEY = "jobs"
PATH = "/jobs"
LOC = "jb-loc"
POLL_MS = 1500
POLL = "jb-poll"
SPEC = PageState([F("kind", "str", "train", JOB_KINDS), F("show", "str", "all", ("all", "active", "finished"))])
BINDS = [Bind("kind", "jb-kind"), Bind("show", "jb-show")]
ACTIVE = ("queued", "running")

# name → (label, widget, kinds, help); widget: text | int | float | ints | family | families | task | tasks |
# methods | preset | flag (a checkbox: sent as true only when ticked) | parts (the measurement parts:
# sent only when some are unticked, so a whole suite keeps the server's default)
FIELDS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "preset": (
        "Preset",
        "preset",
        ("suite",),
        "smoke: tiny, minutes · quick: study-sized models, 1 seed · paper: 3 seeds",
    ),
    "family": ("Family", "family", ("train",), ""),
    "task": ("Task", "task", ("train",), ""),
    "families": ("Families", "families", ("suite",), "empty = the preset's"),
    "tasks": ("Tasks", "tasks", ("suite",), "empty = the preset's"),
    "seed": ("Seed", "int", ("train",), "≥ 0"),
    "seeds": ("Seeds", "ints", ("suite",), "comma-separated, e.g. 0, 1, 2"),
    "run_id": ("Run id", "int", ("probe", "intervene", "patch"), "the run to measure (see the runs table)"),
    "n_layers": ("Layers", "int", ("train",), "default 4"),
    "d_model": ("d_model", "int", ("train",), "empty = solved to the parameter target (830K)"),
    "max_steps": ("Max steps", "int", ("train", "suite"), "step budget (suite: empty = the preset's)"),
    "max_seconds": (
        "Max seconds",
        "float",
        ("train", "suite"),
        "wall-clock training budget (suite: empty = the preset's; resume a suite with the budget "
        "it was made with, e.g. 75 for the bundled study)",
    ),
    "methods": ("Methods", "methods", ("intervene",), ""),
    "layers": ("Layers", "ints", ("intervene",), "comma-separated; empty = every layer"),
    "eval_lengths": (
        "Eval lengths",
        "ints",
        ("probe", "intervene"),
        f"comma-separated; empty = {', '.join(map(str, EVAL_LENGTHS))}",
    ),
    "eval_length": ("Eval length", "int", ("patch",), "default 40"),
    "positions": ("Positions", "ints", ("patch",), "0-based, comma-separated; empty = the middle position"),
    "n_pairs": ("Pairs", "int", ("patch",), "clean/corrupted pairs (default 128)"),
    "pca_k": ("PCA k", "int", ("intervene",), "directions removed by pca_top_k (default 8)"),
    "n_probe_sequences": ("Probe sequences", "int", ("probe",), "held-out sequences per length (default 500)"),
    "suite": ("Suite", "text", ("train",), "a tag to group runs"),
    "force": (
        "Train again",
        "flag",
        ("train", "suite"),
        "re-run runs already stored with these settings (default: skip them, finish the rest)",
    ),
    "rebuild_weights": (
        "Rebuild weights",
        "flag",
        ("suite",),
        "runs imported without weights: rebuild them within their recorded step budget and "
        "measure them again (unmeasured ones are rebuilt anyway)",
    ),
    "parts": (
        "Measure",
        "parts",
        ("suite",),
        "the parts measured now: probes alone first (minutes a run), then the same suite with "
        "every part adds the rest without fitting the probes again",
    ),
    "name": ("Name", "text", ("train", "suite"), "free text"),
}


def _widget(name: str, kind: str, meta: dict | None = None) -> Any:
    fid = {"type": "jf", "name": name}
    tasks = (meta or {}).get("tasks") or TASKS  # the API's list: plugin and file tasks too
    methods = [*(meta or {}).get("methods", []), "conv1d_removal"] if meta else METHODS
    if kind == "family":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": family_label(f), "value": f} for f in family_names()],
            value="lstm",
            clearable=False,
        )
    if kind == "families":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": family_label(f), "value": f} for f in family_names()],
            value=[],
            multi=True,
            placeholder="preset's families",
        )
    if kind == "task":
        return dcc.Dropdown(
            id=fid, options=[{"label": task_label(t), "value": t} for t in tasks], value="parity", clearable=False
        )
    if kind == "tasks":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": task_label(t), "value": t} for t in tasks],
            value=[],
            multi=True,
            placeholder="preset's tasks",
        )
    if kind == "methods":
        return dcc.Checklist(
            id=fid,
            options=[{"label": method_label(m), "value": m} for m in methods if m != "conv1d_removal"],
            value=[m for m in methods if m != "conv1d_removal"],
            inline=True,
            className="check",
        )
    if kind == "parts":
        return dcc.Checklist(
            id=fid, options=list(MEASURE_PARTS), value=list(MEASURE_PARTS), inline=True, className="check"
        )
    if kind == "flag":
        return dcc.Checklist(
            id=fid, options=[{"label": "yes", "value": "on"}], value=[], inline=True, className="check"
        )
    if kind == "preset":
        return dcc.Dropdown(id=fid, options=[{"label": p, "value": p} for p in PRESETS], value="smoke", clearable=False)
    value = "0" if name == "seed" else ""
    return dcc.Input(
        id=fid,
        type="text",
        value=value,
        className="input",
        debounce=False,
        inputMode="numeric" if kind in ("int", "float", "ints") else "text",
    )


def form_fields(kind: str, meta: dict | None = None) -> list[Any]:
    """The form's fields; ``meta`` (``GET /api/meta``) supplies the task and method choices."""
    out = []
    for name, (label, widget, kinds, help_) in FIELDS.items():
        out.append(
            html.Div(
                [
                    html.Label(label, className="field-label", htmlFor=""),
                    _widget(name, widget, meta),
                    html.Div(help_, className="field-help") if help_ else None,
                    html.Div(id={"type": "jf-msg", "name": name}, className="field-error"),
                ],
                id={"type": "jf-wrap", "name": name},
                className="field form-field",
                style=None if kind in kinds else {"display": "none"},
            )
        )
    return out


def _num(v: str, cast):
    try:
        return cast(v)
    except (TypeError, ValueError):
        return v  # the server names the bad field


def build_params(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """Form values → the params JSON for ``kind``. Text that is not a number is sent as typed,
    so the server's 422 names the field."""
    params: dict[str, Any] = {}
    for name, (_label, widget, kinds, _help) in FIELDS.items():
        if kind not in kinds:
            continue
        v = values.get(name)
        if widget == "parts":  # all ticked: the default; none: [] and the server's 422 at the field
            if isinstance(v, list) and set(v) != set(MEASURE_PARTS):
                params[name] = [p for p in MEASURE_PARTS if p in v]
            continue
        if v is None or v == "" or v == []:
            continue
        if widget == "flag":
            v = True  # ticked (an unticked box is [] and sent as nothing: the server's default)
        elif widget == "int":
            v = _num(str(v).strip(), int)
        elif widget == "float":
            v = _num(str(v).strip(), float)
        elif widget == "ints":
            parts = [p for p in re.split(r"[,\s]+", str(v).strip()) if p]
            try:
                v = [int(p) for p in parts]
            except ValueError:
                v = str(v)
        elif widget == "text":
            v = str(v)
        params[name] = v
    return params


def is_key(key: Any) -> bool:
    """An Idempotency-Key as the form makes them (32 hex digits)."""
    return isinstance(key, str) and re.fullmatch(r"[0-9a-f]{32}", key) is not None


def next_refresh(refresh: Any) -> int:
    """The refresh counter's next value (the store holds an int; a tampered one restarts at 1)."""
    n = parse_int(refresh)
    return 1 if n is None or not 0 <= n < INT_MAX else n + 1


def local_errors(kind: str, values: dict[str, Any]) -> dict[str, str]:
    """Messages by form field for values the browser can hold but JSON cannot carry: a number
    field holding NaN or ±inf (typed as ``nan`` / ``inf`` / ``1e999``) — refused at the field,
    as the API refuses them in a body."""
    out: dict[str, str] = {}
    for name, (_label, widget, kinds, _help) in FIELDS.items():
        v = values.get(name)
        if kind not in kinds or widget not in ("int", "float") or v is None or v == "":
            continue
        try:
            number = float(str(v).strip())
        except ValueError:
            continue  # not a number at all: the server's 422 names it
        if not math.isfinite(number):
            out[name] = f"must be a finite number (got {str(v).strip()[:20]!r})"
    return out


def form_values(ids: Any, values: Any) -> dict[str, Any] | None:
    """{field name: value} from the form's pattern-matching ids and values; None when they do
    not describe this form (unknown names, lengths that differ: a tampered request)."""
    if not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
        return None
    names = [i.get("name") if isinstance(i, dict) else None for i in ids]
    if not all(isinstance(n, str) and n in FIELDS for n in names):
        return None
    return dict(zip(names, values, strict=True))


def field_errors(detail: Any) -> tuple[dict[str, str], list[str]]:
    """A 422 ``detail`` → (messages by form field, messages that name no field)."""
    by_field: dict[str, list[str]] = {}
    other: list[str] = []
    if not isinstance(detail, list):
        return {}, [str(detail)]
    for err in detail:
        if not isinstance(err, dict):
            other.append(str(err))
            continue
        loc = [str(x) for x in err.get("loc", [])]
        msg = err.get("msg", "invalid")
        name = next((x for x in reversed(loc) if x in FIELDS), None)
        if name is None:
            other.append(f"{'.'.join(loc[1:]) or 'body'}: {msg}")
        else:
            by_field.setdefault(name, []).append(msg)
    return {k: "; ".join(v) for k, v in by_field.items()}, other


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


def suite_state(kids: dict) -> str:
    """The badge of a fanned-out suite: running while runs are queued or running, else failed /
    cancelled when any run was, else succeeded (its own state stays "succeeded" once it fanned out)."""
    if kids.get("queued") or kids.get("running"):
        return "running"
    for state in ("failed", "cancelled"):
        if kids.get(state):
            return state
    return "succeeded"


def job_row(j: dict, path_for) -> html.Tr:
    state = j.get("state", "")
    pct = max(0.0, min(1.0, float(j.get("progress") or 0.0)))
    shown = state  # the badge; ``state`` itself decides the actions (cancel, retry)
    fanned = suite_progress(j)
    if fanned is not None:  # the suite's runs, not its fan-out, say how far it is
        pct = max(0.0, min(1.0, fanned[0]))
        j = {**j, "message": fanned[1]}
        if state == "succeeded":  # fanned out: its runs say what state it is in
            shown = suite_state(j.get("children") or {})
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


def _meta(api: ApiClient) -> dict | None:
    """The API's vocabularies (plugins and file tasks included); None when the API is unreachable
    (the form then offers the built-in choices and the page shows the API error elsewhere)."""
    try:
        return api.meta()
    except ApiError:
        return None


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = SPEC.decode(search, base)
    form = html.Div(
        [
            html.H2("Launch", className="card-title"),
            dcc.RadioItems(
                id="jb-kind",
                options=[{"label": k, "value": k} for k in JOB_KINDS],
                value=s["kind"],
                inline=True,
                className="radio kind-tabs",
            ),
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
    form = html.Div([form, task_upload_card()])
    jobs = html.Div(
        [
            html.Div(
                [
                    html.H2("Jobs", className="card-title"),
                    dcc.RadioItems(
                        id="jb-show",
                        options=[
                            {"label": "all", "value": "all"},
                            {"label": "active", "value": "active"},
                            {"label": "finished", "value": "finished"},
                        ],
                        value=s["show"],
                        inline=True,
                        className="radio",
                    ),
                    poll_status(POLL),
                ],
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
    return page_frame(
        title="Jobs",
        subtitle="Train, probe, intervene, patch — or a whole suite. A worker picks jobs up "
        "from the queue; progress updates live.",
        page_key=KEY,
        controls=None,
        body=[html.Div([html.Div([form, run_actions.rebuild_card()]), jobs], className="jobs-layout")],
        embed=embed,
        loc_id=LOC,
        base=base,
    )


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


def register(app, api: ApiClient, path_for) -> None:
    from dashboard.components import register_save_view

    @app.callback(
        Output("jb-task-result", "children"),
        Input("jb-task-add", "n_clicks"),
        State("jb-task-file", "contents"),
        State("jb-task-file", "filename"),
        State("jb-task-name", "value"),
        prevent_initial_call=True,
    )
    def _add_task(n, contents, filename, name):
        return upload_task(api, contents, filename, name) if n else no_update

    register_url_sync(app, spec=SPEC, binds=BINDS, loc_id=LOC, base_id=f"{KEY}-base")
    register_save_view(
        app, api, page_key=KEY, page_path=PATH, spec=SPEC, loc_id=LOC, base_id=f"{KEY}-base", path_for=path_for
    )
    run_actions.register_rebuild_card(app, api)

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
        names = list(form)
        base_cls = [re.sub(r"\s*is-invalid", "", c if isinstance(c, str) else "") for c in classes]
        clear = [""] * len(names)
        if not n:
            return clear, base_cls, no_update, no_update, no_update
        if local := local_errors(kind, form):
            cls = [(c + " is-invalid").strip() if local.get(nm) else c for nm, c in zip(names, base_cls, strict=True)]
            return (
                [local.get(nm, "") for nm in names],
                cls,
                html.Div("Not launched: check the highlighted fields.", className="alert alert-danger"),
                no_update,
                no_update,
            )
        params = build_params(kind, form)
        try:
            job = api.create_job(kind, params, idempotency_key=key if is_key(key) else None)
        except ApiError as exc:
            if exc.status == 422:
                by_field, other = field_errors(exc.detail)
                msgs = [by_field.get(nm, "") for nm in names]
                cls = [
                    (c + " is-invalid").strip() if by_field.get(nm) else c
                    for nm, c in zip(names, base_cls, strict=True)
                ]
                summary = html.Div(
                    ["Not launched: check the highlighted fields.", *[html.Div(o) for o in other]],
                    className="alert alert-danger",
                )
                return msgs, cls, summary, no_update, no_update
            return clear, base_cls, api_alert(exc), no_update, no_update
        return (
            clear,
            base_cls,
            html.Div(
                [f"Job #{job['id']} ({job['kind']}) is {job['state']}."],
                className="alert alert-success",
                id="jb-launched",
            ),
            next_refresh(refresh),
            uuid.uuid4().hex,
        )

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
        job_id = parse_int(trig.get("index"))
        if job_id is None or not 1 <= job_id <= INT_MAX:
            return no_update, no_update
        try:
            if trig["type"] == "job-cancel":
                job = api.cancel_job(job_id)
                msg = f"Cancel requested for job #{job['id']} ({job['state']})."
            else:
                job = api.retry_job(job_id)
                msg = f"Job #{job['id']} queued again."
        except ApiError as exc:
            return api_alert(exc), no_update
        return html.Div(msg, className="alert alert-info"), next_refresh(refresh)


PAGE = PageDef(key=KEY, path=PATH, title="Jobs", layout=layout, register=register)
