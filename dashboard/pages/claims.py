"""/claims — the study's claims, each as a table (verdict badge, the stored numbers with their CIs
and p-values, the cells it read, what it left out: dashboard/claims_table.py) with its prose and
full tables one click away ("why / full text") and links to the views that show it."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from dash import ALL, MATCH, Input, Output, State, ctx, dcc, html, no_update
from dash.development.base_component import Component

from dashboard.api_client import ApiClient, ApiError
from dashboard.claims_controls import SECTION_KEYS, controls_section, header_badges, majority_cells
from dashboard.claims_table import claim_table
from dashboard.components import Bind, api_alert
from dashboard.controls import control_grid, suite_dropdown, suite_page
from dashboard.figures.common import class_with_split
from dashboard.page_callbacks import add_first_draw, register_page
from dashboard.pages import PageDef
from dashboard.state import F, PageState
from dashboard.suites import default_suite, suite_placeholder
from dashboard.theme import VERDICT_CLASS, family_label, task_label

KEY = "claims"
PATH = "/claims"
LOC = "cl-loc"
SPEC = PageState(
    [
        F("suite", "str", None),  # one suite's runs; none chosen: suites.default_suite
        F("compare", "str", None),
    ]
)  # a second suite: each verdict in both (dashboard/compare.py)
BINDS = [Bind("suite", "cl-suite"), Bind("compare", "cl-compare")]
MAX_TABLE_ROWS = 12
WHY, FULL = "claim-why", "claim-full-body"  # the "why / full text" summary and the body it fills
PAGE_NAMES = {
    "/": "Runs",
    "/curves": "Curves",
    "/reversal": "Reversal",
    "/probe-vs-causal": "Probe vs causal",
    "/patching": "Patching",
    "/claims": "Claims",
    "/jobs": "Jobs",
}


def _num(v: float, key: str = "") -> str:
    if not math.isfinite(v):
        return "–"
    k = key.lower()
    if k in ("p", "p_value", "p_holm", "pvalue") or k.startswith("p_") or k.endswith("_p"):
        return f"{v:.3g}" if v >= 0.001 else "< 0.001"
    if abs(v) >= 100 or (v == int(v) and abs(v) < 1e6):
        return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"
    return f"{v:.3g}" if abs(v) < 0.01 else f"{v:.3f}".rstrip("0").rstrip(".")


def fmt_value(v: Any, key: str = "") -> str:
    """A stored number as text: CIs as ``mean [lo, hi] (n)``, p-values, booleans as ✓/✗."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "✓ yes" if v else "✗ no"
    if isinstance(v, (int, float)):
        return _num(float(v), key)
    if isinstance(v, str):
        return task_label(v) if key == "task" else family_label(v) if key == "family" else v
    if isinstance(v, dict) and "mean" in v:
        s = fmt_value(v.get("mean"))
        if v.get("lo") is not None and v.get("hi") is not None:
            s += f" [{fmt_value(v['lo'])}, {fmt_value(v['hi'])}]"
        if v.get("n") is not None:
            s += f" (n={v['n']})"
        return s
    if isinstance(v, dict) and ("p" in v or "p_value" in v):
        p = v.get("p", v.get("p_value"))
        extra = ", ".join(
            f"{k}={fmt_value(x, k)}"
            for k, x in v.items()
            if k not in ("p", "p_value") and not isinstance(x, (list, dict))
        )
        return f"p = {fmt_value(p, 'p')}" + (f" ({extra})" if extra else "")
    if isinstance(v, list):
        if all(not isinstance(x, (dict, list)) for x in v):
            return ", ".join(fmt_value(x) for x in v)
        return f"{len(v)} rows"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {fmt_value(x, k)}" for k, x in v.items())
    return str(v)


def _label(key: str) -> str:
    return key.replace("_", " ")


def _flatten(r: dict) -> dict:
    """One level of nesting → columns: {"by_length": {"40": {mean…}}} → {"by_length 40": {mean…}}."""
    out = {}
    for k, v in r.items():
        if (
            isinstance(v, dict)
            and v
            and "mean" not in v
            and "p" not in v
            and all(not isinstance(x, (list,)) and (not isinstance(x, dict) or "mean" in x) for x in v.values())
        ):
            for k2, x in v.items():
                out[f"{k} {k2}"] = x
        else:
            out[k] = v
    return out


def _votes_key(key: str) -> str | None:
    """The per-seed class counts stored beside a class column: ``profile_class`` → ``class_votes``,
    ``class_s3`` → ``class_votes_s3``."""
    if key == "profile_class":
        return "class_votes"
    if key.startswith("class_") and not key.startswith("class_votes"):
        return "class_votes_" + key[len("class_") :]
    return None


