"""/ — the runs table: server-side filtering and pagination (dash-ag-grid shows one page),
a run's details (loss curve, behaviour by length) and links into the other views."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import dash_ag_grid as dag
from dash import Input, Output, State, dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import (
    Bind,
    api_alert,
    field,
    page_frame,
    register_save_view,
    register_url_sync,
    state_from_controls,
)
from dashboard.figures.common import graph_config
from dashboard.figures.runs import loss_figure, run_behaviour_figure
from dashboard.pages import PageDef, run_actions
from dashboard.run_kind import CONTROLS_FILTER, control_badge, stop_reason_label
from dashboard.state import INT_MAX, F, PageState, parse_int
from dashboard.suites import suite_options
from dashboard.theme import EVAL_LENGTHS, all_tasks, family_label, family_names, task_label
from layerscope_core.provenance import commit_label
from science.budget import recorded_step_budget

KEY = "runs"
PATH = "/"
LOC = "rn-loc"
PAGE_SIZES = (25, 50, 100, 200)
# ``GET /api/runs?sort=``: the server sorts, so the order holds across pages
SORTS = tuple(
    (f"{d}{col}", f"{label} {arrow}")
    for col, label in (
        ("id", "id"),
        ("name", "name"),
        ("family", "family"),
        ("task", "task"),
        ("seed", "seed"),
        ("n_params", "params"),
        ("steps", "steps"),
        ("train_seconds", "train time"),
        ("created_at", "created"),
    )
    for d, arrow in (("", "↑"), ("-", "↓"))
)

SPEC = PageState(
    [
        F("task", "list_str", [], all_tasks),
        F("family", "list_str", [], family_names),
        F("seed", "int", None, lo=0),
        F("suite", "str", None),
        F("page", "int", 1, lo=1),
        F("size", "int", 50, PAGE_SIZES),
        F("sort", "str", "id", tuple(v for v, _ in SORTS)),
        F("run", "int", None, aliases=("run_id",), lo=1),
        F("q", "str", None),  # search: name, tags, notes, family, task, suite (GET /api/runs?q=)
        F("controls", "str", "include", tuple(v for v, _ in CONTROLS_FILTER)),  # random-init controls listed or not
    ]
)
BINDS = [
    Bind("task", "rn-task"),
    Bind("family", "rn-family"),
    Bind("seed", "rn-seed"),
    Bind("suite", "rn-suite"),
    Bind("page", "rn-page"),
    Bind("size", "rn-size"),
    Bind("sort", "rn-sort"),
    Bind("q", "rn-q"),
    Bind("controls", "rn-controls"),
    Bind("run", "rn-run", prop="data"),
]  # the run last: _load reads the others

PCT = {"function": "params.value == null ? '' : (100 * params.value).toFixed(1) + '%'"}
COLUMNS = [
    {"field": "id", "headerName": "id", "width": 80, "pinned": "left"},
    {"field": "name", "headerName": "name", "minWidth": 200, "flex": 2, "tooltipField": "name"},
    {"field": "suite", "headerName": "suite", "width": 120},
    {"field": "tags_label", "headerName": "tags", "width": 150, "tooltipField": "notes"},
    {"field": "family_label", "headerName": "family", "width": 120},
    {"field": "task_label", "headerName": "task", "width": 110},
    {"field": "seed", "headerName": "seed", "width": 80},
    {"field": "n_layers", "headerName": "layers", "width": 90},
    {"field": "d_model", "headerName": "d_model", "width": 100},
    {
        "field": "n_params",
        "headerName": "params",
        "valueFormatter": {"function": "params.value == null ? '' : (params.value / 1000).toFixed(0) + 'K'"},
        "width": 100,
    },
    {"field": "steps", "headerName": "steps", "width": 90},
    {
        "field": "control_badge",
        "headerName": "control",
        "width": 140,
        "headerTooltip": "a random-init control: the same architecture and seed as a trained run, not trained, probed "
        "only (docs/SCIENCE.md#controls)",
        "cellClassRules": {"cell-control": "params.value != null && params.value != ''"},
    },
    {
        "field": "stop_reason_label",
        "headerName": "stopped",
        "width": 150,
        "headerTooltip": "why training stopped: trained (criterion reached), plateau (no gain over the last evaluations), "
        "budget (still improving when its steps ran out), time limit (docs/SCIENCE.md#plateau)",
    },
    {
        "field": "trained_label",
        "headerName": "trained",
        "width": 110,
        "headerTooltip": "held-out token accuracy at the training length reached the run's early-stop criterion",
        "cellClassRules": {"cell-untrained": "params.value == 'untrained'"},
    },
    {
        "field": "heldout_acc",
        "headerName": "held-out",
        "valueFormatter": PCT,
        "width": 105,
        "headerTooltip": "held-out token accuracy at the training length when training ended",
    },
    {
        "field": "acc_40",
        "headerName": "acc L=40",
        "valueFormatter": PCT,
        "width": 110,
        "headerTooltip": "token accuracy at the training length",
    },
    {
        "field": "acc_max",
        "headerName": "acc longest L",
        "valueFormatter": PCT,
        "width": 130,
        "headerTooltip": "token accuracy at the longest eval length (out of distribution)",
    },
    {"field": "pretrained", "headerName": "pretrained", "width": 140},
    {
        "field": "made_on",
        "headerName": "made on",
        "width": 170,
        "tooltipField": "made_on",
        "headerTooltip": "device and host the run was trained on (a study made in parts mixes them)",
    },
    {
        "field": "commit",
        "headerName": "commit",
        "width": 100,
        "headerTooltip": "git commit of the code that trained the run (empty: not recorded)",
    },
    {"field": "created_at", "headerName": "created", "width": 170},
]


def _row(run: dict) -> dict:
    beh = run.get("behaviour") or {}
    lengths = sorted(int(k) for k in beh if str(k).isdigit())
    return {
        **{
            k: run.get(k)
            for k in (
                "id",
                "name",
                "suite",
                "family",
                "task",
                "seed",
                "n_layers",
                "d_model",
                "n_params",
                "steps",
                "pretrained",
                "made_on",
            )
        },
        "commit": commit_label(run.get("made_with"), 7),
        "tags_label": ", ".join(run.get("tags") or []),
        "notes": run.get("notes"),
        "row_id": str(run.get("id")),  # getRowId must return a string (AG Grid warns otherwise)
        "trained_label": trained_label(run),
        "control_badge": control_badge(run),
        "stop_reason_label": stop_reason_label(run),
        "heldout_acc": run.get("heldout_acc"),
        "family_label": family_label(run.get("family", "")),
        "task_label": task_label(run.get("task", "")),
        "acc_40": (beh.get("40") or {}).get("token_acc"),
        "acc_max": (beh.get(str(lengths[-1])) or {}).get("token_acc") if lengths else None,
        "created_at": str(run.get("created_at", ""))[:19].replace("T", " "),
    }


def trained_label(run: dict) -> str:
    """``trained`` / ``untrained`` from the API's computed ``trained`` field; ``–`` when absent."""
    t = run.get("trained")
    return "–" if t is None else ("trained" if t else "untrained")


