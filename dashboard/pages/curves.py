"""/curves — layerwise probe curves: a facet per task, a line per family (mean and 95% CI over
seeds), the majority baseline; normalised depth axis; per-position curves; seed traces; eval
lengths side by side (in- vs out-of-distribution); behaviour by eval length."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dash import Output, dcc, html

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import (
    Bind,
    api_alert,
    checkbox,
    field,
    figure_card,
    none_trained_note,
    trained_bind,
    trained_field,
    trained_filter,
    trained_switch,
)
from dashboard.controls import (
    choice,
    compare_input,
    control_grid,
    family_picker,
    radio,
    suite_input,
    suite_page,
    task_picker,
)
from dashboard.curves_controls import (
    behaviour_caption,
    control_curve_rows,
    curves_caption,
    position_caption,
    token_type_rows,
)
from dashboard.figures.behaviour import behaviour_rows, length_generalisation
from dashboard.figures.captions import add_caption
from dashboard.figures.common import t_interval
from dashboard.figures.curves import layerwise_curves, position_curves
from dashboard.lengths import length_options, resolve_lengths
from dashboard.page_callbacks import Export, LengthControl, register_page
from dashboard.pages import PageDef
from dashboard.state import F, PageState
from dashboard.suites import one_suite, with_suite
from dashboard.theme import all_tasks, family_label, family_names, layer_name, task_label

KEY = "curves"
PATH = "/curves"
LOC = "cv-loc"

SPEC = PageState(
    [
        F("tasks", "list_str", [], all_tasks, aliases=("task",)),
        F("families", "list_str", [], family_names, aliases=("family",)),
        F("lengths", "list_int", [40], aliases=("eval_length", "length"), lo=1),
        F("x", "str", "layer", ("layer", "depth")),
        F("view", "str", "layer", ("layer", "position", "behaviour")),
        F("ci", "bool", True),
        F("baseline", "bool", True),
        F("seeds", "bool", False),
        F("layer", "str", "last"),
        F("suite", "str", None),
        F("pretrained", "bool", False),
        trained_field(),
        F("selectivity", "bool", False),
        F("compare", "str", None),  # a second suite, overlaid dash-dotted (dashboard/figures/compare.py)
        F("controls", "bool", True),  # the random-init controls, dashed ("at initialisation"), where stored
        F("types", "bool", False),  # probe accuracy per token type (Dyck, code_depth)
    ]
)
BINDS = [
    Bind("tasks", "cv-tasks"),
    Bind("families", "cv-families"),
    Bind("lengths", "cv-lengths"),
    Bind("x", "cv-x"),
    Bind("view", "cv-view"),
    Bind("ci", "cv-ci", kind="bool"),
    Bind("baseline", "cv-baseline", kind="bool"),
    Bind("seeds", "cv-seeds", kind="bool"),
    Bind("layer", "cv-layer"),
    Bind("suite", "cv-suite"),
    Bind("pretrained", "cv-pretrained", kind="bool"),
    trained_bind("cv-trained"),
    Bind("selectivity", "cv-selectivity", kind="bool"),
    Bind("compare", "cv-compare"),
    Bind("controls", "cv-controls", kind="bool"),
    Bind("types", "cv-types", kind="bool"),
]


# -- data (shared by the figure and its CSV) ---------------------------------------------------
def _filter(rows: list[dict], state: dict) -> list[dict]:
    tasks, fams, lengths = state["tasks"], state["families"], state["lengths"]
    return [
        r
        for r in rows
        if (not tasks or r["task"] in tasks)
        and (not fams or r["family"] in fams)
        and (not lengths or int(r["eval_length"]) in lengths)
        and (state["pretrained"] or not r.get("pretrained"))
    ]


def curve_rows(api: ApiClient, state: dict) -> list[dict]:
    lengths = state["lengths"]
    rows = api.curves(
        suite=state["suite"],
        eval_length=lengths[0] if len(lengths) == 1 else None,
        trained=trained_filter(state["trained"]),
    )
    return _filter(one_suite(api, rows, state["suite"]), state)  # runs of different suites never shown together


def _runs_of(rows: list[dict]) -> set[int]:
    return {int(rid) for r in rows for rid in (r.get("run_ids") or [])}


# the export's columns each use reads (``fields=``: per_position, the heavy one, only when needed)
SEED_FIELDS = (
    "run_id",
    "task",
    "family",
    "pretrained",
    "seed",
    "eval_length",
    "layer",
    "depth",
    "n_layers",
    "accuracy",
)
POSITION_FIELDS = (*SEED_FIELDS, "per_position", "majority_baseline")
TYPE_FIELDS = (*SEED_FIELDS, "type_accuracy")


def probe_export(api: ApiClient, state: dict, fields: tuple[str, ...] = SEED_FIELDS) -> list[dict]:
    """Probe rows of every run behind the selection, each tagged with task/family/seed (one
    request to ``/api/export/probes.json``, only the columns in ``fields``)."""
    return api.export(
        "probes",
        "json",
        task=state["tasks"] or None,
        family=state["families"] or None,
        suite=state["suite"],
        eval_length=state["lengths"] or None,
        fields=",".join(fields),
        trained=trained_filter(state["trained"]),
    )


def seed_rows(api: ApiClient, rows: list[dict], state: dict, fields: tuple[str, ...] = SEED_FIELDS) -> list[dict]:
    ids = _runs_of(rows)
    return [p for p in probe_export(api, state, fields) if not ids or int(p["run_id"]) in ids]


def position_rows(api: ApiClient, rows: list[dict], state: dict) -> tuple[list[dict], str]:
    lengths = state["lengths"]
    probes = seed_rows(api, rows, state, POSITION_FIELDS)
    sel = state["layer"] or "last"
    acc: dict[tuple, list[list[float | None]]] = defaultdict(list)
    base: dict[tuple, list[float | None]] = defaultdict(list)
    for p in probes:
        n = int(p["n_layers"])
        want = n - 1 if sel == "last" else (-1 if sel == "emb" else int(sel))
        if int(p["layer"]) != want or (lengths and int(p["eval_length"]) not in lengths):
            continue
        key = (p["task"], p["family"], int(p["eval_length"]))
        if p.get("per_position"):
            acc[key].append(p["per_position"])
            base[key].append(p.get("majority_baseline"))
    out = []
    for (task, fam, L), arrs in acc.items():
        width = max(len(a) for a in arrs)
        b = [x for x in base[(task, fam, L)] if x is not None]
        for t in range(width):
            vals = [v for a in arrs if t < len(a) and (v := a[t]) is not None]
            if not vals:
                continue
            m, lo, hi = t_interval(vals)
            # per_position[t] is 0-based position t; the figure's x axis counts from 1 (t + 1)
            out.append(
                {
                    "task": task,
                    "family": fam,
                    "eval_length": L,
                    "position": t + 1,
                    "mean": m,
                    "lo": lo,
                    "hi": hi,
                    "n": len(vals),
                    "majority_baseline": sum(b) / len(b) if b else None,
                }
            )
    label = "last layer" if sel == "last" else f"layer {sel}"
    return out, label


def behaviour_runs(api: ApiClient, state: dict) -> list[dict]:
    # controls excluded: they have no behaviour of their own and are no "untrained run" of the study
    runs = one_suite(
        api,
        api.all_runs(limit=5000, suite=state["suite"], trained=trained_filter(state["trained"]), controls="exclude"),
        state["suite"],
    )
    return [
        r
        for r in runs
        if (not state["tasks"] or r["task"] in state["tasks"])
        and (not state["families"] or r["family"] in state["families"])
        and (state["pretrained"] or not r.get("pretrained"))
    ]


def behaviour_data(api: ApiClient, state: dict) -> list[dict]:
    return behaviour_rows(behaviour_runs(api, state))


def untrained_note(n_untrained: int) -> str | None:
    """The page note when the switch is off and the selection includes untrained runs."""
    if not n_untrained:
        return None
    return (
        f"This selection includes {n_untrained} untrained run(s) (held-out accuracy below the early-stop "
        'criterion); their lines are marked "untrained" in the legend. Tick "trained runs only" to leave '
        "them out."
    )


def unprobed_note(
    runs: list[dict], rows: list[dict], probed_at: dict[tuple[str, str], list[int]] | None = None
) -> str | None:
    """The cells (family × task) with runs in this selection but no probe curve: a facet without a
    family's line would otherwise read as if the family were not in the study. ``probed_at``: the
    lengths each cell was probed at (any length): a cell probed at other lengths only (a file
    task's rows' length) is named with them, not as unprobed."""
    drawn = {(r["family"], r["task"]) for r in rows}
    missing = sorted({(r["family"], r["task"]) for r in runs} - drawn, key=lambda c: (c[1], c[0]))
    if not missing:
        return None
    probed_at = probed_at or {}
    elsewhere = [c for c in missing if probed_at.get(c)]
    unprobed = [c for c in missing if not probed_at.get(c)]
    notes = []
    if unprobed:
        notes.append(
            f"No probe curve yet for {_cells(unprobed)}: their runs are stored but not probed (no line drawn)."
        )
    if elsewhere:
        at = "; ".join(
            f"{family_label(f)} on {task_label(t)} at {', '.join(f'L={L}' for L in probed_at[(f, t)])}"
            for f, t in elsewhere
        )
        notes.append(f"Probed at other eval lengths only: {at} (tick it in Eval lengths).")
    return " ".join(notes)


def _cells(cells: list[tuple[str, str]]) -> str:
    by_task: dict[str, list[str]] = {}
    for fam, task in cells:
        by_task.setdefault(task, []).append(family_label(fam))
    return "; ".join(f"{', '.join(fams)} on {task_label(t)}" for t, fams in by_task.items())


def probed_lengths(api: ApiClient, state: dict) -> dict[tuple[str, str], list[int]]:
    """(family, task) → the eval lengths its curve was probed at, any length (one request)."""
    rows = one_suite(api, api.curves(suite=state["suite"], trained=trained_filter(state["trained"])), state["suite"])
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for r in rows:
        out[(r["family"], r["task"])].add(int(r["eval_length"]))
    return {k: sorted(v) for k, v in out.items()}


def build_figure(api: ApiClient, state: dict):
    view = state["view"]
    if view == "behaviour":
        runs = behaviour_runs(api, state)
        return (
            add_caption(length_generalisation(behaviour_rows(runs)), behaviour_caption(runs, state)),
            untrained_note(sum(r.get("trained") is False for r in runs)),
        )
    stored = behaviour_runs(api, state) if view != "position" else []  # to name the cells with no probe curve
    rows = curve_rows(api, state)
    note = untrained_note(len({rid for r in rows for rid in (r.get("untrained_run_ids") or [])}))
    if view == "position":
        prow, label = position_rows(api, rows, state)
        fig = position_curves(prow, layer_label=label, show_ci=state["ci"], show_baseline=state["baseline"])
        return add_caption(fig, position_caption(rows, state, label)), note
    unprobed = unprobed_note(stored, rows)
    if unprobed:  # name the lengths a cell was probed at, where it was (one more request)
        unprobed = unprobed_note(stored, rows, probed_lengths(api, state))
    none_trained = (
        none_trained_note(behaviour_runs(api, {**state, "trained": False}), "curves")
        if not rows and state["trained"]
        else None
    )
    note = " ".join(n for n in (note, unprobed, none_trained) if n) or None
    seeds = seed_rows(api, rows, state) if state["seeds"] else None
    controls = control_curve_rows(api, state, _filter) if state["controls"] else []
    types = token_type_rows(seed_rows(api, rows, state, TYPE_FIELDS)) if state["types"] else []
    fig = layerwise_curves(
        rows,
        x=state["x"],
        seed_rows=seeds,
        show_ci=state["ci"],
        show_baseline=state["baseline"],
        show_selectivity=state["selectivity"],
        tasks=state["tasks"] or None,
        eval_lengths=state["lengths"] or None,
        control_rows=controls,
        type_rows=types,
        caption=curves_caption(rows, state, n_control_points=len(controls), types_shown=bool(types)),
    )
    other = compared_suite(api, state)
    if other:  # the explicit comparison: the second suite's lines over the first's
        from dashboard.figures.compare import overlay_suites

        st_b = {**state, "suite": other}
        rows_b = curve_rows(api, st_b)
        fig_b = layerwise_curves(
            rows_b,
            x=state["x"],
            seed_rows=seed_rows(api, rows_b, st_b) if state["seeds"] else None,
            show_ci=False,
            show_baseline=False,
            show_selectivity=state["selectivity"],
            tasks=state["tasks"] or None,
            eval_lengths=state["lengths"] or None,
        )
        fig = overlay_suites(fig, fig_b, with_suite(api, state)["suite"] or "", other)
    return fig, note


def compared_suite(api: ApiClient, state: dict) -> str | None:
    """The second suite of the comparison, when one is chosen and differs from the page's suite."""
    other = state.get("compare")
    return other if other and other != with_suite(api, state)["suite"] else None