def with_class_split(row: dict) -> dict:
    """A claims row with each cell class shown with its per-seed split (``early (seeds: 1 early,
    2 gradual) — most seeds differ``) and the counts column dropped; the class itself stays the
    class of the seed-mean curve (docs/SCIENCE.md#claims)."""
    out = dict(row)
    for key in list(row):
        vk = _votes_key(key)
        if vk and vk in row:
            out[key] = class_with_split(row[key], row[vk])
            out.pop(vk, None)
    return out


def _table(rows: list[dict], csv_id: dict | None = None) -> html.Div:
    rows = [_flatten(with_class_split(r)) for r in rows]
    cols: list[str] = []
    for r in rows:
        for k, v in r.items():
            if (
                k not in cols
                and not isinstance(v, (list,))
                and not (isinstance(v, dict) and "mean" not in v and "p" not in v)
            ):
                cols.append(k)
    cols = cols[:12]

    def tr(r):
        return html.Tr([html.Td(fmt_value(r.get(c), c)) for c in cols])

    head = html.Thead(html.Tr([html.Th(_label(c)) for c in cols]))
    body = [tr(r) for r in rows[:MAX_TABLE_ROWS]]
    table = html.Table([head, html.Tbody(body)], className="table table-compact")
    if len(rows) > MAX_TABLE_ROWS and csv_id is not None:
        # Big tables stay small in the page (the Dash renderer slows down with thousands of
        # cells): the first rows here, every row in a CSV.
        more = html.Div(
            [
                html.Span(f"first {MAX_TABLE_ROWS} of {len(rows)} rows · ", className="muted"),
                html.Button(f"all {len(rows)} rows as CSV", id=csv_id, className="btn btn-sm", n_clicks=0),
            ],
            className="table-more",
        )
        return html.Div([table, more], className="table-wrap")
    return html.Div(table, className="table-wrap")


def render_numbers(numbers: dict[str, Any], claim_id: Any = None) -> list[Any]:
    """Scalars, CIs and tests as a definition list; lists of rows and nested dicts as tables."""
    facts: list[Component] = []
    blocks: list[Component] = []
    for key, v in (numbers or {}).items():
        if isinstance(v, list | dict) and not v:  # an empty table or list: say so, not a blank row
            facts.extend([html.Dt(_label(key)), html.Dd("none", className="muted")])
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            csv_id = {"type": "claim-csv", "claim": str(claim_id), "key": key}
            blocks.append(
                html.Details(
                    [html.Summary(f"{_label(key)} ({len(v)} rows)"), _table(v, csv_id)],
                    open=len(v) <= 6,
                    className="claim-block",
                )
            )
        elif isinstance(v, dict) and v and all(isinstance(x, dict) and "mean" not in x for x in v.values()):
            rows = [{"": k, **x} for k, x in v.items()]
            blocks.append(html.Div([html.H4(_label(key)), _table(rows)], className="claim-block"))
        elif (
            isinstance(v, dict)
            and v
            and "mean" not in v
            and "p" not in v
            and all(not isinstance(x, (dict, list)) for x in v.values())
        ):
            blocks.append(
                html.Div(
                    [
                        html.H4(_label(key)),
                        html.Dl(
                            [y for k, x in v.items() for y in (html.Dt(_label(k)), html.Dd(fmt_value(x, k)))],
                            className="facts",
                        ),
                    ],
                    className="claim-block",
                )
            )
        else:
            facts.extend([html.Dt(_label(key)), html.Dd(fmt_value(v, key))])
    out: list[Component] = []
    if facts:
        out.append(html.Dl(facts, className="facts claim-facts"))
    out.extend(blocks)
    return out


def view_link(url: str, path_for) -> Any:
    parts = urlsplit(url)
    name = PAGE_NAMES.get(parts.path or "/", parts.path)
    q = ", ".join(f"{k}={v}" for k, v in parse_qsl(parts.query))
    return dcc.Link(
        [html.Span(name, className="link-page"), html.Span(f" {q}" if q else "", className="muted")],
        href=path_for(parts.path + (f"?{parts.query}" if parts.query else "")),
        className="view-chip",
    )


def claim_full_text(c: dict) -> list[Any]:
    """What "why / full text" opens to: the claim's prose, its controls section and every number and
    table it carries (the big tables as their first rows plus a CSV)."""
    numbers = c.get("numbers") or {}
    # the controls section shows these keys; the generic list shows the rest (+ the majority-floor cells)
    rest = {k: v for k, v in numbers.items() if k not in SECTION_KEYS}
    if majority_cells(c):
        rest["cells against the majority rate"] = majority_cells(c)
    return [
        html.P(c.get("detail", ""), className="claim-detail"),
        controls_section(c),
        html.Div(render_numbers(rest, c.get("id")), className="claim-numbers"),
    ]


