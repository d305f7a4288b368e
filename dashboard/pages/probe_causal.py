"""/probe-vs-causal — per run, a layer × measure heatmap (probe accuracy, refit accuracy after
each edit, each intervention's behavioural drop, Conv1D removal) with the best-probe and the
most-damaging layers marked; and a cross-run summary of where the two decouple."""

from __future__ import annotations

from typing import Any

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
    untrained_banner,
)
from dashboard.controls import (
    choice,
    control_grid,
    family_picker,
    length_dropdown,
    seed_input,
    suite_input,
    suite_page,
    task_picker,
)
from dashboard.figures.captions import add_caption, mixed_settings
from dashboard.figures.common import empty_figure
from dashboard.figures.decoupling import decoupling_points, decoupling_summary
from dashboard.figures.probe_causal import probe_causal_heatmap
from dashboard.figures.probe_causal_table import EDIT_SETTINGS_ACROSS_RUNS, probe_causal_table
from dashboard.lengths import length_options, resolve_length
from dashboard.page_callbacks import Export, LengthControl, register_page
from dashboard.pages import PageDef
from dashboard.pvc_captions import heatmap_prefix, summary_caption
from dashboard.state import F, PageState
from dashboard.suites import with_suite
from dashboard.theme import all_tasks, family_label, family_names, method_label, task_label
from science import claims as C
from science.profiles import NEAR_BEST_TOL

KEY = "pvc"
PATH = "/probe-vs-causal"
LOC = "pc-loc"
# the edits whose refit probe says whether the variable was removed (claim 4's rule needs it)
SUMMARY_METHODS = ("auto", *C.DECOUPLING_METHODS)

PROBE_FIELDS = "run_id,run_name,family,task,seed,n_layers,pretrained,layer,eval_length,accuracy,majority_baseline"
# random_delta_pp: claim 4 reads each drop beyond its rank-matched random removal; the sequence
# counts and the measurement version say whether the runs were measured alike (the mixed-settings notice)
EDIT_FIELDS = (
    "run_id,method,layer,eval_length,delta_pp,refit_acc,refit_majority,refit_line,p_value,p_holm,significant,"
    "random_delta_pp,n_sequences,n_fit_sequences,measurement_version"
)
SUMMARY_DESCRIPTION = (
    "Claim 4's rule, run by run (the same counts as /claims): an edit counts only where its refit probe is "
    "at or under its removal line, the best constant guess plus the larger of 2 pp and the sampling noise "
    f"(measurement version 1 rows: within {100 * C.REFIT_TOL:g} pp of the majority rate; else 'not removed': "
    f"the probe still reads the variable); a run is decoupled when its most damaging layer is not one of the near-best probe layers (a tie "
    f"within {100 * NEAR_BEST_TOL:g} pp is named), costs ≥ {C.DECOUPLING_MARGIN_PP:g} pp more than them and is "
    f"significant after Holm. Edits: {', '.join(method_label(m) for m in C.DECOUPLING_METHODS)} only (the ones "
    "with a refit probe)."
)

SPEC = PageState(
    [
        F("task", "str", None, all_tasks),
        F("family", "str", None, family_names),
        F("seed", "int", None, lo=0),
        F("run", "int", None, lo=1),
        F("length", "int", 40, aliases=("eval_length",), lo=1),
        F("method", "str", "auto", SUMMARY_METHODS),
        trained_field(),
        F("suite", "str", None),  # one suite's runs; none chosen: suites.default_suite
    ]
)
BINDS = [
    Bind("task", "pc-task"),
    Bind("family", "pc-family"),
    Bind("seed", "pc-seed"),
    Bind("run", "pc-run"),
    Bind("length", "pc-length"),
    Bind("method", "pc-method"),
    trained_bind("pc-trained"),
    Bind("suite", "pc-suite"),
]


def run_options(api: ApiClient, state: dict) -> list[dict]:
    """The runs of one suite (the chosen one, else suites.default_suite) matching the filters."""
    page = api.runs(
        task=state["task"],
        family=state["family"],
        seed=state["seed"],
        limit=500,
        trained=trained_filter(state.get("trained", True)),
        suite=with_suite(api, state)["suite"],
    )
    return page["items"]


