"""/reversal — architecture × task matrix of profile class and late concentration (95% CI),
the reversal pairs called out, and the S3 question: does S3 group with Parity or with Dyck?"""

from __future__ import annotations

from typing import Any

from dash import Output, dcc, html
from dash.development.base_component import Component

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import (
    Bind,
    api_alert,
    field,
    figure_card,
    none_trained_note,
    trained_bind,
    trained_field,
    trained_filter,
    trained_switch,
)
from dashboard.controls import choice, compare_input, control_grid, length_dropdown, suite_input, suite_page
from dashboard.figures.captions import add_caption
from dashboard.figures.common import class_with_split, empty_figure, fmt_ci, seeds_disagree
from dashboard.figures.reversal import METRIC_TITLES, find_reversals, metric, reversal_matrix
from dashboard.figures.rows import row_key, row_label
from dashboard.figures.s3_distance import s3_caveat, s3_distance_figure, s3_distances
from dashboard.lengths import length_options, resolve_length
from dashboard.page_callbacks import Export, LengthControl, register_page
from dashboard.pages import PageDef
from dashboard.reversal_controls import control_csv_columns, matrix_caption, s3_caption
from dashboard.state import F, PageState
from dashboard.suites import one_suite, with_suite
from dashboard.theme import FAMILIES, TASK_ORDER, family_label, ordered, task_label

KEY = "reversal"
PATH = "/reversal"
LOC = "rv-loc"
METRICS = ("late_concentration", "auc", "best_layer", "first_95")

SPEC = PageState(
    [
        F("length", "int", 40, aliases=("eval_length",), lo=1),
        F("metric", "str", "late_concentration", METRICS),
        F("suite", "str", None),
        F("pretrained", "bool", False),
        trained_field(),
        F("compare", "str", None),  # a second suite: each cell's class in both (dashboard/compare.py)
    ]
)
BINDS = [
    Bind("length", "rv-length"),
    Bind("metric", "rv-metric"),
    Bind("suite", "rv-suite"),
    Bind("pretrained", "rv-pretrained", kind="bool"),
    trained_bind("rv-trained"),
    Bind("compare", "rv-compare"),
]


def profiles(api: ApiClient, state: dict) -> list[dict]:
    rows = api.profiles(eval_length=state["length"], suite=state["suite"], trained=trained_filter(state["trained"]))
    rows = one_suite(api, rows, state["suite"])  # runs of different suites are never shown together
    if not state["pretrained"]:
        rows = [r for r in rows if not r.get("pretrained")]
    return rows


def curves(api: ApiClient, state: dict) -> list[dict]:
    rows = api.curves(eval_length=state["length"], suite=state["suite"], trained=trained_filter(state["trained"]))
    rows = one_suite(api, rows, state["suite"])
    return [r for r in rows if not r.get("pretrained")]


def compared_suite(api: ApiClient, state: dict) -> str | None:
    """The second suite of the comparison, when one is chosen and differs from the page's suite."""
    other = state.get("compare")
    return other if other and other != with_suite(api, state)["suite"] else None


def compare_rows(api: ApiClient, state: dict) -> list[dict] | None:
    """Each cell's class in the page's suite (``class_a``) and the compared one (``class_b``)."""
    other = compared_suite(api, state)
    if not other:
        return None
    from dashboard.compare import classes_side_by_side

    return classes_side_by_side(profiles(api, with_suite(api, state)), profiles(api, {**state, "suite": other}))


def compare_section(api: ApiClient, state: dict) -> Any:
    rows = compare_rows(api, state)
    if rows is None:
        return None
    from dashboard.compare import side_by_side_table

    return html.Div(
        [
            html.H3("Profile class in both suites"),
            side_by_side_table(
                rows,
                [
                    ("task", "task"),
                    ("family", "architecture"),
                    ("class_a", "class"),
                    ("class_b", "class"),
                    ("n_a", "seeds"),
                    ("n_b", "seeds"),
                ],
                suite_a=with_suite(api, state)["suite"] or "",
                suite_b=state["compare"],
                table_id="rv-compare-table",
            ),
        ]
    )


