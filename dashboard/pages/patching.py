"""/patching — activation patching: layer × position recovery heatmaps per site (runs side by
side, the corrupted token marked, the best cell starred, untrained runs flagged) and recovery by
position for one layer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

from dash import Input, Output, dcc, html

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
from dashboard.components import (
    untrained_banner as run_untrained_banner,
)
from dashboard.controls import (
    choice,
    control_grid,
    family_picker,
    length_dropdown,
    suite_input,
    suite_page,
    task_picker,
)
from dashboard.figures.captions import add_caption
from dashboard.figures.common import empty_figure
from dashboard.figures.patching import SITE_LABELS, patching_by_position, patching_heatmaps, patching_table
from dashboard.lengths import length_options, resolve_length
from dashboard.page_callbacks import Export, LengthControl, register_page
from dashboard.pages import PageDef
from dashboard.patching_captions import patching_caption
from dashboard.state import F, PageState
from dashboard.suites import with_suite
from dashboard.theme import TASK_ORDER, all_tasks, family_label, family_names, layer_name, ordered, task_label
from layerscope_core.sites import parse_site, site_name

KEY = "patching"
PATH = "/patching"
LOC = "pt-loc"
MAX_SIDE_BY_SIDE = 4


class SiteNamedState(PageState):
    """The page's state, with ``at=<site name>`` in TransformerLens's style (``blocks.2.state``,
    ``embed``; layerscope_core.sites) read into ``site`` + ``layer`` and written beside them."""

    def from_dict(self, data: dict[str, Any] | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
        data = dict(data or {})
        at = data.pop("at", None)
        if at:
            site: str | None
            layer: int | None
            try:
                site, layer = parse_site(str(at))
            except ValueError:
                site = layer = None  # a bad name is dropped, as any bad value
            if site in SITE_LABELS:
                data["site"], data["layer"] = site, layer
        return super().from_dict(data, base)

    def encode(self, state: dict[str, Any], *, keep: dict[str, str] | None = None) -> str:
        q = super().encode(state, keep=keep)
        site, layer = state.get("site"), state.get("layer")
        try:
            name = site_name(site, layer) if site is not None and layer is not None else None
        except (TypeError, ValueError, AttributeError):  # no layer or site chosen, or a site without that layer
            name = None
        return q if not name else q + ("&" if q else "?") + urlencode({"at": name})


SPEC = SiteNamedState(
    [
        F("task", "str", None, all_tasks),
        F("family", "str", None, family_names),
        F("runs", "list_int", [], aliases=("run", "run_id"), lo=1),
        F("length", "int", 40, aliases=("eval_length",), lo=1),
        F("site", "str", "state", tuple(SITE_LABELS)),
        F("layer", "int", None, lo=-2),
        trained_field(),
        F("suite", "str", None),  # one suite's runs; none chosen: suites.default_suite
    ]
)
BINDS = [
    Bind("task", "pt-task"),
    Bind("family", "pt-family"),
    Bind("runs", "pt-runs"),
    Bind("length", "pt-length"),
    Bind("site", "pt-site"),
    Bind("layer", "pt-layer"),
    trained_bind("pt-trained"),
    Bind("suite", "pt-suite"),
]


def _label(r: dict) -> str:
    mark = " · untrained" if r.get("trained") is False else ""
    return (
        f"#{r['id']} · {r.get('name', '')} · {family_label(r['family'])} · {task_label(r['task'])} · "
        f"seed {r['seed']}{mark}"
    )


def candidate_runs(api: ApiClient, state: dict) -> list[dict]:
    """Runs offered by the filters; with the "trained runs only" switch on (the default), trained
    runs only. Runs picked explicitly are shown whatever the switch says, and flagged."""
    return api.runs(
        task=state["task"],
        family=state["family"],
        limit=500,
        suite=with_suite(api, state)["suite"],
        trained=trained_filter(state.get("trained", True)),
    )["items"]


def has_site(family: str, site: str | None) -> bool:
    """Whether ``family`` has patching ``site``: a ``state`` site needs a recurrent state (the
    registry's ``state_parts``; the Transformer has none); the residual-stream sites every family has."""
    if not site or not str(site).startswith("state"):
        return True
    from layerscope_core.registry import get_family

    try:
        parts = get_family(family).state_parts
    except (KeyError, ValueError):
        return True  # a family this dashboard does not know: let its (maybe empty) grid say so
    return bool(parts) and (site == "state" or site.split(":", 1)[1] in parts)


def no_state_info(runs: list[dict], site: str) -> html.Span | None:
    """Why a ``state`` site shows nothing when no run was picked: the runs the filters offer
    belong to families without that state (the Transformer has none); None without runs."""
    if not runs:
        return None
    families = ", ".join(family_label(f) for f in ordered({r["family"] for r in runs}, family_names()))
    return html.Span(
        f"None of the {len(runs)} run(s) matching the filters ({families}) has the site {SITE_LABELS.get(site, site)}: "
        "no recurrent state there. Pick the site resid_post or resid_pre (every family has them).",
        className="muted",
    )


def missing_reason(api: ApiClient, grid: dict, state: dict) -> str:
    """Why a run's grid is empty at the page's length and site: its family has no recurrent
    state, or it was patched at other lengths (a file task's rows' length) or sites only, or it
    was never patched."""
    site = state["site"]
    if not has_site(grid["family"], site):
        return f"{family_label(grid['family'])} has no recurrent state"
    rows = api.run_patching(grid["run_id"], site=site)
    if rows:
        lengths = sorted({int(r["eval_length"]) for r in rows})
        return "patched at " + ", ".join(f"L={L}" for L in lengths) + " only"
    sites = sorted({str(r["site"]) for r in api.run_patching(grid["run_id"])})
    return f"patched at the site(s) {', '.join(sites)} only" if sites else "not patched (no patching results stored)"


def default_run_ids(runs: list[dict], n: int = MAX_SIDE_BY_SIDE, site: str | None = None) -> list[int]:
    """The runs shown when none is picked: the first task (in the usual task order) that has
    runs of a family with ``site``, then its first run of each such family, at most ``n``: side by
    side panels compare architectures on one task, never a Parity grid beside an S3 grid, and a
    ``state`` grid opens on the families that carry a recurrent state."""
    runs = [r for r in runs if has_site(r["family"], site)]
    if not runs:
        return []
    task = ordered({r["task"] for r in runs}, TASK_ORDER)[0]
    seen: set[str] = set()
    ids: list[int] = []
    for r in runs:
        if r["task"] == task and r["family"] not in seen:
            seen.add(r["family"])
            ids.append(r["id"])
            if len(ids) == n:
                break
    return ids


def grids(api: ApiClient, state: dict) -> tuple[list[dict], bool]:
    ids = list(state["runs"])[:MAX_SIDE_BY_SIDE]
    picked = bool(ids)
    if not ids:  # nothing picked: the first runs of one task, one per family
        ids = default_run_ids(candidate_runs(api, state), site=state.get("site"))

    def one(rid):
        run = api.run(rid)
        return {
            "title": f"#{rid} {run.get('name', '')} ({family_label(run['family'])}, {task_label(run['task'])})",
            "run_id": rid,
            "family": run["family"],
            "trained": run.get("trained"),
            "heldout_acc": run.get("heldout_acc"),
            "run": run,
            "rows": api.run_patching(rid, eval_length=state["length"], site=state["site"]),
        }

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, ids)), picked