def _run_label(r: dict) -> str:
    mark = (
        " · control: at init"
        if r.get("control") == "init"
        else f" · control: {r['control']}"
        if r.get("control")
        else " · untrained"
        if r.get("trained") is False
        else ""
    )
    return (
        f"#{r['id']} · {r.get('name', '')} · {family_label(r['family'])} · {task_label(r['task'])} · "
        f"seed {r['seed']}{mark}"
    )


def selected_run(api: ApiClient, state: dict) -> dict | None:
    if state["run"]:
        try:
            return api.run(state["run"])
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
    runs = run_options(api, state)
    return runs[0] if runs else None


def heatmap_data(api: ApiClient, state: dict) -> tuple[dict | None, list[dict], list[dict]]:
    run = selected_run(api, state)
    if run is None:
        return None, [], []
    L = state["length"]
    return run, api.run_probes(run["id"], eval_length=L), api.run_interventions(run["id"], eval_length=L)


def summary_points(api: ApiClient, state: dict) -> list[dict]:
    """One point per run, judged by claim 4's rule (``decoupling_points`` →
    ``science.claims.run_decouplings``), from the exported probe and intervention rows of the
    matching runs. ``auto``: claim 4's edit (the first of LEACE, INLP, project-out present)."""
    return summary_view(api, state)[0]


def summary_view(api: ApiClient, state: dict) -> tuple[list[dict], str | None, str]:
    """(points, mixed-settings notice or None, caption) of the cross-run summary."""
    trained = trained_filter(state.get("trained", True))
    flt = {
        "task": state["task"],
        "family": state["family"],
        "seed": state["seed"],
        "eval_length": state["length"],
        "trained": trained,
        "suite": with_suite(api, state)["suite"],
    }  # one suite: never pooled
    method = None if state["method"] == "auto" else state["method"]
    # only the columns the rule reads (never per_position): one light request each
    probes = api.export("probes", "json", fields=PROBE_FIELDS, **flt)
    interventions = api.export(
        "interventions", "json", fields=EDIT_FIELDS, **({"method": method} if method else {}), **flt
    )
    runs: dict[int, dict] = {}
    for p in probes:
        if state["seed"] is not None and p.get("seed") != state["seed"]:
            continue  # the export filters too; kept so a seed never mixes in
        runs.setdefault(
            int(p["run_id"]),
            {
                "id": int(p["run_id"]),
                "name": p.get("run_name", ""),
                "family": p["family"],
                "task": p["task"],
                "seed": p.get("seed"),
                "n_layers": p["n_layers"],
                "pretrained": p.get("pretrained"),
            },
        )
    # claim 4 leaves out the trained seeds of a cell not learned (docs/SCIENCE.md#plateau): the one
    # definition of those cells, read from every run of the suite (a cell needs all its seeds)
    not_learned = C.not_learned_cells(api.all_runs(suite=flt["suite"], limit=100_000))
    left_out = [rid for rid, r in runs.items() if not r.get("pretrained") and (r["task"], r["family"]) in not_learned]
    for rid in left_out:
        del runs[rid]
    pts = decoupling_points(list(runs.values()), probes, interventions, method=method, eval_length=state["length"])
    edits = [r for r in interventions if int(r["run_id"]) in runs]
    notice = mixed_settings(edits, EDIT_SETTINGS_ACROSS_RUNS)
    caption = summary_caption(
        state,
        n_runs=len(runs),
        beyond=sum(r.get("random_delta_pp") is not None for r in edits),
        n_edits=len(edits),
        not_learned=len(left_out),
    )
    return pts, notice, caption


def initial_options(api: ApiClient, state: dict) -> list[dict]:
    """The run dropdown's options at first render (the selected run among them: a dropdown
    drops a value that is not one of its options)."""
    try:
        runs = run_options(api, state)
    except ApiError:
        runs = []
    opts = [{"label": _run_label(r), "value": r["id"]} for r in runs]
    if state["run"] and all(o["value"] != state["run"] for o in opts):
        try:
            opts.insert(0, {"label": _run_label(api.run(state["run"])), "value": state["run"]})
        except ApiError:
            pass
    return opts