def matrix_csv(api: ApiClient, state: dict) -> list[dict]:
    out = []
    other = compared_suite(api, state)
    changed = {(r["task"], r["family"], r["pretrained"]): r["changed"] for r in compare_rows(api, state) or []}
    sides = [with_suite(api, state)] + ([{**state, "suite": other}] if other else [])
    for p in [p for st in sides for p in profiles(api, st)]:
        row = {
            "suite": p.get("suite"),
            "task": p["task"],
            "family": p["family"],
            "pretrained": p.get("pretrained"),
            "eval_length": p.get("eval_length"),
            "n": p.get("n"),
            "seeds": ",".join(map(str, p.get("seeds") or [])),
            "profile_class": p.get("profile_class"),
            "seed_classes": class_with_split(p.get("profile_class"), p.get("class_counts")),
            "seeds_disagree": seeds_disagree(p.get("profile_class"), p.get("class_counts")),
            "untrained_run_ids": ",".join(map(str, p.get("untrained_run_ids") or [])),
            **control_csv_columns(p),
        }
        if other:  # the comparison: whether this cell's class differs in the other suite
            row["class_changed"] = changed.get((p["task"], p["family"], p.get("pretrained")))
        for name, m in (p.get("metrics") or {}).items():
            if isinstance(m, dict):
                row[f"{name}_mean"], row[f"{name}_lo"], row[f"{name}_hi"] = m.get("mean"), m.get("lo"), m.get("hi")
        out.append(row)
    return out


def _cell_text(p: dict | None, metric_name: str) -> str:
    """``Transformer · Parity: gradual (seeds: 3 gradual), late concentration 0.41 [0.10, 0.72], n=3``
    (+ untrained): the class of the seed-mean curve with the per-seed split."""
    if p is None:
        return "no profile"
    m = metric(p, metric_name)
    ci = f", {metric_name.replace('_', ' ')} {fmt_ci(m['mean'], m['lo'], m['hi'])}" if m["mean"] is not None else ""
    n_un = len(p.get("untrained_run_ids") or [])
    un = f", untrained: {n_un} of {p.get('n')}" if n_un else ""
    cls = class_with_split(p.get("profile_class"), p.get("class_counts"))
    ctrl = (p.get("against_control") or {}).get("profile_class")
    vs = f", vs init: {ctrl}" if ctrl else ""
    return f"{row_label(row_key(p))} · {task_label(p['task'])}: {cls}{vs}{ci}, n={p.get('n')}{un}"


def group_reversals(revs: list[dict]) -> dict[tuple, list[str]]:
    """Reversal pairs grouped by (task A, task B, architecture A, A's classes, B's classes, kind,
    shared class) → the architectures B that share them."""
    groups: dict[tuple, list[str]] = {}
    for r in revs:
        key = (
            r["task_a"],
            r["task_b"],
            r["family_a"],
            r["a1"],
            r["a2"],
            r["b1"],
            r["b2"],
            r["kind"],
            tuple(r.get("shared_class") or ()),
        )
        groups.setdefault(key, []).append(r["family_b"])
    return groups


def _group_item(key: tuple, fbs: list[str], by: dict, metric_name: str) -> tuple[html.Li, bool]:
    """(the list line of one group, whether it rests on cells with untrained runs): a swap between
    cells of models that never learned the task is no finding — said, and not styled as one."""
    ta, tb, fa, a1, a2, b1, b2, kind, shared = key
    full = kind == "full"
    cells = [by.get((f, t)) for f in (fa, *fbs) for t in (ta, tb)]
    untrained = [c for c in cells if c and c.get("untrained_run_ids")]
    swap = "full swap" if full else f"partial: {', '.join(shared)} changes hands"
    badge = "badge badge-untrained" if untrained else "badge badge-swap" if full else "badge badge-flip"
    item = html.Li(
        [
            html.Strong(f"{task_label(ta)} ↔ {task_label(tb)}: "),
            f"{row_label(fa)} ({a1} → {a2}) vs {', '.join(row_label(f) for f in fbs)} ({b1} → {b2})",
            html.Span(f"{swap} — untrained, not a finding" if untrained else swap, className=badge),
            html.Span(
                f"rests on untrained runs in {len(untrained)} of {len(cells)} cells",
                className="badge badge-untrained",
            )
            if untrained
            else None,
            html.Ul(
                [html.Li(_cell_text(c, metric_name), className="muted") for c in cells if c is not None] or None,
                className="reversal-cells",
            )
            if by
            else None,
        ],
        className="reversal-untrained" if untrained else None,
    )
    return item, bool(untrained)


def _list_head(n: int, n_untrained_groups: int, n_groups: int, *, trained_only: bool) -> str:
    head = f"{n} reversal pair{'s' if n != 1 else ''} (two architectures, two tasks)"
    if trained_only:
        return head + ", trained runs only:"
    if n_untrained_groups:
        return head + (
            f"; {n_untrained_groups} of {n_groups} rest on cells with untrained runs (the 'trained runs only' "
            "switch is off):"
        )
    return head + ", all cells trained:"