def claim_card(c: dict, path_for) -> html.Div:
    """The claim's header, its table (dashboard/claims_table.py) and a closed "why / full text" whose
    body the page fills on the first click (:func:`claim_full_text`): the full text of six claims is
    ~1,700 components, which the browser took seconds to draw on first load."""
    verdict = c.get("verdict", "not enough data")
    cid = str(c.get("id"))
    return html.Div(
        [
            html.Div(
                [
                    html.Span(f"Claim {c.get('id')}", className="claim-id"),
                    html.H2(c.get("title", ""), className="card-title"),
                    html.Span(
                        verdict,
                        className=f"badge {VERDICT_CLASS.get(verdict, 'badge-nodata')}",
                        **{"data-verdict": verdict},
                    ),
                    *header_badges(c),
                ],
                className="card-header claim-header",
            ),
            claim_table(c, fmt_value),
            html.Details(
                [
                    html.Summary("why / full text", className="claim-why", id={"type": WHY, "claim": cid}),
                    html.Div(id={"type": FULL, "claim": cid}, className="claim-full-body"),
                ],
                className="claim-full",
            ),
            html.Div(
                [html.Span("See:", className="muted"), *[view_link(u, path_for) for u in c.get("views") or []]],
                className="claim-views",
            ),
        ],
        className="card claim-card",
        id=f"claim-{c.get('id')}",
    )