def method_traits(api: ApiClient) -> dict[str, dict[str, bool]]:
    """How each method's rows read (``GET /api/meta``'s ``method_traits``; {} from a client
    without ``meta``, a test's fake)."""
    meta = getattr(api, "meta", None)
    return dict(meta().get("method_traits", {})) if meta is not None else {}


def heatmap_view(api: ApiClient, path_for, state: dict) -> tuple[Any, Any, Any, Any]:
    """(heatmap figure, run info, error alert, untrained banner) for the page state."""
    try:
        run, probes, interventions = heatmap_data(api, state)
        traits = method_traits(api)
    except ApiError as exc:
        return empty_figure("Could not load this run"), None, api_alert(exc), None
    if run is None:
        if state["run"]:
            return empty_figure(f"Run #{state['run']} not found"), None, None, None
        none_trained = (
            none_trained_note(run_options(api, {**state, "trained": False}), "heatmaps") if state["trained"] else None
        )
        info = html.Span(none_trained, className="muted") if none_trained else None
        return empty_figure("No run matches these filters"), info, None, None
    fig = probe_causal_heatmap(
        probes,
        interventions,
        eval_length=state["length"],
        n_layers=run["n_layers"],
        title=f"#{run['id']} {run.get('name', '')} · L={state['length']}",
        d_model=run.get("d_model"),
        caption=heatmap_prefix(run),
        method_traits=traits,
    )
    info = html.Span(
        [
            "Run ",
            dcc.Link(f"#{run['id']}", href=path_for(f"/?run={run['id']}")),
            " ",
            html.Span(run.get("name", ""), className="run-name"),
            f" · {family_label(run['family'])} · {task_label(run['task'])} · seed {run['seed']} · "
            f"{run['n_layers']} layers · config {str(run.get('config_hash', ''))[:10]}",
            "" if state["run"] else " (first run matching the filters; pick another in Run)",
        ],
        className="muted",
    )
    return fig, info, None, untrained_banner(run, what="probes and edits")


def controls(s: dict, api: ApiClient) -> html.Div:
    """The run (by filters, or picked), its eval length, the summary's edit, the suite."""
    methods = [
        (m, "auto, as claim 4 (LEACE → INLP → project-out)" if m == "auto" else method_label(m))
        for m in SUMMARY_METHODS
    ]
    run = dcc.Dropdown(id="pc-run", options=initial_options(api, s), value=s["run"], placeholder="first matching run")
    return control_grid(
        task_picker("pc-task", s["task"], width="150px"),
        family_picker("pc-family", s["family"], width="160px"),
        seed_input("pc-seed", s["seed"], width="80px"),
        field("Run", run, width="420px"),
        length_dropdown("pc-length", s["length"], options=length_options(api, s["suite"]), width="130px"),
        choice("Summary edit", "pc-method", methods, s["method"], width="250px"),
        suite_input(api, "pc-suite", s["suite"]),
        trained_switch("pc-trained", s["trained"]),
    )


HEATMAP_DESCRIPTION = (
    "Left: probe accuracy and the accuracy of a probe refit on the edited states (a high "
    "refit means the edit left the variable decodable). Right: the behavioural accuracy "
    "change of each edit in percentage points beyond removing as many random directions "
    "(rank-matched random removal, where stored; hover: the raw change and the random "
    "range over its draws; mean ablation and Conv1D removal have none and read raw) "
    "(red = damage; 'n.sel.' = not selective: an INLP that removed more than half the "
    "width, its rank as a share of the width in hover; 'n.s.' = not significant "
    "after Holm correction; 'n.r.' = not removed: a probe refit on the edited "
    "states still reads the variable above its removal line (the best constant guess plus the larger of "
    f"2 pp and the sampling noise; version 1 rows: {C.REFIT_TOL * 100:g} pp above the majority rate), "
    "so the drop is no necessity test). ★ best-probe layer (every layer of a near-best tie), "
    "▼ the layer where each edit costs most among significant drops (every layer within "
    f"{100 * NEAR_BEST_TOL:g} pp of it: a tie; none when no drop is significant). Under "
    "the figure: the run, suite and settings it was measured with, and a ⚠ line when its "
    "rows were measured with different settings."
)