def reversal_list(
    revs: list[dict],
    profiles: list[dict] | None = None,
    *,
    trained_only: bool = True,
    metric_name: str = "late_concentration",
) -> Any:
    """Reversal pairs, grouped: one line per (task pair, architecture A, its classes, B's classes),
    each with its four cells' n (seeds) and metric interval; with the "trained runs only" switch
    off, the pairs resting on cells with untrained runs say so."""
    if not revs:
        return html.P(
            "No reversal at this eval length: no two architectures exchange a profile class between two tasks.",
            className="muted",
        )
    by = {(row_key(p), p["task"]): p for p in profiles or []}
    groups = group_reversals(revs)
    lines = [_group_item(key, fbs, by, metric_name) for key, fbs in groups.items()]
    n_untrained = sum(untrained for _, untrained in lines)
    head = _list_head(len(revs), n_untrained, len(groups), trained_only=trained_only)
    return html.Div([html.Div(head, className="muted"), html.Ul([li for li, _ in lines], className="reversal-list")])


def claim_3_verdict(api: ApiClient, state: dict) -> dict | None:
    """Claim 3 as /claims evaluates it (trained runs), or None when the API cannot say."""
    try:
        return next((c for c in api.claims(suite=with_suite(api, state).get("suite")) if c.get("id") == 3), None)
    except (ApiError, AttributeError):
        return None


def s3_answer(dist: list[dict], claim3: dict | None = None, *, trained_only: bool = True) -> Any:
    """The S3 question in words: which task S3's layer profile is closer to, per family with its
    n (seeds), the families resting on untrained runs named; when /claims calls claim 3 "not
    enough data", the answer says so first and states no grouping as a finding."""
    if not dist:
        return html.P("Needs curves on S3, Parity and Dyck for at least one family.", className="muted")
    k = sum(d["closer"] == "parity" for d in dist)
    n = len(dist)
    grouping = "S3 groups with Parity" if k > n / 2 else "S3 groups with Dyck" if k < n / 2 else "No majority"
    untrained = [d for d in dist if d.get("untrained_run_ids")]
    per_family = ", ".join(
        f"{family_label(d['family'])} {d['to_parity']:.2f} vs {d['to_dyck']:.2f}"
        + (f" (n={d['n']})" if d.get("n") is not None else "")
        + (" (untrained runs)" if d.get("untrained_run_ids") else "")
        for d in dist
    )
    verdict = (claim3 or {}).get("verdict")
    caveats: list[Component | str] = []
    if verdict == "not enough data":
        caveats.append(html.Strong("Not enough data (claim 3 on /claims): "))
        caveats.append("descriptively only, ")
        lead = grouping
    elif verdict:
        caveats.append(html.Strong(f"{grouping} (claim 3 on /claims: {verdict}): "))
        lead = ""
    else:
        caveats.append(html.Strong(f"{grouping}: "))
        lead = ""
    body = (
        f"{lead}{': ' if lead else ''}S3's layer profile is closer to Parity's than to Dyck's for {k} of {n} "
        f"families{', trained runs only' if trained_only else ''} ({per_family}; distances of seed-mean curves, "
        "no interval)."
    )
    if untrained:
        body += (
            f" {len(untrained)} of {n} families rest on untrained runs "
            f"({', '.join(family_label(d['family']) for d in untrained)}): the 'trained runs only' switch is off."
        )
    body += (
        " Claim 3 expects Parity: the computational structure (prefix update vs stack), not commutativity, "
        "predicts the profile."
    )
    return html.P([*caveats, body], className="answer")


def build(api: ApiClient, state: dict) -> tuple:
    """(matrix figure, reversal list, S3 figure, S3 answer, error alert) for the page state. The
    S3 figure carries claim 3's verdict line itself, so an embed (``?embed=1``) keeps the caveat."""
    try:
        profs = profiles(api, state)
        crv = curves(api, state)
    except ApiError as exc:
        e = empty_figure("Could not load profiles")
        return e, None, e, None, api_alert(exc)
    revs = find_reversals(profs)
    dist = s3_distances(crv, eval_length=state["length"])
    on = bool(state["trained"])
    listing = reversal_list(revs, profs, trained_only=on, metric_name=state["metric"])
    if not profs and on:  # nothing trained: say the runs are there, untrained
        note = none_trained_note(
            api.all_runs(limit=5000, suite=with_suite(api, state)["suite"], controls="exclude"), "profiles"
        )
        listing = html.P(note, className="muted") if note else listing
    claim3 = claim_3_verdict(api, state)
    answer = s3_answer(dist, claim3, trained_only=on)
    return (
        reversal_matrix(profs, metric_name=state["metric"], reversals=revs, caption=matrix_caption(profs, state)),
        listing,
        add_caption(s3_distance_figure(dist, caveat=s3_caveat(claim3)), s3_caption(crv, state)),
        answer,
        None,
    )


