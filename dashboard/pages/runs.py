"""/ — the runs table: server-side filtering and pagination (dash-ag-grid shows one page),
a run's details (loss curve, behaviour by length) and links into the other views.

The page's parts: the filters, the pager and the selection's actions (here); the table's columns,
rows and fetching (``dashboard.runs_table``); the run panel (``pages/run_detail``) and its actions
(``pages/run_actions``)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from dash import Input, Output, State, dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import Bind, api_alert, field, page_frame, state_from_controls
from dashboard.controls import choice, control_grid, family_picker, seed_input, suite_dropdown, task_picker
from dashboard.figures.runs import loss_figure, run_behaviour_figure
from dashboard.page_callbacks import register_page
from dashboard.pages import PageDef, run_actions
from dashboard.pages.run_detail import rebuilt_fact, run_detail, trained_flag
from dashboard.run_kind import CONTROLS_FILTER
from dashboard.runs_table import (
    BUNDLE_LABEL,
    BUNDLE_TITLE,
    COLUMNS,
    PAGE_SIZES,
    SORTS,
    bundle_href,
    bundle_link,
    fetch_clamped_page,
    fetch_page,
    grid_rows,
    pager_text,
    run_filters,
    runs_grid,
    table_row,
    trained_label,
)
from dashboard.state import INT_MAX, F, PageState
from dashboard.suites import suite_placeholder, with_suite
from dashboard.theme import EVAL_LENGTHS, all_tasks, family_names

KEY = "runs"
PATH = "/"
LOC = "rn-loc"
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
        # random-init controls listed or not: left out by default, as every other page and the CLI do
        F("controls", "str", "exclude", tuple(v for v, _ in CONTROLS_FILTER)),
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


def filters(s: dict, api: ApiClient) -> html.Div:
    """The filters (task, family, seed, suite, search, controls) and the table's page size and order."""
    search = dcc.Input(
        id="rn-q",
        type="search",
        value=s["q"] or "",
        debounce=True,
        placeholder="name, tags, notes, family, task",
        className="input",
    )
    return control_grid(
        task_picker("rn-task", s["task"], multi=True, width="240px"),
        family_picker("rn-family", s["family"], multi=True, width="280px"),
        seed_input("rn-seed", s["seed"], width="90px"),
        suite_dropdown(api, "rn-suite", s["suite"], placeholder=suite_placeholder(api)),
        field("Search", search, width="260px"),
        choice("Rows per page", "rn-size", [(n, str(n)) for n in PAGE_SIZES], s["size"], width="120px"),
        choice("Sort by", "rn-sort", SORTS, s["sort"] or "id", width="190px"),
        choice(
            "Controls",
            "rn-controls",
            CONTROLS_FILTER,
            s["controls"],
            width="190px",
            help="random-init controls: untrained models of the same architecture and seed",
        ),
    )