def full_text_for(claims_list: list[dict], claim_id: Any) -> list[Any]:
    """:func:`claim_full_text` of the claim with id ``claim_id``; a line saying so when it is gone."""
    for c in claims_list:
        if str(c.get("id")) == str(claim_id):
            return claim_full_text(c)
    return [html.P(f"claim {claim_id} is no longer among this suite's claims", className="muted")]


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = SPEC.decode(search, base)
    controls = control_grid(
        suite_dropdown(api, "cl-suite", s["suite"], placeholder=suite_placeholder(api)),
        suite_dropdown(
            api,
            "cl-compare",
            s["compare"],
            label="Compare with",
            placeholder="another suite",
            help="each verdict in both suites, changes marked",
        ),
    )
    body = [
        html.Div(id="cl-compare-body"),
        dcc.Download(id="cl-compare-download"),
        dcc.Loading(html.Div(id="cl-body"), type="dot"),
        dcc.Store(id="cl-trigger", data=1),
        dcc.Download(id="cl-download"),
    ]
    return suite_page(
        api,
        s["suite"],
        key=KEY,
        title="Claims",
        subtitle="Does this lab's data support the study? Each verdict is computed from "
        "the stored results of trained runs only, with at least three trained seeds in every cell it "
        "reads; the numbers carry their 95% CIs, n and p-values, and each claim lists the runs it "
        "left out.",
        controls=controls,
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def claims_body(api: ApiClient, suite: str | None, path_for) -> Any:
    """The verdicts' tally and a card per claim, for ``suite`` (the default suite when none)."""
    try:
        claims = api.claims(suite=suite or default_suite(api))  # one suite: never pooled
    except ApiError as exc:
        return api_alert(exc)
    counts = {k: sum(c.get("verdict") == k for c in claims) for k in VERDICT_CLASS}
    summary = html.Div(
        [html.Span([html.Strong(str(n)), f" {k}"], className=f"badge {VERDICT_CLASS[k]}") for k, n in counts.items()],
        className="claims-summary",
    )
    return [summary, *[claim_card(c, path_for) for c in claims]]


def compare_card(api: ApiClient, suite: str | None, other: str | None) -> Any:
    """Each verdict in both suites, with its CSV button; None when no comparison is chosen."""
    from dashboard.compare import side_by_side_table

    try:
        rows = compare_rows(api, suite, other)
    except ApiError as exc:
        return api_alert(exc)
    if rows is None or other is None:  # no comparison chosen
        return None
    table = side_by_side_table(
        rows,
        [("id", "claim"), ("title", "title"), ("verdict_a", "verdict"), ("verdict_b", "verdict")],
        suite_a=suite or default_suite(api) or "",
        suite_b=other,
        table_id="cl-compare-table",
    )
    return html.Div(
        [
            html.H2("Verdicts in both suites", className="card-title"),
            table,
            html.Button("comparison as CSV", id="cl-compare-csv", className="btn btn-sm", n_clicks=0),
        ],
        className="card compare-card",
    )


def compare_csv(api: ApiClient, suite: Any, other: Any) -> Any:
    """The comparison as ``claims-<a>-vs-<b>.csv``; ``no_update`` when there is nothing to send."""
    import pandas as pd

    from dashboard.components import send_csv

    if not isinstance(suite, (str, type(None))) or not isinstance(other, str):
        return no_update  # a tampered request: no suite names to compare
    try:
        rows = compare_rows(api, suite, other)
    except ApiError:
        return no_update  # a suite gone since the page was drawn: nothing to download
    if not rows:
        return no_update
    a = suite or default_suite(api)
    df = pd.DataFrame(rows).rename(columns={"verdict_a": f"verdict {a}", "verdict_b": f"verdict {other}"})
    return send_csv(df, f"claims-{a}-vs-{other}.csv")


def register(app, api: ApiClient, path_for) -> None:
    register_page(app, api, path_for, key=KEY, path=PATH, spec=SPEC, binds=BINDS, loc_id=LOC, suite_cid="cl-suite")
    register_claims(app, api, path_for)
    register_compare(app, api)


def register_claims(app, api: ApiClient, path_for) -> None:
    """The claims of the chosen suite, and the CSV of any claim's table ("all rows as CSV")."""

    @app.callback(Output("cl-body", "children"), Input("cl-trigger", "data"), Input("cl-suite", "value"))
    def _claims(_, suite):
        return claims_body(api, suite, path_for)

    add_first_draw(app, lambda: claims_body(api, None, path_for))  # the default suite's claims

    @app.callback(
        Output({"type": FULL, "claim": MATCH}, "children"),
        Input({"type": WHY, "claim": MATCH}, "n_clicks"),
        State({"type": FULL, "claim": MATCH}, "children"),
        State("cl-suite", "value"),
        prevent_initial_call=True,
    )
    def _full(n, shown, suite):
        if not n or shown or not isinstance(suite, (str, type(None))):  # drawn once; a tampered suite: nothing
            return no_update
        try:
            return full_text_for(api.claims(suite=suite or default_suite(api)), ctx.triggered_id["claim"])
        except ApiError as exc:
            return api_alert(exc)

    @app.callback(
        Output("cl-download", "data"),
        Input({"type": "claim-csv", "claim": ALL, "key": ALL}, "n_clicks"),
        State("cl-suite", "value"),
        prevent_initial_call=True,
    )
    def _csv(_clicks, suite):
        import pandas as pd

        from dashboard.components import send_csv

        trig = ctx.triggered_id
        if not isinstance(trig, dict) or not (ctx.triggered and ctx.triggered[0].get("value")):
            return no_update
        rows = claim_rows_csv(api.claims(suite=suite or default_suite(api)), trig["claim"], trig["key"])
        return send_csv(pd.DataFrame(rows), f"claim-{trig['claim']}-{trig['key']}.csv")


def register_compare(app, api: ApiClient) -> None:
    """The verdicts in both suites when a second one is chosen, and their CSV."""

    @app.callback(Output("cl-compare-body", "children"), Input("cl-suite", "value"), Input("cl-compare", "value"))
    def _compare(suite, other):
        return compare_card(api, suite, other)

    @app.callback(
        Output("cl-compare-download", "data"),
        Input("cl-compare-csv", "n_clicks"),
        State("cl-suite", "value"),
        State("cl-compare", "value"),
        prevent_initial_call=True,
    )
    def _compare_csv(n, suite, other):
        return compare_csv(api, suite, other) if n else no_update


def compare_rows(api: ApiClient, suite: str | None, other: str | None) -> list[dict] | None:
    """Each claim's verdict in the page's suite and in ``other`` (None: no comparison chosen)."""
    from dashboard.compare import claims_side_by_side

    a = suite or default_suite(api)
    if not other or other == a:
        return None
    return claims_side_by_side(api.claims(suite=a), api.claims(suite=other))


def claim_rows_csv(claims_list: list[dict], claim_id: str, key: str) -> list[dict]:
    """The rows of one claim's table, flattened, CIs as text (the CSV behind "all rows")."""
    for c in claims_list:
        if str(c.get("id")) == str(claim_id):
            rows = (c.get("numbers") or {}).get(key) or (
                majority_cells(c) if key == "cells against the majority rate" else []
            )
            return [
                {
                    k: (fmt_value(v, k) if isinstance(v, (dict, list)) else v)
                    for k, v in _flatten(with_class_split(r)).items()
                }
                for r in rows
                if isinstance(r, dict)
            ]
    return []


PAGE = PageDef(key=KEY, path=PATH, title="Claims", layout=layout, register=register)
