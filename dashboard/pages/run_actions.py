"""The run panel's actions on `/`: tags and notes, "rebuild weights" for a run stored without
them, and the loss curves of several selected runs overlaid."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, State, dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.figures.common import graph_config
from dashboard.figures.runs import loss_overlay

MAX_OVERLAID = 12


def annotation_section(run: dict) -> html.Div:
    """Tags (comma-separated) and notes of the run, saved with PATCH /api/runs/{id}."""
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Tags", htmlFor="rn-tags", className="field-label"),
                    dcc.Input(
                        id="rn-tags",
                        type="text",
                        value=", ".join(run.get("tags") or []),
                        debounce=False,
                        placeholder="comma-separated, e.g. baseline, lr-sweep",
                        className="input",
                    ),
                ],
                className="field",
            ),
            html.Div(
                [
                    html.Label("Notes", htmlFor="rn-notes", className="field-label"),
                    dcc.Input(
                        id="rn-notes",
                        type="text",
                        value=run.get("notes") or "",
                        debounce=False,
                        placeholder="one paragraph",
                        className="input input-wide",
                    ),
                ],
                className="field",
            ),
            html.Button("Save tags and notes", id="rn-annotate", className="btn btn-sm", n_clicks=0),
            html.Span(id="rn-annotate-msg", className="muted"),
            dcc.Store(id="rn-annotate-run", data=run.get("id")),
        ],
        className="run-annotations control-grid",
    )


def rebuild_section(run: dict) -> html.Div | None:
    """For a run stored without weights: the button that queues their rebuild (the job of
    ``layerscope runs rebuild-weights``: checked against the run's record, its results kept),
    taken before background suites' jobs."""
    if run.get("checkpoint_id"):
        return None
    return html.Div(
        [
            html.Span(
                "No model weights stored for this run (imported without them): probes, edits and patching "
                "cannot be measured again until they are rebuilt, within the steps its budget gave it, and checked "
                "against its record (steps, loss curve, held-out accuracy); its results and its suite's claims "
                "are kept. ",
                className="muted",
            ),
            html.Button("Rebuild weights", id="rn-rebuild", className="btn btn-sm btn-primary", n_clicks=0),
            html.Span(id="rn-rebuild-msg"),
            dcc.Store(id="rn-rebuild-run", data=run.get("id")),
        ],
        className="alert alert-info run-rebuild",
    )


def parse_tags(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _run_id(raw: Any) -> int | None:
    """A run id from a callback value: an integer in 1..INT_MAX, else None (a tampered request)."""
    from dashboard.state import INT_MAX, parse_int

    v = parse_int(raw)
    return v if v is not None and 1 <= v <= INT_MAX else None


def register(app, api: ApiClient) -> None:
    @app.callback(
        Output("rn-annotate-msg", "children"),
        Input("rn-annotate", "n_clicks"),
        State("rn-annotate-run", "data"),
        State("rn-tags", "value"),
        State("rn-notes", "value"),
        prevent_initial_call=True,
    )
    def _annotate(n, run_id, tags, notes):
        run_id = _run_id(run_id)
        if not n or run_id is None:
            return no_update
        if not isinstance(tags, (str, type(None))) or not isinstance(notes, (str, type(None))):
            return "not saved: tags and notes are text"
        try:
            run = api.annotate_run(run_id, tags=parse_tags(tags), notes=notes or "")
        except ApiError as exc:
            return f"not saved: {exc.message}"
        return f"saved ({len(run.get('tags') or [])} tag(s))"

    @app.callback(
        Output("rn-rebuild-msg", "children"),
        Output("rn-rebuild", "disabled"),
        Input("rn-rebuild", "n_clicks"),
        State("rn-rebuild-run", "data"),
        prevent_initial_call=True,
    )
    def _rebuild(n, run_id):
        run_id = _run_id(run_id)
        if not n or run_id is None:
            return no_update, no_update
        try:
            job = api.rebuild_weights(run_id)
        except ApiError as exc:
            return f" not queued: {exc.message}", False
        return [
            " queued as job ",
            dcc.Link(f"#{job['id']}", href=f"/jobs?job={job['id']}"),
            " (before background suites' jobs; its results are kept)",
        ], True

    @app.callback(Output("rn-losses", "children"), Input("rn-grid", "selectedRows"))
    def _losses(rows):
        ids = [
            i
            for r in (rows if isinstance(rows, list) else [])
            if isinstance(r, dict) and (i := _run_id(r.get("id"))) is not None
        ]
        if len(ids) < 2:
            return None
        try:
            runs = [api.run(i) for i in ids[:MAX_OVERLAID]]
        except ApiError as exc:
            from dashboard.components import api_alert

            return api_alert(exc)
        more = f" (the first {MAX_OVERLAID} of {len(ids)})" if len(ids) > MAX_OVERLAID else ""
        return html.Div(
            [
                html.H2(f"Loss curves of {len(runs)} selected runs{more}", className="card-title"),
                dcc.Graph(id="rn-losses-graph", figure=loss_overlay(runs), config=graph_config("runs-loss-overlay")),
            ],
            className="card",
        )


__all__: list[Any] = ["annotation_section", "rebuild_offer", "rebuild_section", "rebuild_then", "register"]


def rebuild_card() -> html.Div:
    """The jobs form's "rebuild weights" box: any run stored without weights, by id (the same job
    as the run panel's button and ``layerscope runs rebuild-weights``)."""
    return html.Div(
        [
            html.H2("Rebuild a run's weights", className="card-title"),
            html.P(
                "For a run imported without weights (the bundled study's): its own config, within the steps its "
                "budget gave it, checked against its record; its results are kept (a rebuild that disagrees "
                "stores nothing and says by how much). Probe, intervene and patch jobs need the weights.",
                className="muted",
            ),
            html.Div(
                [
                    dcc.Input(
                        id="jb-rebuild-run", type="number", min=1, step=1, placeholder="run id", className="input"
                    ),
                    html.Button("Rebuild weights", id="jb-rebuild", className="btn btn-sm", n_clicks=0),
                ],
                className="form-actions",
            ),
            html.Div(id="jb-rebuild-result", className="submit-result"),
        ],
        className="card form-card",
    )


def register_rebuild_card(app, api: ApiClient) -> None:
    @app.callback(
        Output("jb-rebuild-result", "children"),
        Input("jb-rebuild", "n_clicks"),
        State("jb-rebuild-run", "value"),
        prevent_initial_call=True,
    )
    def _rebuild_by_id(n, run_id):
        if not n:
            return no_update
        run_id = _run_id(run_id)
        if run_id is None:
            return html.Span("Give the run's id (the runs table's first column).", className="field-error")
        try:
            job = api.rebuild_weights(run_id)
        except ApiError as exc:
            return html.Span(f"Not queued: {exc.message}", className="field-error")
        return html.Span([f"Queued as job #{job['id']} (before background suites' jobs)."])

    @app.callback(
        Output("jb-rebuild-then-msg", "children"),
        Output("jb-rebuild-then", "disabled"),
        Input("jb-rebuild-then", "n_clicks"),
        State("jb-then", "data"),
        prevent_initial_call=True,
    )
    def _rebuild_then(n, then):
        if not n or not isinstance(then, dict) or not isinstance(then.get("params"), dict):
            return no_update, no_update
        run_id = _run_id(then["params"].get("run_id"))
        if run_id is None:
            return " not queued: no run id", False
        return rebuild_then(api, run_id, then)


def rebuild_offer(kind: str, params: dict) -> html.Div:
    """The jobs form's offer for a probe / intervene / patch job refused because its run has no
    weights here: rebuild them first (results kept), then this job (queued by the rebuild once
    its weights agree with the run's record)."""
    return html.Div(
        [
            f"Run {params.get('run_id')} has no weights here. ",
            html.Button(
                f"Rebuild its weights, then {kind}",
                id="jb-rebuild-then",
                className="btn btn-sm btn-primary",
                n_clicks=0,
            ),
            html.Span(id="jb-rebuild-then-msg"),
            dcc.Store(id="jb-then", data={"kind": kind, "params": params}),
        ],
        className="alert alert-info",
    )


def rebuild_then(api: ApiClient, run_id: int, then: dict) -> tuple[Any, bool]:
    """Queue the rebuild of ``run_id`` with ``then`` after it: (the line said, the button disabled)."""
    try:
        job = api.rebuild_weights(run_id, then={"kind": then.get("kind"), "params": then["params"]})
    except ApiError as exc:
        return f" not queued: {exc.message}", False
    return [
        " queued: the rebuild as job ",
        dcc.Link(f"#{job['id']}", href=f"/jobs?job={job['id']}"),
        f", then the {then.get('kind')} job, queued by it once the weights agree with the run's record",
    ], True