def controls(s: dict, api: ApiClient) -> html.Div:
    """Eval length, the matrix's colour, the suite (and one to compare), pretrained models, trained runs."""
    pretrained = dcc.Checklist(
        id="rv-pretrained",
        options=[{"label": "pretrained models", "value": "on"}],
        value=["on"] if s["pretrained"] else [],
        className="check",
    )
    return control_grid(
        length_dropdown("rv-length", s["length"], options=length_options(api, s["suite"]), width="150px"),
        choice("Colour", "rv-metric", [(m, METRIC_TITLES[m]) for m in METRICS], s["metric"], width="420px"),
        suite_input(api, "rv-suite", s["suite"]),
        field("Include", pretrained),
        compare_input("rv-compare", s["compare"], help="each cell's class in both suites, changes marked"),
        trained_switch("rv-trained", s["trained"]),
    )


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = resolve_length(api, SPEC.decode(search, base))
    body = [
        html.Div(id="rv-error"),
        figure_card(
            "rv-matrix",
            title="Profile class by architecture and task",
            filename="layerscope-reversal",
            description="Each cell: the profile class of the seed-mean probe curve, with how many seeds "
            "have each class (⚠: most seeds have another class), measured on the gain above the "
            "majority "
            "baseline (early: 95% of the largest gain reached in the first half of the layers; "
            "late: the last block makes ≥ 50% of the gain the blocks make over the embedding "
            "probe; flat: never 5 pp above the majority; else gradual), and the selected metric "
            "with its 95% CI. Outlined cells take part in a reversal; hatched cells include "
            "untrained runs.",
            footer=[
                html.Div(id="rv-compare", className="card-section"),
                html.Div(id="rv-reversals", className="card-section"),
            ],
        ),
        figure_card(
            "rv-s3",
            title="The S3 question: Parity-like or Dyck-like?",
            filename="layerscope-s3-distance",
            description="Distance between S3's normalised layer curve and Parity's / Dyck's "
            "(RMS on the normalised depth axis, curves min–max scaled; 0 = the same shape).",
            extra=[html.Div(id="rv-s3-answer", className="card-section card-caveat")],
        ),
    ]
    return suite_page(
        api,
        s["suite"],
        key=KEY,
        title="Reversal",
        subtitle="Does task structure reverse where each architecture encodes the state?",
        controls=controls(s, api),
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def compare_view(api: ApiClient, state: dict) -> Any:
    """The comparison with a second suite, or an alert when the API cannot answer."""
    try:
        return compare_section(api, state)
    except ApiError as exc:
        return api_alert(exc)


def register(app, api: ApiClient, path_for) -> None:
    page = register_page(
        app,
        api,
        path_for,
        key=KEY,
        path=PATH,
        spec=SPEC,
        binds=BINDS,
        loc_id=LOC,
        suite_cid="rv-suite",
        lengths=LengthControl(
            "rv-length",
            "length",
            lambda suite: length_options(api, suite),
            lambda st: resolve_length(api, st),
        ),
        exports=[
            Export("rv-matrix", "layerscope-reversal", lambda st: matrix_csv(api, st)),
            Export(
                "rv-s3", "layerscope-s3-distance", lambda st: s3_distances(curves(api, st), eval_length=st["length"])
            ),
        ],
    )

    @page.on_state(
        Output("rv-matrix", "figure"),
        Output("rv-reversals", "children"),
        Output("rv-s3", "figure"),
        Output("rv-s3-answer", "children"),
        Output("rv-error", "children"),
    )
    def _figures(state):
        return build(api, state)

    @page.on_state(Output("rv-compare", "children"))
    def _compare(state):
        return compare_view(api, state)


PAGE = PageDef(key=KEY, path=PATH, title="Reversal", layout=layout, register=register)
__all__ = ["PAGE", "FAMILIES", "TASK_ORDER", "ordered", "metric", "fmt_ci"]