def csv_rows(api: ApiClient, state: dict) -> list[dict]:
    view = state["view"]
    if view == "behaviour":
        return behaviour_data(api, state)
    rows = curve_rows(api, state)
    if view == "position":
        return position_rows(api, rows, state)[0]
    if view == "layer" and (other := compared_suite(api, state)):  # both suites' rows, each naming its suite
        rows = rows + curve_rows(api, {**state, "suite": other})
    if state["controls"]:  # the at-initialisation lines' points, marked control = init
        rows = rows + control_curve_rows(api, state, _filter)
    keep = dict.fromkeys(k for r in rows for k in r)  # the columns /api/curves serves, in its order (its schema)
    return [{k: (",".join(map(str, r[k])) if isinstance(r.get(k), list) else r.get(k)) for k in keep} for r in rows]


# -- layout ------------------------------------------------------------------------------------
VIEWS = (("layer", "by layer"), ("position", "by position"), ("behaviour", "behaviour by length"))
LAYERS = (("last", "last layer"), ("emb", "emb"), *((str(i), f"layer {i}") for i in range(0, 24)))


def show_checks(s: dict) -> html.Div:
    """The Show checkboxes: what the figure draws besides the seed-mean lines."""
    checks = html.Div(
        [
            checkbox("cv-ci", "95% CI band", s["ci"]),
            checkbox("cv-baseline", "majority baseline", s["baseline"]),
            checkbox("cv-seeds", "seed traces", s["seeds"]),
            checkbox("cv-selectivity", "selectivity (vs control task)", s["selectivity"]),
            checkbox("cv-controls", "at initialisation (random-init controls)", s["controls"]),
            checkbox("cv-types", "accuracy per token type", s["types"]),
            checkbox("cv-pretrained", "pretrained models", s["pretrained"]),
        ],
        className="checks",
    )
    return field("Show", checks, help="pretrained models have 12–24 layers: compare them on the normalised depth axis")