def pager(s: dict) -> html.Div:
    """‹ Prev, the page number, Next ›, and how many runs match."""
    return html.Div(
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


def selection_actions(s: dict, path_for) -> html.Div:
    """What the selected runs open (the other views), the CSV of every matching run, the suite's bundle."""
    return html.Div(
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
                BUNDLE_LABEL,
                id="rn-bundle",
                href=bundle_href(s["suite"]),
                className="btn btn-sm",
                title=BUNDLE_TITLE,
                style=None if s["suite"] else {"display": "none"},
            ),
        ],
        className="selection-actions",
    )


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = SPEC.decode(search, base)
    body = [
        html.Div(id="rn-error"),
        dcc.Store(id="rn-run", data=s["run"]),
        html.Div([pager(s), selection_actions(s, path_for)], className="grid-bar"),
        html.Div(runs_grid(), className="card grid-card"),
        html.Div(id="rn-losses"),
        html.Div(id="rn-detail"),
    ]
    return page_frame(
        title="Runs",
        subtitle="Every run in the results DB, trained or not (the trained column says "
        "which reached its criterion). Filter on the server; pick rows to open them in the other views.",
        page_key=KEY,
        controls=filters(s, api),
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def selection_links(rows: list[dict], run_id: int | None) -> tuple[str, str, str]:
    """(probe vs causal, patching, curves) paths for the selected rows (``grid_rows``), else the
    run in the panel: the first row's run, up to four runs side by side, the rows' tasks and families."""
    ids = [r["id"] for r in rows] or ([run_id] if run_id else [])
    first = rows[0] if rows else None
    pvc = "/probe-vs-causal" + (f"?run={ids[0]}" if ids else "")
    if first:
        pvc = "/probe-vs-causal?" + urlencode({"task": first["task"], "family": first["family"], "run": first["id"]})
    patching = "/patching" + ("?" + urlencode({"runs": ",".join(str(i) for i in ids[:4])}, safe=",") if ids else "")
    tasks = sorted({r["task"] for r in rows})
    fams = sorted({r["family"] for r in rows})
    curves = "/curves" + (
        "?" + urlencode({"tasks": ",".join(tasks), "families": ",".join(fams)}, safe=",") if rows else ""
    )
    return pvc, patching, curves


def export_csv(api: ApiClient, state: dict) -> dict:
    """Every run matching the filters (not one page) as ``layerscope-runs.csv``."""
    import pandas as pd

    from dashboard.components import send_csv

    runs = api.all_runs(limit=100_000, **run_filters(with_suite(api, state)))
    df = pd.DataFrame([{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in runs])
    return send_csv(df, "layerscope-runs.csv")


def register(app, api: ApiClient, path_for) -> None:
    register_page(
        app, api, path_for, key=KEY, path=PATH, spec=SPEC, binds=BINDS, loc_id=LOC, reset={"page": 1, "run": None}
    )
    run_actions.register(app, api)
    register_table(app, api)
    register_downloads(app, api)
    register_selection(app, api, path_for)


def controls_left_out(api: ApiClient, state: dict) -> str:
    """`` · 7 random-init controls left out (Controls: runs and controls)`` when the controls filter
    hides some matching the other filters; ``""`` otherwise."""
    if state.get("controls") != "exclude":
        return ""
    hidden = api.runs(**{**run_filters(state), "controls": "only"}, limit=1)["total"]
    return f" · {hidden:,} random-init control(s) left out (Controls: runs and controls)" if hidden else ""


def register_table(app, api: ApiClient) -> None:
    """The table's page for the filters (clamped to the last page), and the pager's buttons."""

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
            page, p = fetch_clamped_page(api, with_suite(api, state))
            total_text, pages_text, n_pages = pager_text(page["total"], page["limit"], p)
            total_text += controls_left_out(api, with_suite(api, state))
        except ApiError as exc:
            return [], "", "", api_alert(exc), True, True, no_update
        return (
            [table_row(r) for r in page["items"]],
            total_text,
            pages_text,
            None,
            p <= 1,
            p >= n_pages,
            no_update if p == state["page"] else p,
        )

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


def register_downloads(app, api: ApiClient) -> None:
    """The CSV of every matching run, and the suite bundle's link (shown when a suite is chosen)."""

    @app.callback(
        Output("rn-export-download", "data"),
        Output("rn-error", "children", allow_duplicate=True),
        Input("rn-export", "n_clicks"),
        State(LOC, "search"),
        State(f"{KEY}-base", "data"),
        prevent_initial_call=True,
    )
    def _export(n, search, base):
        try:
            return export_csv(api, SPEC.decode(search, base)), no_update
        except ApiError as exc:  # the API's refusal (or a query too long for a URL) on the page
            return no_update, api_alert(exc)

    @app.callback(
        Output("rn-bundle", "href"),
        Output("rn-bundle", "children"),
        Output("rn-bundle", "title"),
        Output("rn-bundle", "style"),
        Input("rn-suite", "value"),
    )
    def _bundle(suite):
        suite = SPEC.value("suite", suite)
        try:
            listed = api.suites() if suite else []
        except ApiError:  # the API down: the plain link, whose own answer says why
            listed = []
        return (*bundle_link(suite, listed), None if suite else {"display": "none"})


def register_selection(app, api: ApiClient, path_for) -> None:
    """A picked row opens its run in the panel; the selection sets the links into the other views."""

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
        return tuple(path_for(p) for p in selection_links(grid_rows(rows), SPEC.value("run", run_id)))


PAGE = PageDef(key=KEY, path=PATH, title="Runs", layout=layout, register=register)
# the table's and the run panel's names, kept importable from the page (tests, callers)
__all__ = [
    "BINDS",
    "COLUMNS",
    "EVAL_LENGTHS",
    "PAGE",
    "PAGE_SIZES",
    "SORTS",
    "SPEC",
    "bundle_href",
    "bundle_link",
    "fetch_clamped_page",
    "fetch_page",
    "grid_rows",
    "loss_figure",
    "rebuilt_fact",
    "run_behaviour_figure",
    "run_detail",
    "table_row",
    "trained_flag",
    "trained_label",
]