def untrained_banner(gs: list[dict]) -> html.Div | None:
    """The shared untrained-run banner (``dashboard.components.untrained_banner``) for each
    untrained run on screen, naming its held-out accuracy; None when every run is trained."""
    banners = [
        run_untrained_banner(
            g.get("run")
            or {
                "id": g["run_id"],
                "name": g["title"],
                "trained": g.get("trained"),
                "heldout_acc": g.get("heldout_acc"),
            },
            what="patching recoveries",
        )
        for g in gs
    ]
    banners = [b for b in banners if b is not None]
    return html.Div(banners) if banners else None


def default_layer(gs: list[dict], layer: int | None) -> int | None:
    """The line view's layer: the chosen one, else the last layer of the first run shown."""
    if layer is not None:
        return layer
    layers = [int(r["layer"]) for g in gs for r in g["rows"]]
    return max(layers) if layers else None


def line_rows(gs: list[dict], state: dict) -> list[dict]:
    """CSV rows of the line view: the table rows at its layer (grids fetched once, by the caller)."""
    layer = default_layer(gs, state["layer"])
    return [r for r in patching_table(gs, eval_length=state["length"], site=state["site"]) if r["layer"] == layer]


def run_options(api: ApiClient, task, family, picked, *, trained: bool = True, suite: str | None = None) -> list[dict]:
    """Options of the runs dropdown: the filter's runs plus the picked ones (a dropdown drops
    values that are not among its options); full once MAX_SIDE_BY_SIDE are picked."""
    try:
        runs = candidate_runs(api, {"task": task, "family": family, "trained": trained, "suite": suite})
    except ApiError:
        runs = []
    opts = [{"label": _label(r), "value": r["id"]} for r in runs]
    have = {o["value"] for o in opts}
    for rid in picked or []:
        if rid not in have:
            try:
                opts.insert(0, {"label": _label(api.run(rid)), "value": rid})
            except ApiError:
                pass
    full = len(picked or []) >= MAX_SIDE_BY_SIDE
    return [{**o, "disabled": full and o["value"] not in (picked or [])} for o in opts]


