"""/views — the saved views (short links /v/<slug>): title, page, who saved it (the token's name,
where tokens are on), when; each opens, and a writer deletes it (DELETE /api/views/{slug})."""

from __future__ import annotations

from typing import Any

from dash import ALL, Input, Output, ctx, dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import api_alert
from dashboard.pages import PageDef

KEY = "views"
PATH = "/views"


def views_table(views: list[dict], path_for) -> Any:
    """The saved views as a table, newest first, each with its link and a delete button."""
    if not views:
        return html.P("No saved view yet: every page's Save view button makes one.", className="muted")
    head = html.Thead(html.Tr([html.Th(h) for h in ("title", "page", "saved by", "saved", "link", "")]))
    rows = [
        html.Tr(
            [
                html.Td(v.get("title", "")),
                html.Td(v.get("page", "")),
                html.Td(v.get("created_by") or "–"),
                html.Td(str(v.get("created_at", ""))[:16].replace("T", " ")),
                html.Td(dcc.Link(f"/v/{v['slug']}", href=path_for(f"/v/{v['slug']}"))),
                html.Td(
                    html.Button(
                        "Delete", id={"type": "view-del", "slug": v["slug"]}, className="btn btn-sm", n_clicks=0
                    )
                ),
            ],
            **{"data-slug": v["slug"]},
        )
        for v in views
    ]
    return html.Div(
        html.Table([head, html.Tbody(rows)], className="table table-compact", id="vw-table"), className="table-wrap"
    )


def _listing(api: ApiClient, path_for) -> Any:
    try:
        return views_table(api.views(), path_for)
    except ApiError as exc:
        return api_alert(exc)


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    return html.Div(
        [
            html.Div(
                [
                    html.Div(
                        [
                            html.H1("Saved views"),
                            html.P(
                                "Short links to a page and its state, newest first. Deleting one breaks its link for everyone "
                                "(a writer's action: a token where the server needs one).",
                                className="subtitle",
                            ),
                        ],
                        className="page-title",
                    )
                ],
                className="page-header",
            ),
            html.Div(id="vw-msg"),
            dcc.Store(id="vw-trigger", data=1),  # the listing loads by callback, like every page's data
            dcc.Loading(html.Div(id="vw-list", className="card"), type="dot"),
        ],
        className="page",
    )


def register(app, api: ApiClient, path_for) -> None:
    @app.callback(
        Output("vw-list", "children"),
        Output("vw-msg", "children"),
        Input("vw-trigger", "data"),
        Input({"type": "view-del", "slug": ALL}, "n_clicks"),
    )
    def _list_or_delete(_trigger, clicks):
        trig = ctx.triggered_id
        if not isinstance(trig, dict):  # the page opened: list
            return _listing(api, path_for), None
        if not any(clicks or []) or not (ctx.triggered and ctx.triggered[0].get("value")):
            return no_update, no_update
        if not isinstance(trig.get("slug"), str):
            return no_update, no_update  # a tampered button id
        try:
            api.delete_view(trig["slug"])
        except ApiError as exc:
            return no_update, api_alert(exc)
        return _listing(api, path_for), html.Div(f"Deleted view {trig['slug']}.", className="alert alert-info")


PAGE = PageDef(key=KEY, path=PATH, title="Saved views", layout=layout, register=register)
