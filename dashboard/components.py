"""Building blocks shared by the pages: layout frame, labelled controls, figure cards with
PNG/SVG/CSV export, "Save view", and the URL ⇄ controls synchronisation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import pandas as pd
from dash import (  # noqa: F401
    ClientsideFunction,
    Dash,
    Input,
    Output,
    State,
    ctx,
    dcc,
    html,
    no_update,
)

from dashboard.api_client import ApiClient, ApiError
from dashboard.figures.common import graph_config
from dashboard.state import F, PageState, global_flags
from layerscope_core.csv_cells import csv_text
from science.trained import DEFAULT_CRITERION, untrained_reason

log = logging.getLogger(__name__)


# -- layout pieces ---------------------------------------------------------------------------
def field(
    label: str, control: Any, *, width: str | None = None, help: str | None = None, id: str | None = None
) -> html.Div:
    style = {"width": width} if width else None
    kids = [html.Label(label, className="field-label"), control]
    if help:
        kids.append(html.Div(help, className="field-help"))
    return html.Div(kids, className="field", style=style, id=id or "")


def toolbar(*children: Any, hidden: bool = False) -> html.Div:
    return html.Div(list(children), className="toolbar", style={"display": "none"} if hidden else None)


def page_frame(
    *,
    title: str,
    subtitle: str | None,
    page_key: str,
    controls: Any,
    body: list[Any],
    embed: bool,
    loc_id: str,
    base: dict | None,
    actions: Sequence[Any] = (),
) -> html.Div:
    """A page: header (title, subtitle, Save view), controls, body. In embed mode only the
    figures are shown; the controls stay in the DOM (hidden) because they drive the callbacks."""
    loc = dcc.Location(id=loc_id, refresh="callback-nav")
    base_store = dcc.Store(id=f"{page_key}-base", data=base or {})
    if embed:
        return html.Div(
            [loc, base_store, html.Div(controls, style={"display": "none"}), *body], className="page page-embed"
        )
    header = html.Div(
        [
            html.Div(
                [html.H1(title), html.P(subtitle, className="subtitle") if subtitle else None], className="page-title"
            ),
            html.Div([*actions, save_view_control(page_key)], className="page-actions"),
        ],
        className="page-header",
    )
    return html.Div(
        [loc, base_store, header, html.Div(controls, className="controls") if controls else None, *body],
        className="page",
    )


def save_view_control(page_key: str) -> html.Div:
    return html.Div(
        [
            html.Button(
                "Save view",
                id=f"{page_key}-save-open",
                className="btn btn-primary",
                n_clicks=0,
                title="Store this page's state under a short link",
            ),
            html.Div(
                [
                    dcc.Input(
                        id=f"{page_key}-save-title",
                        type="text",
                        placeholder="Title of this view",
                        maxLength=200,
                        debounce=False,
                        className="input",
                        value="",
                    ),
                    html.Button("Save", id=f"{page_key}-save-submit", className="btn btn-primary", n_clicks=0),
                    html.Div(id=f"{page_key}-save-result", className="save-result"),
                ],
                id=f"{page_key}-save-panel",
                className="save-panel",
                style={"display": "none"},
            ),
        ],
        className="save-view",
    )


def figure_card(
    gid: str,
    *,
    title: str,
    filename: str,
    description: Any = None,
    figure: Any = None,
    extra: Sequence[Any] = (),
    footer: Sequence[Any] = (),
    className: str = "",
) -> html.Div:
    """A titled figure with PNG / SVG / CSV export buttons. ``gid`` is the dcc.Graph id."""
    buttons = html.Div(
        [
            html.Button("PNG", id=f"{gid}-png", className="btn btn-sm", n_clicks=0, title="Download as PNG"),
            html.Button("SVG", id=f"{gid}-svg", className="btn btn-sm", n_clicks=0, title="Download as SVG"),
            html.Button(
                "CSV", id=f"{gid}-csv", className="btn btn-sm", n_clicks=0, title="Download the data behind this figure"
            ),
        ],
        className="export-buttons",
    )
    return html.Div(
        [
            html.Div([html.H2(title, className="card-title"), buttons], className="card-header"),
            html.Div(description, className="card-desc") if description else None,
            *extra,
            dcc.Loading(
                dcc.Graph(
                    id=gid,
                    figure=figure or {"data": [], "layout": {"height": 360}},
                    config=graph_config(filename),
                    className="graph",
                ),
                type="dot",
                delay_show=250,
            ),
            *footer,
            dcc.Download(id=f"{gid}-download"),
            dcc.Store(id=f"{gid}-exported"),
        ],
        className=f"card figure-card {className}".strip(),
        id=f"{gid}-card",
    )


def alert(message: Any, kind: str = "warning") -> html.Div:
    return html.Div(message, className=f"alert alert-{kind}", role="alert")


def api_alert(exc: Exception) -> html.Div:
    if isinstance(exc, ApiError):
        return alert(f"The API answered {exc.status}: {exc.message}", "danger")
    return alert(f"Could not load data: {exc}", "danger")


def checkbox(cid: str, label: str, value: bool) -> dcc.Checklist:
    return dcc.Checklist(
        id=cid, options=[{"label": label, "value": "on"}], value=["on"] if value else [], className="check", inline=True
    )


# -- trained runs (docs/SCIENCE.md#trained) ---------------------------------------------------
TRAINED_HELP = (
    f"trained: held-out token accuracy at the training length reached the run's early-stop "
    f"criterion ({DEFAULT_CRITERION:g} by default). Untrained runs are marked wherever they are shown."
)


def trained_field(default: bool = True) -> F:
    """The page-state field of the "trained runs only" switch (``?trained=1``, on by default)."""
    return F("trained", "bool", default)


def trained_bind(cid: str) -> Bind:
    """The URL binding of :func:`trained_switch` with id ``cid``."""
    return Bind("trained", cid, kind="bool")


def trained_switch(cid: str, value: bool) -> html.Div:
    """The "trained runs only" switch: a labelled one-option checklist (bind with :func:`trained_bind`)."""
    return field("Runs", checkbox(cid, "trained runs only", value), help=TRAINED_HELP, id=f"{cid}-field")


def trained_filter(on: bool) -> bool | None:
    """The API's ``trained=`` parameter for the switch: ``True`` (trained only) or None (all runs)."""
    return True if on else None