def controls(s: dict, api: ApiClient) -> html.Div:
    """The selection (tasks, families, lengths, suites), the view and axis, what to show."""
    lengths = dcc.Checklist(
        id="cv-lengths",
        options=length_options(api, s["suite"], prefix=""),
        value=s["lengths"],
        inline=True,
        className="check",
    )
    return control_grid(
        task_picker("cv-tasks", s["tasks"], multi=True, label="Tasks", placeholder="all tasks", width="260px"),
        family_picker(
            "cv-families", s["families"], multi=True, label="Families", placeholder="all families", width="300px"
        ),
        field("Eval lengths", lengths, help="tick several to compare in- and out-of-distribution side by side"),
        field("x axis", radio("cv-x", (("layer", "layer"), ("depth", "normalised depth")), s["x"])),
        field("View", radio("cv-view", VIEWS, s["view"])),
        show_checks(s),
        choice("Layer (per-position view)", "cv-layer", LAYERS, s["layer"], width="170px", field_id="cv-layer-field"),
        suite_input(api, "cv-suite", s["suite"]),
        compare_input("cv-compare", s["compare"], help="overlay a second suite's lines, dash-dotted"),
        trained_switch("cv-trained", s["trained"]),
    )


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = resolve_lengths(api, SPEC.decode(search, base))
    body = [
        html.Div(id="cv-note"),
        figure_card(
            "cv-graph",
            title="Layerwise probe accuracy",
            filename="layerscope-curves",
            description="Linear-probe test accuracy on each layer's frozen states. Lines: mean over seeds; "
            "band: 95% t-interval; grey dashed: majority-class baseline; dashed in a family's colour: "
            "the same architecture and seeds at initialisation (random-init controls, probed "
            "only). Per token type (Dyck open/close, code_depth bracket/other) on request; the "
            "profile classes use the all-token accuracy. Hover a point for n, seeds.",
        ),
    ]
    return suite_page(
        api,
        s["suite"],
        key=KEY,
        title="Layerwise curves",
        subtitle="Where does each architecture make the state linearly readable?",
        controls=controls(s, api),
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def figure_view(api: ApiClient, state: dict) -> tuple:
    """(the figure, its note or an error alert, the layer control's style: shown for the
    per-position view only) for ``state``."""
    layer_style = None if state["view"] == "position" else {"display": "none"}
    try:
        fig, note = build_figure(api, state)
    except ApiError as exc:
        from dashboard.figures.common import empty_figure

        return empty_figure("Could not load curves"), api_alert(exc), layer_style
    return fig, (html.Div(note, className="alert alert-info") if note else None), layer_style


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
        suite_cid="cv-suite",
        exports=[Export("cv-graph", "layerscope-curves", lambda st: csv_rows(api, st))],
        lengths=LengthControl(
            "cv-lengths",
            "lengths",
            lambda suite: length_options(api, suite, prefix=""),
            lambda st: resolve_lengths(api, st),
        ),
    )

    @page.on_state(Output("cv-graph", "figure"), Output("cv-note", "children"), Output("cv-layer-field", "style"))
    def _figure(state):
        return figure_view(api, state)


PAGE = PageDef(key=KEY, path=PATH, title="Layerwise curves", layout=layout, register=register)
__all__ = ["PAGE", "SPEC", "layer_name"]