def trained_flag(run: dict) -> html.Div:
    """The run panel's verdict line: trained or not, naming held-out accuracy and the criterion."""
    from science.trained import DEFAULT_CRITERION

    if run.get("control"):  # a random-init control is untrained by design: say what it is for
        return html.Div(
            f"{control_badge(run)}: the same architecture and seed as a trained run of the suite, "
            "not trained, probed only. Its curves are the floor the trained runs are measured against "
            "(docs/SCIENCE.md#controls).",
            className="alert alert-info trained-flag control-flag",
            id="rn-trained-flag",
        )
    acc, crit = run.get("heldout_acc"), run.get("early_stop_acc")
    crit = DEFAULT_CRITERION if crit is None else crit
    acc_txt = "no held-out accuracy stored" if acc is None else f"held-out token accuracy {100 * acc:.1f}%"
    if run.get("trained"):
        return html.Div(
            f"Trained: {acc_txt} at the training length ≥ criterion {100 * crit:.0f}%.",
            className="trained-flag trained-yes",
            id="rn-trained-flag",
        )
    return html.Div(
        f"Untrained: {acc_txt} at the training length < criterion {100 * crit:.0f}%. Its probes, "
        "edits and patching describe a model that has not learned the task.",
        className="alert alert-warning trained-flag trained-no",
        id="rn-trained-flag",
    )