def is_untrained(run: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """A run record the API marked ``trained: false`` (a record without the field is not judged)."""
    return run is not None and run.get("trained") is False


def none_trained_note(runs: Sequence[dict[str, Any]], what: str) -> str | None:
    """With the "trained runs only" switch on and nothing to show: how many runs of the selection
    (``runs``: ``/api/runs`` records asked for without the trained filter) are stored but
    untrained, and how to see them; None when there is none (then nothing is stored)."""
    n = sum(r.get("trained") is False for r in runs)
    if not n:
        return None
    return (
        f"{n} run(s) of this selection are stored but none is trained (held-out accuracy below the "
        f'early-stop criterion): untick "trained runs only" to see their {what}, marked untrained.'
    )


def untrained_banner(run: dict[str, Any] | None, *, what: str = "probes, edits and patching") -> html.Div | None:
    """A warning naming the run's held-out accuracy when ``run`` is untrained, else None.

    ``run``: an ``/api/runs`` record (``id``, ``name``, ``heldout_acc``, ``early_stop_acc``,
    ``trained``)."""
    if not is_untrained(run):
        return None
    reason = untrained_reason(run.get("heldout_acc"), run.get("early_stop_acc"))
    return html.Div(
        [
            html.Strong("Untrained run. "),
            (
                f"Run #{run.get('id')} {run.get('name', '')} did not learn its task: {reason}. "
                f"Its {what} describe a model at or near chance; no verdict reads it."
            ),
        ],
        className="alert alert-warning untrained-banner",
        role="alert",
    )


# -- URL ⇄ controls --------------------------------------------------------------------------
@dataclass(frozen=True)
class Bind:
    """Field ``name`` of the page state is shown by ``cid.prop``; ``kind="bool"`` for a
    one-option checklist."""

    name: str
    cid: str
    prop: str = "value"
    kind: str = "plain"

    def to_control(self, v: Any) -> Any:
        if self.kind == "bool":
            return ["on"] if v else []
        return v

    def from_control(self, v: Any) -> Any:
        if self.kind == "bool":
            return bool(v)
        return v


def state_from_controls(
    spec: PageState, binds: Sequence[Bind], values: Sequence[Any], base: dict | None = None
) -> dict[str, Any]:
    raw = {b.name: b.from_control(v) for b, v in zip(binds, values, strict=True)}
    return spec.from_dict(raw, base)


def sync_step(
    *,
    spec: PageState,
    binds: Sequence[Bind],
    trigger: str | None,
    loc_id: str,
    search: str | None,
    values: Sequence[Any],
    base: dict | None,
    reset: dict[str, Any] | None = None,
    resolve: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[Any]:
    """The URL ⇄ controls rule, as a plain function: returns the new control values (or
    ``no_update``) followed by the new query string (or ``no_update``)."""
    reset = reset or {}
    resolve = resolve or (lambda state: state)
    if trigger == loc_id:  # back / forward / a link: the query string sets the controls
        state = resolve(spec.decode(search, base))
        out = []
        for b, current in zip(binds, values, strict=True):
            new = b.to_control(state[b.name])
            out.append(no_update if new == current else new)
        return [*out, no_update]
    state = state_from_controls(spec, binds, values, base)
    out = [no_update] * len(binds)
    resolved = resolve(state)
    for i, b in enumerate(binds):  # a control the page reads otherwise shows what it reads
        if resolved[b.name] != state[b.name]:
            out[i] = b.to_control(resolved[b.name])
    state = resolved
    trig = next((b.name for b in binds if b.cid == trigger), None)
    if trig is not None and trig not in reset:
        for i, b in enumerate(binds):
            if b.name in reset and state[b.name] != reset[b.name]:
                state[b.name] = reset[b.name]
                out[i] = b.to_control(reset[b.name])
    new_search = spec.encode(state, keep=global_flags(search))
    return out + [no_update if new_search == (search or "") else new_search]


def register_url_sync(
    app: Dash,
    *,
    spec: PageState,
    binds: Sequence[Bind],
    loc_id: str,
    base_id: str,
    reset: dict[str, Any] | None = None,
    resolve: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """One circular callback: a control change writes the query string (a history entry);
    a query change (back/forward) sets the controls. ``reset``: fields set back to a value
    when any *other* control changes (the runs table's page number when a filter changes);
    ``resolve``: the state as the page reads it (an eval length the suite was measured at), set
    on the controls and in the URL alike."""

    @app.callback(
        [Output(b.cid, b.prop) for b in binds] + [Output(loc_id, "search")],
        [Input(loc_id, "search")] + [Input(b.cid, b.prop) for b in binds],
        State(base_id, "data"),
        prevent_initial_call=True,
    )
    def _sync(search, *rest):
        return sync_step(
            spec=spec,
            binds=binds,
            trigger=ctx.triggered_id,
            loc_id=loc_id,
            search=search,
            values=rest[:-1],
            base=rest[-1],
            reset=reset,
            resolve=resolve,
        )


def register_save_view(
    app: Dash,
    client: ApiClient,
    *,
    page_key: str,
    page_path: str,
    spec: PageState,
    loc_id: str,
    base_id: str,
    path_for: Callable[[str], str],
    shown: Callable[[dict], dict] | None = None,
) -> None:
    """ "Save view" of a page: its state as the URL holds it, with what the page fills in when a
    field is left open (``shown``: e.g. the suite shown by default) written into the view, so a
    shared link shows what was on screen when it was saved, not a later default."""

    @app.callback(
        Output(f"{page_key}-save-panel", "style"),
        Input(f"{page_key}-save-open", "n_clicks"),
        State(f"{page_key}-save-panel", "style"),
        prevent_initial_call=True,
    )
    def _toggle(_n, style):
        shown = (style or {}).get("display") != "none"
        return {"display": "none"} if shown else {"display": "flex"}

    @app.callback(
        Output(f"{page_key}-save-result", "children"),
        Input(f"{page_key}-save-submit", "n_clicks"),
        State(f"{page_key}-save-title", "value"),
        State(loc_id, "search"),
        State(base_id, "data"),
        prevent_initial_call=True,
    )
    def _save(_n, title, search, base):
        title = title.strip() if isinstance(title, str) else ""
        if not title:
            return html.Span("Give the view a title.", className="text-danger field-error")
        decoded = spec.decode(search, base)
        state = spec.to_json(shown(decoded) if shown is not None else decoded)
        try:
            res = client.create_view(title, page_path, state)
        except ApiError as exc:
            return html.Span(f"Not saved: {exc.message}", className="text-danger field-error")
        slug = res["slug"]
        href = path_for(f"/v/{slug}")
        return html.Span(
            [
                "Saved: ",
                html.A(href, href=href, id=f"{page_key}-save-link", className="view-link", target="_blank"),
                dcc.Clipboard(target_id=f"{page_key}-save-link", title="Copy link", className="clipboard"),
            ]
        )


def send_csv(df: pd.DataFrame, filename: str) -> dict:
    """``df`` as a CSV download (``dcc.Download`` data) through the one CSV writer, which defuses
    spreadsheet formulas in text cells (user-typed run names, tags, notes)."""
    return dcc.send_string(csv_text(df), filename)


def register_exports(
    app: Dash,
    *,
    gid: str,
    filename: str,
    spec: PageState,
    loc_id: str,
    base_id: str,
    csv_rows: Callable[[dict[str, Any]], Sequence[dict] | pd.DataFrame],
) -> None:
    app.clientside_callback(
        """
        function(png, svg) {
            var trig = (dash_clientside.callback_context.triggered || []).map(function(t){return t.prop_id;})[0] || "";
            if (!png && !svg) { return dash_clientside.no_update; }
            var fmt = trig.indexOf("-svg.") >= 0 ? "svg" : "png";
            var host = document.getElementById(%s);
            var el = host ? (host.classList.contains("js-plotly-plot") ? host : host.querySelector(".js-plotly-plot")) : null;
            if (!el || !window.Plotly) { return dash_clientside.no_update; }
            window.Plotly.downloadImage(el, {format: fmt, filename: %s, width: el.offsetWidth,
                                             height: el.offsetHeight, scale: fmt === "png" ? 2 : 1});
            return fmt + ":" + Date.now();
        }
        """  # noqa: UP031 - JavaScript braces: %s keeps them literal
        % (json.dumps(gid), json.dumps(filename)),
        Output(f"{gid}-exported", "data"),
        Input(f"{gid}-png", "n_clicks"),
        Input(f"{gid}-svg", "n_clicks"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(f"{gid}-download", "data"),
        Input(f"{gid}-csv", "n_clicks"),
        State(loc_id, "search"),
        State(base_id, "data"),
        prevent_initial_call=True,
    )
    def _csv(n, search, base):
        if not n:
            return no_update
        state = spec.decode(search, base)
        rows = csv_rows(state)
        df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        return send_csv(df, f"{filename}.csv")