def controls(s: dict, api: ApiClient) -> html.Div:
    """The runs (by filters, or up to four picked), eval length, site, suite; the line view's layer."""
    runs = dcc.Dropdown(
        id="pt-runs",
        options=run_options(api, s["task"], s["family"], s["runs"], trained=s["trained"], suite=s["suite"]),
        value=s["runs"],
        multi=True,
        placeholder="first run of each family",
    )
    layer = dcc.Dropdown(id="pt-layer", options=[], value=s["layer"], placeholder="last layer")
    return control_grid(
        task_picker("pt-task", s["task"], width="150px"),
        family_picker("pt-family", s["family"], width="160px"),
        field(f"Runs (up to {MAX_SIDE_BY_SIDE}, side by side)", runs, width="560px"),
        length_dropdown(
            "pt-length",
            s["length"],
            options=length_options(api, s["suite"], mark_train=False, kind="patch"),
            width="120px",
        ),
        choice(
            "Site",
            "pt-site",
            list(SITE_LABELS.items()),
            s["site"],
            width="250px",
            help="state: the recurrent state a layer carries from t to t+1 (none in the transformer)",
        ),
        suite_input(api, "pt-suite", s["suite"]),
        trained_switch("pt-trained", s["trained"]),
        field("Layer (line view)", layer, width="140px"),
    )


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = resolve_length(api, SPEC.decode(search, base), kind="patch")
    body = [
        html.Div(id="pt-error"),
        html.Div(id="pt-banner"),
        figure_card(
            "pt-graph",
            title="Activation patching: recovery by layer and position",
            filename="layerscope-patching",
            description="Layer ℓ at position p patched from the clean into the corrupted run; recovery = "
            "(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted) of the logit difference at the "
            "last position (1 = the clean answer fully restored). Hover for the 95% bootstrap CI.",
            extra=[html.Div(id="pt-info", className="card-section")],
        ),
        figure_card(
            "pt-line",
            title="Recovery by position at one layer",
            filename="layerscope-patching-line",
            description="One line per run with its 95% bootstrap CI; gaps are undefined cells (too few "
            "pairs whose clean and corrupted answers differ); dashed: the corrupted token.",
        ),
    ]
    return suite_page(
        api,
        s["suite"],
        key=KEY,
        title="Patching",
        subtitle="Which layer and position carry the information the answer needs?",
        controls=controls(s, api),
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def figures(api: ApiClient, state: dict) -> tuple:
    """The page's figures for ``state``: (heatmaps, recovery by position, the layer options, the
    untrained-runs banner, an info line, an error alert)."""
    try:
        gs, picked = grids(api, state)
    except ApiError as exc:
        empty = empty_figure("Could not load patching results")
        return empty, empty, [], None, None, api_alert(exc)
    info = None
    if not picked and gs:
        info = html.Span(
            "Showing the first run of each family matching the filters; pick runs above to compare.",
            className="muted",
        )
    if not gs and not picked and str(state["site"]).startswith("state"):
        info = no_state_info(candidate_runs(api, state), state["site"])
    if not gs and not picked and info is None and state.get("trained", True):
        note = none_trained_note(candidate_runs(api, {**state, "trained": False}), "patching grids")
        info = html.Span(note, className="muted") if note else None
    missing = [f"{g['title']}: {missing_reason(api, g, state)}" for g in gs if not g["rows"]]
    if missing:
        info = html.Span(
            [f"No patching results at L={state['length']}, site {state['site']} for " + "; ".join(missing)],
            className="muted",
        )
    layers = sorted({int(r["layer"]) for g in gs for r in g["rows"]})
    layer = default_layer(gs, state["layer"])
    line = (
        patching_by_position(gs, layer=layer, eval_length=state["length"], site=state["site"])
        if layer is not None
        else empty_figure("No patching results for this selection")
    )
    caption, notice = patching_caption(gs, state)  # what the figures show
    return (
        add_caption(patching_heatmaps(gs, eval_length=state["length"], site=state["site"]), caption, notice=notice),
        add_caption(line, caption),
        [{"label": layer_name(ly), "value": ly} for ly in layers],
        untrained_banner(gs),
        info,
        None,
    )


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
        suite_cid="pt-suite",
        lengths=LengthControl(
            "pt-length",
            "length",
            lambda suite: length_options(api, suite, mark_train=False, kind="patch"),
            lambda st: resolve_length(api, st, kind="patch"),
        ),
        exports=[
            Export(
                "pt-graph",
                "layerscope-patching",
                lambda st: patching_table(grids(api, st)[0], eval_length=st["length"], site=st["site"]),
            ),
            Export("pt-line", "layerscope-patching-line", lambda st: line_rows(grids(api, st)[0], st)),
        ],
    )

    @app.callback(
        Output("pt-runs", "options"),
        Input("pt-task", "value"),
        Input("pt-family", "value"),
        Input("pt-runs", "value"),
        Input("pt-trained", "value"),
        Input("pt-suite", "value"),
    )
    def _options(task, family, picked, trained, suite):
        return run_options(
            api,
            SPEC.value("task", task),
            SPEC.value("family", family),
            SPEC.value("runs", picked),
            trained=bool(trained),
            suite=SPEC.value("suite", suite) or None,
        )

    @page.on_state(
        Output("pt-graph", "figure"),
        Output("pt-line", "figure"),
        Output("pt-layer", "options"),
        Output("pt-banner", "children"),
        Output("pt-info", "children"),
        Output("pt-error", "children"),
    )
    def _figure(state):
        return figures(api, state)


PAGE = PageDef(key=KEY, path=PATH, title="Patching", layout=layout, register=register)