def bundle_href(suite: str | None) -> str:
    from urllib.parse import quote

    return f"/api/suites/{quote(suite, safe='')}/bundle" if suite else ""


def fetch_page(api: ApiClient, state: dict) -> dict:
    size = state["size"] if state["size"] in PAGE_SIZES else 50
    page = max(1, state["page"] or 1)
    return api.runs(
        task=state["task"] or None,
        family=state["family"] or None,
        seed=state["seed"],
        suite=state["suite"] or None,
        limit=size,
        offset=(page - 1) * size,
        sort=state["sort"] or None,
        q=state.get("q") or None,
        controls=state.get("controls") or "include",
    )


def grid_rows(rows: Any) -> list[dict]:
    """The grid's selected rows that carry a run id, a known task and family (the grid sends
    what it was given; a tampered request may send anything)."""
    out = []
    for r in rows if isinstance(rows, list) else []:
        rid = parse_int(r.get("id")) if isinstance(r, dict) else None
        if rid is not None and rid >= 1 and r.get("task") in all_tasks() and r.get("family") in family_names():
            out.append({**r, "id": rid})
    return out


def fetch_clamped_page(api: ApiClient, state: dict) -> tuple[dict, int]:
    """(the page of runs, its number): a page past the last one shows the last one (a link to
    ``?page=2`` after runs were deleted, a typed page number)."""
    page = fetch_page(api, state)
    p = max(1, state["page"] or 1)
    n_pages = max(1, -(-page["total"] // page["limit"]))
    if p > n_pages:
        p = n_pages
        page = fetch_page(api, {**state, "page": p})
    return page, p


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = SPEC.decode(search, base)
    controls = html.Div(
        [
            field(
                "Task",
                dcc.Dropdown(
                    id="rn-task",
                    options=[{"label": task_label(t), "value": t} for t in all_tasks()],
                    value=s["task"],
                    multi=True,
                    placeholder="any task",
                ),
                width="240px",
            ),
            field(
                "Family",
                dcc.Dropdown(
                    id="rn-family",
                    options=[{"label": family_label(f), "value": f} for f in family_names()],
                    value=s["family"],
                    multi=True,
                    placeholder="any family",
                ),
                width="280px",
            ),
            field(
                "Seed",
                dcc.Input(
                    id="rn-seed",
                    type="number",
                    min=0,
                    step=1,
                    value=s["seed"],
                    debounce=True,
                    placeholder="any",
                    className="input",
                ),
                width="90px",
            ),
            field(
                "Suite",
                dcc.Dropdown(
                    id="rn-suite",
                    options=suite_options(api, s["suite"]),
                    value=s["suite"],
                    placeholder="any suite",
                    clearable=True,
                ),
                width="300px",
            ),
            field(
                "Search",
                dcc.Input(
                    id="rn-q",
                    type="search",
                    value=s["q"] or "",
                    debounce=True,
                    placeholder="name, tags, notes, family, task",
                    className="input",
                ),
                width="260px",
            ),
            field(
                "Rows per page",
                dcc.Dropdown(
                    id="rn-size",
                    options=[{"label": str(n), "value": n} for n in PAGE_SIZES],
                    value=s["size"],
                    clearable=False,
                ),
                width="120px",
            ),
            field(
                "Sort by",
                dcc.Dropdown(
                    id="rn-sort",
                    options=[{"label": label, "value": v} for v, label in SORTS],
                    value=s["sort"] or "id",
                    clearable=False,
                ),
                width="190px",
            ),
            field(
                "Controls",
                dcc.Dropdown(
                    id="rn-controls",
                    options=[{"label": label, "value": v} for v, label in CONTROLS_FILTER],
                    value=s["controls"],
                    clearable=False,
                ),
                width="190px",
                help="random-init controls: untrained models of the same architecture and seed",
            ),
        ],
        className="control-grid",
    )
    grid = dag.AgGrid(
        id="rn-grid",
        columnDefs=COLUMNS,
        rowData=[],
        defaultColDef={"sortable": False, "resizable": True, "suppressHeaderMenuButton": True},
        dashGridOptions={
            "rowSelection": {
                "mode": "multiRow",
                "checkboxes": True,
                "headerCheckbox": False,
                "enableClickSelection": True,
            },
            "tooltipShowDelay": 300,
            "animateRows": False,
            "suppressCellFocus": True,
            "rowHeight": 34,
            "headerHeight": 38,
        },
        getRowId="params.data.row_id",  # a string field of the row (see _row)
        style={"height": "560px", "width": "100%"},
        className="ag-theme-quartz",
    )
    pager = html.Div(
        [
            html.Button("‹ Prev", id="rn-prev", className="btn btn-sm", n_clicks=0),
            html.Span("Page", className="muted"),
            dcc.Input(
                id="rn-page", type="number", min=1, step=1, value=s["page"], debounce=True, className="input input-page"
            ),
            html.Span(id="rn-pages", className="muted"),
            html.Button("Next ›", id="rn-next", className="btn btn-sm", n_clicks=0),
            html.Span(id="rn-total", className="pager-total"),
        ],
        className="pager",
    )
    actions = html.Div(
        [
            html.Span("Selected runs:", className="muted"),
            dcc.Link("Probe vs causal", id="rn-open-pvc", href=path_for("/probe-vs-causal"), className="btn btn-sm"),
            dcc.Link(
                "Patching side by side", id="rn-open-patching", href=path_for("/patching"), className="btn btn-sm"
            ),
            dcc.Link("Curves of these tasks", id="rn-open-curves", href=path_for("/curves"), className="btn btn-sm"),
            html.Button("Export CSV (all matching)", id="rn-export", className="btn btn-sm", n_clicks=0),
            dcc.Download(id="rn-export-download"),
            html.A(
                "Download suite bundle",
                id="rn-bundle",
                href=bundle_href(s["suite"]),
                className="btn btn-sm",
                title="The suite's results bundle (layerscope import FILE loads it elsewhere)",
                style=None if s["suite"] else {"display": "none"},
            ),
        ],
        className="selection-actions",
    )
    body = [
        html.Div(id="rn-error"),
        dcc.Store(id="rn-run", data=s["run"]),
        html.Div([pager, actions], className="grid-bar"),
        html.Div(grid, className="card grid-card"),
        html.Div(id="rn-losses"),
        html.Div(id="rn-detail"),
    ]
    return page_frame(
        title="Runs",
        subtitle="Every run in the results DB, trained or not (the trained column says "
        "which reached its criterion). Filter on the server; pick rows to open them in the other views.",
        page_key=KEY,
        controls=controls,
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def rebuilt_fact(first: dict[str, Any], train_config: dict[str, Any]) -> str:
    """What a run whose weights were rebuilt (docs/SCIENCE.md#rebuilding-weights) recorded first."""
    acc = first.get("heldout_acc")
    return (
        f"here, within the {recorded_step_budget(first, train_config)} steps its budget gave it; first made on "
        f"{first.get('made_on') or 'unknown'}: {first.get('steps')} steps in {float(first.get('train_seconds') or 0):.0f} s, "
        f"held-out acc {'–' if acc is None else f'{acc:.4f}'}"
    )


def run_detail(api: ApiClient, run_id: int, path_for) -> Any:
    try:
        run = api.run(run_id)
    except ApiError as exc:
        return api_alert(exc)
    q = {"task": run["task"], "family": run["family"], "seed": run["seed"], "run": run["id"]}
    cfg = {
        "task_params": run.get("task_params"),
        "model_config": run.get("model_config"),
        "train_config": run.get("train_config"),
    }
    facts = [
        ("family", family_label(run["family"])),
        ("task", task_label(run["task"])),
        ("seed", run["seed"]),
        ("layers", run["n_layers"]),
        ("d_model", run["d_model"]),
        ("parameters", f"{run['n_params']:,}"),
        ("steps", run.get("steps")),
        ("stopped early", "yes" if run.get("stopped_early") else "no"),
        ("stop reason", stop_reason_label(run)),
        ("train time", f"{run.get('train_seconds', 0):.0f} s"),
        ("suite", run.get("suite") or "–"),
        ("pretrained", run.get("pretrained") or "–"),
        ("config hash", (run.get("config_hash") or "")[:12]),
        ("checkpoint", run.get("checkpoint_id") or "–"),
        ("made on", f"{run.get('made_on') or 'unknown'}, commit {commit_label(run.get('made_with'), 7) or 'unknown'}"),
    ]
    if first := (run.get("made_with") or {}).get("rebuilt_from"):
        facts.append(("weights rebuilt", rebuilt_fact(first, run.get("train_config") or {})))
    return html.Div(
        [
            html.Div(
                [
                    html.H2(
                        [
                            "Run ",
                            html.Span(f"#{run['id']}", className="muted"),
                            " ",
                            html.Span(run.get("name", ""), className="run-name"),
                        ],
                        className="card-title",
                    ),
                    html.Div(
                        [
                            dcc.Link(
                                "Layerwise curves",
                                href=path_for(
                                    "/curves?" + urlencode({"tasks": run["task"], "families": run["family"]})
                                ),
                                className="btn btn-sm",
                            ),
                            dcc.Link(
                                "Probe vs causal",
                                href=path_for("/probe-vs-causal?" + urlencode(q)),
                                className="btn btn-sm",
                            ),
                            dcc.Link(
                                "Patching",
                                href=path_for("/patching?" + urlencode({"runs": run["id"]})),
                                className="btn btn-sm",
                            ),
                        ],
                        className="export-buttons",
                    ),
                ],
                className="card-header",
            ),
            trained_flag(run),
            run_actions.rebuild_section(run),
            run_actions.annotation_section(run),
            html.Div(
                [
                    html.Dl([x for k, v in facts for x in (html.Dt(k), html.Dd(str(v)))], className="facts"),
                    html.Div(
                        dcc.Graph(figure=loss_figure(run), config=graph_config(f"run-{run['id']}-loss")),
                        className="detail-fig",
                    ),
                    html.Div(
                        dcc.Graph(figure=run_behaviour_figure(run), config=graph_config(f"run-{run['id']}-behaviour")),
                        className="detail-fig",
                    ),
                ],
                className="detail-grid",
            ),
            html.Details([html.Summary("Configuration (JSON)"), html.Pre(json.dumps(cfg, indent=2, default=str))]),
            learned_weights(api, run["id"]),
        ],
        className="card",
        id="rn-detail-card",
    )


def learned_weights(api: ApiClient, run_id: int) -> html.Details:
    """What the run's probes and edits learned: one download link per kept safetensors
    file (probe weights and class directions; an edit's removed directions)."""
    try:
        rows = api.run_weights(run_id)
    except ApiError as exc:
        return html.Details([html.Summary("Probe weights and removed directions"), api_alert(exc)])
    if not rows:
        body: Any = html.P(
            "None kept for this run (measured before they were stored, or imported without them).", className="muted"
        )
    else:
        body = html.Table(
            [
                html.Thead(html.Tr([html.Th(h) for h in ("kind", "method", "layer", "eval length", "file")])),
                html.Tbody(
                    [
                        html.Tr(
                            [
                                html.Td(w["kind"]),
                                html.Td(w["method"] or "–"),
                                html.Td("emb" if w["layer"] == -1 else str(w["layer"])),
                                html.Td(str(w["eval_length"])),
                                html.Td(
                                    html.A(
                                        f"{w['artifact_id'][:12]}….safetensors",
                                        href=f"/api/artifacts/{w['artifact_id']}",
                                        download=f"{w['kind']}-{w['method'] or 'probe'}-L{w['eval_length']}-"
                                        f"layer{w['layer']}.safetensors",
                                    )
                                ),
                            ]
                        )
                        for w in rows
                    ]
                ),
            ],
            className="weights-table",
            id="rn-weights",
        )
    return html.Details([html.Summary(f"Probe weights and removed directions ({len(rows)} safetensors files)"), body])


def register(app, api: ApiClient, path_for) -> None:
    register_url_sync(app, spec=SPEC, binds=BINDS, loc_id=LOC, base_id=f"{KEY}-base", reset={"page": 1, "run": None})
    register_save_view(
        app, api, page_key=KEY, page_path=PATH, spec=SPEC, loc_id=LOC, base_id=f"{KEY}-base", path_for=path_for
    )
    run_actions.register(app, api)

    @app.callback(
        Output("rn-grid", "rowData"),
        Output("rn-total", "children"),
        Output("rn-pages", "children"),
        Output("rn-error", "children"),
        Output("rn-prev", "disabled"),
        Output("rn-next", "disabled"),
        Output("rn-page", "value", allow_duplicate=True),
        [Input(b.cid, b.prop) for b in BINDS[:-1]],
        State(f"{KEY}-base", "data"),
        prevent_initial_call="initial_duplicate",
    )
    def _load(*values):
        state = state_from_controls(SPEC, BINDS[:-1], values[:-1], values[-1])
        try:
            page, p = fetch_clamped_page(api, state)
        except ApiError as exc:
            return [], "", "", api_alert(exc), True, True, no_update
        total, size = page["total"], page["limit"]
        n_pages = max(1, -(-total // size))
        first = (p - 1) * size + 1 if total else 0
        last = min(total, p * size)
        return (
            [_row(r) for r in page["items"]],
            f"{first:,}–{last:,} of {total:,} runs",
            f"of {n_pages:,}",
            None,
            p <= 1,
            p >= n_pages,
            no_update if p == state["page"] else p,
        )

    @app.callback(
        Output("rn-export-download", "data"),
        Input("rn-export", "n_clicks"),
        State(LOC, "search"),
        State(f"{KEY}-base", "data"),
        prevent_initial_call=True,
    )
    def _export(n, search, base):
        import pandas as pd

        from dashboard.components import csv_safe

        state = SPEC.decode(search, base)
        runs = api.all_runs(
            limit=100_000,
            task=state["task"] or None,
            family=state["family"] or None,
            seed=state["seed"],
            suite=state["suite"] or None,
            q=state.get("q") or None,
            controls=state.get("controls") or "include",
        )
        df = pd.DataFrame(
            [{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in runs]
        )
        return dcc.send_data_frame(csv_safe(df).to_csv, "layerscope-runs.csv", index=False)

    @app.callback(Output("rn-bundle", "href"), Output("rn-bundle", "style"), Input("rn-suite", "value"))
    def _bundle(suite):
        suite = SPEC.value("suite", suite)
        return bundle_href(suite), (None if suite else {"display": "none"})

    @app.callback(
        Output("rn-page", "value", allow_duplicate=True),
        Input("rn-prev", "n_clicks"),
        Input("rn-next", "n_clicks"),
        State("rn-page", "value"),
        prevent_initial_call=True,
    )
    def _pager(prev, nxt, page):
        from dash import ctx

        page = SPEC.from_dict({"page": page})["page"] or 1  # a hand-typed or tampered value: clamped
        return max(1, page - 1) if ctx.triggered_id == "rn-prev" else min(page + 1, INT_MAX)

    @app.callback(
        Output("rn-run", "data", allow_duplicate=True),
        Input("rn-grid", "selectedRows"),
        State("rn-run", "data"),
        prevent_initial_call=True,
    )
    def _select(rows, current):
        rows = grid_rows(rows)
        if not rows:
            return no_update
        rid = rows[-1]["id"]
        return no_update if rid == current else rid

    @app.callback(Output("rn-detail", "children"), Input("rn-run", "data"))
    def _detail(run_id):
        run_id = SPEC.value("run", run_id)
        if not run_id:
            return html.Div(
                "Select a row to see its loss curve, behaviour by length and configuration.", className="hint"
            )
        return run_detail(api, int(run_id), path_for)

    @app.callback(
        Output("rn-open-pvc", "href"),
        Output("rn-open-patching", "href"),
        Output("rn-open-curves", "href"),
        Input("rn-grid", "selectedRows"),
        Input("rn-run", "data"),
    )
    def _links(rows, run_id):
        rows = grid_rows(rows)
        run_id = SPEC.value("run", run_id)
        ids = [r["id"] for r in rows] or ([run_id] if run_id else [])
        first = rows[0] if rows else None
        pvc = "/probe-vs-causal" + (f"?run={ids[0]}" if ids else "")
        if first:
            pvc = "/probe-vs-causal?" + urlencode(
                {"task": first["task"], "family": first["family"], "run": first["id"]}
            )
        patching = "/patching" + ("?" + urlencode({"runs": ",".join(str(i) for i in ids[:4])}, safe=",") if ids else "")
        tasks = sorted({r["task"] for r in rows})
        fams = sorted({r["family"] for r in rows})
        curves = "/curves" + (
            "?" + urlencode({"tasks": ",".join(tasks), "families": ",".join(fams)}, safe=",") if rows else ""
        )
        return path_for(pvc), path_for(patching), path_for(curves)


PAGE = PageDef(key=KEY, path=PATH, title="Runs", layout=layout, register=register)
__all__ = ["PAGE", "EVAL_LENGTHS"]