def layout(*, search: str | None, base: dict | None, embed: bool, api: ApiClient, path_for) -> Any:
    s = resolve_length(api, SPEC.decode(search, base))
    body = [
        html.Div(id="pc-error"),
        html.Div(id="pc-banner"),
        figure_card(
            "pc-heatmap",
            title="Decodable vs necessary, layer by layer",
            filename="layerscope-probe-vs-causal",
            description=HEATMAP_DESCRIPTION,
            extra=[html.Div(id="pc-run-info", className="card-section")],
        ),
        figure_card(
            "pc-summary",
            title="Where probing and causality decouple, across runs",
            filename="layerscope-decoupling",
            description=SUMMARY_DESCRIPTION,
        ),
    ]
    return suite_page(
        api,
        s["suite"],
        key=KEY,
        title="Probe vs causal",
        subtitle="The most readable layer is not always the causally necessary one.",
        controls=controls(s, api),
        body=body,
        embed=embed,
        loc_id=LOC,
        base=base,
    )


def summary_figure(api: ApiClient, state: dict) -> Any:
    """The cross-run decoupling summary for ``state`` (every run of the selection, not one)."""
    try:
        pts, notice, caption = summary_view(api, state)
    except ApiError:
        return empty_figure("Could not load the cross-run summary")
    fig = decoupling_summary(pts, method=None if state["method"] == "auto" else state["method"])
    return add_caption(fig, caption, notice=notice) if pts else fig


def register(app, api: ApiClient, path_for) -> None:
    def heat_csv(state):
        run, probes, interventions = heatmap_data(api, state)
        rows = probe_causal_table(
            probes,
            interventions,
            method_traits=method_traits(api),
            eval_length=state["length"],
            d_model=run.get("d_model") if run else None,
        )
        return [{"run_id": run["id"] if run else None, "eval_length": state["length"], **r} for r in rows]

    page = register_page(
        app,
        api,
        path_for,
        key=KEY,
        path=PATH,
        spec=SPEC,
        binds=BINDS,
        loc_id=LOC,
        suite_cid="pc-suite",
        lengths=LengthControl(
            "pc-length",
            "length",
            lambda suite: length_options(api, suite),
            lambda st: resolve_length(api, st),
        ),
        exports=[
            Export("pc-heatmap", "layerscope-probe-vs-causal", heat_csv),
            Export("pc-summary", "layerscope-decoupling", lambda st: summary_points(api, st)),
        ],
    )

    @app.callback(
        Output("pc-run", "options"),
        Input("pc-task", "value"),
        Input("pc-family", "value"),
        Input("pc-seed", "value"),
        Input("pc-run", "value"),
        Input("pc-trained", "value"),
        Input("pc-suite", "value"),
    )
    def _options(task, family, seed, run, trained, suite):
        return initial_options(
            api,
            {
                "task": SPEC.value("task", task),
                "family": SPEC.value("family", family),
                "seed": SPEC.value("seed", seed),
                "run": SPEC.value("run", run),
                "trained": bool(trained),
                "suite": SPEC.value("suite", suite) or None,
            },
        )

    @page.on_state(
        Output("pc-heatmap", "figure"),
        Output("pc-run-info", "children"),
        Output("pc-error", "children"),
        Output("pc-banner", "children"),
        without=("method",),
    )
    def _heatmap(state):
        return heatmap_view(api, path_for, state)

    @page.on_state(Output("pc-summary", "figure"), without=("run",))
    def _summary(state):
        return summary_figure(api, state)


PAGE = PageDef(key=KEY, path=PATH, title="Probe vs causal", layout=layout, register=register)
