"""The Dash app: a router on ``dcc.Location`` renders one page per path.

``create_dash(api_base_url)`` builds a fresh app (no global page registry), so the backend
can mount it (a2wsgi) and tests can build several. The dashboard reaches data only through
the HTTP API at ``api_base_url``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dash
from dash import Dash, Input, Output, State, dcc, html

from dashboard import callback_guard
from dashboard.all_pages import PAGES
from dashboard.api_client import ApiClient, ApiError
from dashboard.components import alert
from dashboard.pages import PageDef
from dashboard.read_only import disable_writes, read_only_banner
from dashboard.state import embed_figure, is_embed

log = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parent / "assets"

NAV = (
    ("/", "Runs"),
    ("/curves", "Curves"),
    ("/reversal", "Reversal"),
    ("/probe-vs-causal", "Probe vs causal"),
    ("/patching", "Patching"),
    ("/claims", "Claims"),
    ("/jobs", "Jobs"),
    ("/views", "Views"),
)


def create_dash(
    api_base_url: str,
    requests_pathname_prefix: str = "/",
    *,
    client: ApiClient | None = None,
    title: str = "layerscope",
) -> Dash:
    """Build the dashboard.

    ``api_base_url``: where the backend's ``/api`` lives (``http://127.0.0.1:8050``).
    ``requests_pathname_prefix``: the path the app is mounted at (``/`` when the backend
    mounts it at the root of the same server).
    """
    prefix = requests_pathname_prefix if requests_pathname_prefix.endswith("/") else requests_pathname_prefix + "/"
    app = Dash(
        __name__,
        requests_pathname_prefix=prefix,
        routes_pathname_prefix=prefix,
        assets_folder=str(ASSETS),
        suppress_callback_exceptions=True,
        title=title,
        update_title="",  # the tab's title stays while a callback runs (Dash: None or "" alike)
        serve_locally=True,
    )
    api = client or ApiClient(api_base_url)

    def path_for(path: str) -> str:
        return prefix.rstrip("/") + path if path.startswith("/") else path

    def strip(pathname: str | None) -> str:
        p = pathname or "/"
        if prefix != "/" and p.startswith(prefix.rstrip("/")):
            p = p[len(prefix.rstrip("/")) :] or "/"
        return p if p == "/" else p.rstrip("/")

    app.layout = html.Div(
        [
            dcc.Location(id="url", refresh="callback-nav"),
            html.Header(id="navbar", className="navbar"),
            html.Main(id="page", className="main"),
        ],
        id="app-root",
    )

    def navbar(active: str) -> list:
        links = [
            dcc.Link(label, href=path_for(path), className="nav-link" + (" active" if path == active else ""))
            for path, label in NAV
        ]
        return [
            dcc.Link([html.Span("◧", className="brand-mark"), "layerscope"], href=path_for("/"), className="brand"),
            html.Nav(links, className="nav-links"),
            html.A(
                "API docs",
                href="/api/docs",
                className="nav-link nav-api",
                target="_blank",
                title="OpenAPI docs of the backend",
            ),
        ]

    @app.callback(
        Output("page", "children"),
        Output("navbar", "children"),
        Output("navbar", "style"),
        Output("app-root", "className"),
        Input("url", "pathname"),
        State("url", "search"),
    )
    def route(pathname, search):
        embed = is_embed(search)
        body, active = render_page(strip(pathname), search, api=api, path_for=path_for)
        return body, navbar(active), ({"display": "none"} if embed else None), ("embed" if embed else "")

    for page in PAGES:
        page.register(app, api, path_for)
    callback_guard.install(app)
    return app


def _strip_view_page(page: str | None) -> str:
    p = page or "/"
    return p if p == "/" else p.rstrip("/")


def _refresh_tasks(api: ApiClient) -> dict:
    """``GET /api/meta`` ({} for a client without ``meta``, a test's fake, or an unreachable API);
    its task list (file tasks included) kept for the pickers and URL state (else the last list)."""
    from dashboard.theme import remember_tasks

    meta = getattr(api, "meta", None)
    if meta is None:
        return {}
    try:
        got = meta()
    except ApiError:
        return {}
    remember_tasks(got.get("tasks", []))
    return got if isinstance(got, dict) else {}


def render_page(path: str, search: str | None, *, api: ApiClient, path_for) -> tuple[object, str]:
    """The router as a plain function: (page body, active nav path) for ``path``; on a read-only
    server (``GET /api/meta``'s ``read_only``) the body says so first, its write controls disabled."""
    why = _refresh_tasks(api).get("read_only")
    body, active = _render_page(path, search, api=api, path_for=path_for)
    if why and not is_embed(search):
        body = html.Div([read_only_banner(why), disable_writes(body, why)])
    return body, active


def _render_page(path: str, search: str | None, *, api: ApiClient, path_for) -> tuple[object, str]:
    by_path: dict[str, PageDef] = {p.path: p for p in PAGES}
    embed = is_embed(search)
    if path.startswith("/v/"):
        slug = path[3:]
        try:
            view = api.view(slug)
        except ApiError as exc:
            msg = f"No saved view '{slug}'." if exc.status == 404 else f"Could not open the view: {exc.message}"
            return alert(msg, "danger"), ""
        page = by_path.get(_strip_view_page(view.get("page")))
        if page is None:
            return alert(f"The saved view points at an unknown page {view.get('page')!r}.", "danger"), ""
        body = page.layout(search=search, base=view.get("state") or {}, embed=embed, api=api, path_for=path_for)
        if embed:
            return _only_figure(body, embed_figure(search)), page.path
        banner = html.Div(
            [
                html.Span("Saved view", className="badge badge-view"),
                html.Strong(view.get("title", ""), id="view-title"),
                html.Span(f" · {page.title} · /v/{slug}", className="muted"),
            ],
            className="view-banner",
        )
        return html.Div([banner, body]), page.path
    page = by_path.get(path)
    if page is None:
        return html.Div(
            [html.H1("Not found"), html.P(f"No page at {path}."), dcc.Link("Go to the runs table", href=path_for("/"))],
            className="page",
        ), ""
    body = page.layout(search=search, base=None, embed=embed, api=api, path_for=path_for)
    return (_only_figure(body, embed_figure(search)) if embed else body), page.path


def _only_figure(body, gid: str | None):
    """Embed mode with ``&fig=<graph id>``: hide the page's other figure cards (they stay in
    the DOM because callbacks write to them)."""
    if not gid:
        return body
    stack = [body]
    while stack:
        c = stack.pop()
        cid = getattr(c, "id", None)
        if isinstance(cid, str) and cid.endswith("-card") and "figure-card" in (getattr(c, "className", "") or ""):
            if cid != f"{gid}-card":
                c.style = {"display": "none"}
            continue
        kids = getattr(c, "children", None)
        if isinstance(kids, (list, tuple)):
            stack.extend(kids)
        elif kids is not None and not isinstance(kids, str):
            stack.append(kids)
    return body


def main() -> None:  # pragma: no cover - `python -m dashboard.app` for working on pages alone
    import os

    app = create_dash(os.environ.get("LAYERSCOPE_API_URL", "http://127.0.0.1:8050"))
    app.run(port=int(os.environ.get("DASH_PORT", "8060")), debug=False)


if __name__ == "__main__":  # pragma: no cover
    main()

__all__ = ["create_dash", "dash"]
