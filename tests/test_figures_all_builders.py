"""Every figure builder, found generically, against missing values and hostile
names.

A *builder* is every public function of a ``dashboard/figures/*`` module, defined there, whose
return annotation is ``go.Figure`` (listed by :func:`builders`). Each needs an entry in
:data:`FIXTURES` — a function ``(variant, names) -> (args, kwargs)`` — and the test
``test_every_builder_has_a_fixture`` fails until a new or renamed builder gets one. Variants:

* ``full``: every value present;
* ``all_none``: every value the API may send as null (or a measurement) is None;
* ``some_none``: about a third of them None;
* ``empty``: no rows at all.

Every builder must return a figure for each variant whose JSON is strict (no NaN), whose visible
text never reads "None"/"nan", whose heatmaps do not hover over gaps, and which says why
values are missing (``meta.empty`` from ``empty_figure``, or ``meta.missing`` > 0 and a note);
and, fed hostile names, no user text may survive as markup anywhere in the figure.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import pytest

import dashboard.figures
from science.methods import traits_meta
from tests.dashboard_data import curve_rows, intervention_rows, patching_rows, probe_rows, profile_rows

TRAITS = traits_meta()  # how each built-in method's rows read (GET /api/meta's method_traits)

VARIANTS = ("full", "all_none", "some_none", "empty")
# Helpers that return a Figure but are not builders: they style or wrap a figure they are given.
NOT_BUILDERS = {
    "dashboard.figures.common.base_layout": "styles a given figure; its title is markup built by the caller with esc",
    "dashboard.figures.common.note_missing": "annotates a given figure (its note is escaped there)",
    "dashboard.figures.captions.add_caption": "annotates a given figure (its caption is escaped there)",
}
ALWAYS_EMPTY = {"dashboard.figures.common.empty_figure"}  # a message, never data


def builders() -> dict[str, Callable[..., go.Figure]]:
    out = {}
    for mod_info in pkgutil.iter_modules(dashboard.figures.__path__):
        mod = importlib.import_module(f"dashboard.figures.{mod_info.name}")
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.startswith("_") or fn.__module__ != mod.__name__:
                continue
            try:
                ret = typing.get_type_hints(fn).get("return")
            except Exception:  # noqa: BLE001 - an unresolvable annotation: look at the raw string
                ret = inspect.signature(fn).return_annotation
            if ret is go.Figure or ret in ("go.Figure", "Figure", "plotly.graph_objects.Figure"):
                key = f"{mod.__name__}.{name}"
                if key not in NOT_BUILDERS:
                    out[key] = fn
    return out


# --- names ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """The user-typed (or stored) text a figure can show."""

    run: str = "lstm-parity-s0"
    pretrained: str = "EleutherAI/pythia-160m"
    family: str = "lstm"
    family2: str = "transformer"
    task: str = "parity"
    task2: str = "dyck"
    method: str = "project_out"
    layer_name: str | None = None  # None: the server's usual names
    profile_class: str = "late"
    message: str = "No data for this selection"


PLAIN = Names()
# Markup plotly would honour (a live link, bold, line breaks, styles), each with a unique tail.
H_LINK = '<a href="https:evil.example">x'
HOSTILE = Names(
    run=f"{H_LINK}run",
    pretrained=f"org/{H_LINK}pre",
    family="<b>BOLDfam</b>",
    family2="fam<br>BREAK2",
    task="<i>ITtask</i>",
    task2='<span style="color:red">SPANtask',
    method="<sup>SUPmethod</sup>",
    layer_name="<em>EMlayer",
    profile_class="<u>Ucls</u>",
    message=f"{H_LINK}msg <b>BOLDmsg",
)
RAW_MARKUP = (
    "<a href",
    "<a ",
    "<b>BOLD",
    "<br>BREAK",
    "<i>IT",
    "<span style",
    "<sup>SUP",
    "<em>EM",
    "<u>U",
    "</a>",
    "</b>BOLD",
)
ESCAPED_MARKERS = (
    "&lt;a href",
    "&lt;b&gt;BOLD",
    "BREAK2",
    "&lt;i&gt;IT",
    "&lt;span",
    "&lt;sup&gt;SUP",
    "&lt;em&gt;EM",
    "&lt;u&gt;U",
)


# --- input variants -----------------------------------------------------------------------------


def _blank(rows: list[dict], keys: tuple[str, ...], variant: str) -> list[dict]:
    """Set ``keys`` to None in every row (all_none), every third row (some_none), or drop all rows."""
    if variant == "empty":
        return []
    if variant == "full":
        return rows
    out = []
    for i, r in enumerate(rows):
        if variant == "all_none" or i % 3 == 1:
            r = {**r, **{k: None for k in keys}}
        out.append(r)
    return out


def _rename(rows: list[dict], n: Names) -> list[dict]:
    fam = {"lstm": n.family, "transformer": n.family2}
    task = {"parity": n.task, "dyck": n.task2}
    out = []
    for r in rows:
        r = dict(r)
        if "family" in r:
            r["family"] = fam.get(r["family"], r["family"])
        if "task" in r:
            r["task"] = task.get(r["task"], r["task"])
        if "method" in r:
            r["method"] = n.method if r["method"] == "project_out" else r["method"]
        if n.layer_name is not None and "layer_name" in r:
            r["layer_name"] = f"{n.layer_name}{r['layer_name']}"
        out.append(r)
    return out


CURVE_VALUES = ("mean", "lo", "hi", "majority_baseline", "n", "seeds", "depth", "pretrained", "run_ids")


def _curve_rows(variant: str, n: Names) -> list[dict]:
    rows = curve_rows(tasks=("parity", "dyck"), families=("lstm", "transformer"), lengths=(40, 80))
    rows += curve_rows(tasks=("parity",), families=("lstm",), lengths=(40, 80), pretrained=n.pretrained, n_layers=6)
    return _blank(_rename(rows, n), CURVE_VALUES, variant)


def fx_layerwise_curves(variant: str, n: Names):
    seeds = [
        {
            "task": r["task"],
            "family": r["family"],
            "eval_length": r["eval_length"],
            "layer": r["layer"],
            "depth": r["depth"],
            "n_layers": r["n_layers"],
            "pretrained": r.get("pretrained"),
            "seed": s,
            "accuracy": r["mean"],
        }
        for r in _curve_rows("full", n)
        for s in (0, 1)
    ]
    seeds = _blank(seeds, ("accuracy", "depth"), variant)
    controls = [{**r, "control": "init"} for r in _curve_rows(variant, n)]  # the at-initialisation lines
    types = _blank(
        [{**r, "token_type": f"{n.method}open", "n": 3} for r in _curve_rows("full", n) if not r.get("pretrained")],
        ("mean", "lo", "hi", "n", "depth"),
        variant,
    )
    return (_curve_rows(variant, n),), {
        "seed_rows": seeds,
        "title": f"{n.run} curves",
        "control_rows": controls,
        "type_rows": types,
        "caption": f"Suite {n.run}",
    }


def fx_layerwise_curves_by_depth(variant: str, n: Names):
    args, kwargs = fx_layerwise_curves(variant, n)
    return args, {**kwargs, "x": "depth"}


def fx_position_curves(variant: str, n: Names):
    rows = []
    for t in ("parity", "dyck"):
        for f in ("lstm", "transformer"):
            for L in (40, 80):
                for p in range(1, L + 1, 8):
                    rows.append(
                        {
                            "task": t,
                            "family": f,
                            "eval_length": L,
                            "position": p,
                            "mean": 0.5 + p / 400,
                            "lo": 0.45,
                            "hi": 0.6 + p / 400,
                            "n": 3,
                            "majority_baseline": 0.5,
                        }
                    )
    return (_blank(_rename(rows, n), ("mean", "lo", "hi", "n", "majority_baseline"), variant),), {
        "layer_label": f"layer {n.layer_name or 'last'}"
    }


def fx_length_generalisation(variant: str, n: Names):
    rows = [
        {
            "task": t,
            "family": f,
            "eval_length": L,
            "mean": 0.9 - L / 400,
            "lo": 0.8 - L / 400,
            "hi": 0.95 - L / 400,
            "n": 3,
            "seeds": [0, 1, 2],
        }
        for t in ("parity", "dyck")
        for f in ("lstm", "transformer")
        for L in (40, 60, 80, 120)
    ]
    return (_blank(_rename(rows, n), ("mean", "lo", "hi", "n", "seeds"), variant),), {"metric_label": "token accuracy"}


PROFILE_VALUES = ("profile_class", "metrics", "n", "seeds", "pretrained", "class_counts", "per_seed")


def _profiles(variant: str, n: Names) -> list[dict]:
    rows = profile_rows(tasks=("parity", "dyck"), families=("lstm", "transformer", "gru"))
    rows += [{**rows[0], "pretrained": n.pretrained, "family": "mamba"}]
    rows = [{**r, "profile_class": n.profile_class if r["family"] == "gru" else r["profile_class"]} for r in rows]
    # the class against the random-init control (stored text) and a fragile class
    rows = [
        {
            **r,
            "against_control": {"profile_class": n.profile_class} if r["family"] == "gru" else None,
            "stability": {"agree": 40, "of": 81, "stable": r["family"] != "lstm"},
        }
        for r in rows
    ]
    rows = _rename(rows, n)
    if variant in ("all_none", "some_none"):  # metric values null (the API's MetricCI allows it) ...
        rows = [
            {**r, "metrics": {k: {"mean": None, "lo": None, "hi": None, "n": 0} for k in r["metrics"]}}
            if (variant == "all_none" or i % 3 == 1)
            else r
            for i, r in enumerate(rows)
        ]
    return _blank(rows, ("profile_class", "n", "seeds"), variant)  # ... and the class unknown


def fx_reversal_matrix(variant: str, n: Names):
    return (_profiles(variant, n),), {"metric_name": "late_concentration", "caption": f"Suite {n.run}"}


def fx_reversal_matrix_auc(variant: str, n: Names):
    return (_profiles(variant, n),), {"metric_name": "auc", "reversals": []}


def fx_s3_distance_figure(variant: str, n: Names):
    rows = [
        {"family": f, "to_parity": 0.1 + i / 10, "to_dyck": 0.4 - i / 20, "closer": "parity" if i == 0 else "dyck"}
        for i, f in enumerate(("lstm", "transformer", "gru"))
    ]
    rows = _rename(rows, n)
    return (_blank(rows, ("to_parity", "to_dyck", "closer"), variant),), {}


PROBE_VALUES = ("accuracy", "majority_baseline", "per_position", "layer_name", "depth")
INTERVENTION_VALUES = (
    "delta_pp",
    "refit_acc",
    "refit_majority",
    "p_holm",
    "p_value",
    "significant",
    "drop_rel_chance",
    "layer_name",
    "depth",
    "random_delta_pp",
    "random_delta_lo",
    "random_delta_hi",
    "random_draws",
    "rank_removed",
    "n_sequences",
)


def fx_probe_causal_heatmap(variant: str, n: Names):
    probes = _blank(_rename(probe_rows(), n), PROBE_VALUES, variant)
    edits = [
        {
            **r,
            "random_delta_pp": -1.0,
            "random_delta_lo": -2.0,
            "random_delta_hi": 0.0,
            "random_draws": 5,
            "rank_removed": 100 if r["method"] == "inlp" else 2,
            "n_sequences": 64 + 436 * (r["layer"] % 2),
        }
        for r in intervention_rows()
    ]  # INLP over half the width; two sequence counts (the notice)
    interventions = _blank(_rename(edits, n), INTERVENTION_VALUES, variant)
    return (probes, interventions), {
        "eval_length": 40,
        "n_layers": 4,
        "title": f"#1 {n.run} · L=40",
        "d_model": 128,
        "caption": f"Run #1 · suite {n.run}",
        "method_traits": TRAITS,
    }


def fx_decoupling_summary(variant: str, n: Names):
    pts = [
        {
            "run_id": i + 1,
            "run_name": f"{n.run}{i}",
            "family": f,
            "task": t,
            "pretrained": pre,
            "seed": i,
            "n_layers": 4,
            "best_layer": 3,
            "damage_layer": 1 if i % 2 else 3,
            "best_depth": 1.0,
            "damage_depth": 0.5 if i % 2 else 1.0,
            "decoupled": bool(i % 2),
        }
        for i, (f, t, pre) in enumerate(
            [
                ("lstm", "parity", None),
                ("lstm", "parity", None),
                ("transformer", "dyck", None),
                ("mamba", "parity", n.pretrained),
                ("gru", "dyck", None),
                ("transformer", "parity", None),
            ]
        )
    ]
    pts = _blank(_rename(pts, n), ("best_layer", "damage_layer", "best_depth", "damage_depth", "decoupled"), variant)
    return (pts,), {"method": n.method}


def fx_patching_heatmaps(variant: str, n: Names):
    values = (
        "recovery",
        "recovery_lo",
        "recovery_hi",
        "ld_clean",
        "ld_corrupted",
        "layer_name",
        "note",
        "corrupt_position",
        "n_dropped",
    )
    grids = [
        {
            "title": f"#1 {n.run}",
            "run_id": 1,
            "rows": _blank(_rename(patching_rows(1, n_layers=3, positions=[3, 10, 20]), n), values, variant),
        },
        {
            "title": f"#2 {n.pretrained}",
            "run_id": 2,
            "rows": _blank(_rename(patching_rows(2, n_layers=2, positions=[5]), n), values, variant),
        },
    ]
    return (grids,), {"eval_length": 40}


def fx_patching_by_position(variant: str, n: Names):
    (grids,), kw = fx_patching_heatmaps(variant, n)
    return (grids,), {**kw, "layer": 0}


def fx_empty_figure(variant: str, n: Names):
    return (n.message if variant != "empty" else "",), {}


def _loss_curve(variant: str) -> list[dict]:
    curve = [
        {"step": s, "loss": 2.0 / (1 + s), "heldout_token_acc": min(1.0, 0.5 + s / 300)} for s in range(0, 200, 25)
    ]
    return _blank(curve, ("loss", "heldout_token_acc"), variant)


def fx_loss_figure(variant: str, n: Names):
    run = {"id": 1, "name": n.run, "family": n.family, "loss_curve": _loss_curve(variant)}
    return ({**run, "train_config": {"train_length": 40}},), {}


def fx_loss_figure_curriculum(variant: str, n: Names):
    (run,), kw = fx_loss_figure(variant, n)
    return ({**run, "loss_curve": [{**p, "length": 20 + p["step"] // 10} for p in run["loss_curve"]]},), kw


def fx_run_behaviour_figure(variant: str, n: Names):
    rows = [{"L": L, "token_acc": 1.0 - (L - 40) / 400, "last_acc": 0.95 - (L - 40) / 300} for L in (40, 60, 80, 120)]
    rows = _blank(rows, ("token_acc", "last_acc"), variant)
    beh = {str(r["L"]): {"token_acc": r["token_acc"], "last_acc": r["last_acc"], "n": 100} for r in rows}
    return ({"id": 1, "name": n.run, "family": n.family, "behaviour": beh},), {}


def fx_loss_overlay(variant: str, n: Names):
    runs = [
        {"id": i + 1, "name": f"{n.run}{i}", "family": fam, "loss_curve": _loss_curve(variant if i else "full")}
        for i, fam in enumerate((n.family, n.family, n.family2))
    ]
    return ([] if variant == "empty" else runs,), {}


def fx_overlay_suites(variant: str, n: Names):
    from dashboard.figures.curves import layerwise_curves

    args, kw = fx_layerwise_curves(variant, n)
    return (layerwise_curves(*args, **kw), layerwise_curves(*args, **kw), n.run, n.pretrained), {}


# builder → its input fixtures (several: each must pass)
FIXTURES: dict[str, tuple[Callable[[str, Names], tuple[tuple, dict]], ...]] = {
    "dashboard.figures.curves.layerwise_curves": (fx_layerwise_curves, fx_layerwise_curves_by_depth),
    "dashboard.figures.curves.position_curves": (fx_position_curves,),
    "dashboard.figures.behaviour.length_generalisation": (fx_length_generalisation,),
    "dashboard.figures.reversal.reversal_matrix": (fx_reversal_matrix, fx_reversal_matrix_auc),
    "dashboard.figures.s3_distance.s3_distance_figure": (fx_s3_distance_figure,),
    "dashboard.figures.probe_causal.probe_causal_heatmap": (fx_probe_causal_heatmap,),
    "dashboard.figures.decoupling.decoupling_summary": (fx_decoupling_summary,),
    "dashboard.figures.patching.patching_heatmaps": (fx_patching_heatmaps,),
    "dashboard.figures.patching.patching_by_position": (fx_patching_by_position,),
    "dashboard.figures.common.empty_figure": (fx_empty_figure,),
    "dashboard.figures.runs.loss_figure": (fx_loss_figure, fx_loss_figure_curriculum),
    "dashboard.figures.runs.run_behaviour_figure": (fx_run_behaviour_figure,),
    "dashboard.figures.runs.loss_overlay": (fx_loss_overlay,),
    "dashboard.figures.compare.overlay_suites": (fx_overlay_suites,),
}
# Builders whose figures show no stored or typed text at all (fixed labels only): the markup check
# still runs on them, the check that some user text reached the figure cannot.
NO_USER_TEXT = {
    "dashboard.figures.runs.loss_figure": "one run's loss and held-out accuracy: axis titles and trace names are fixed",
    "dashboard.figures.runs.run_behaviour_figure": "one run's accuracy by length: fixed trace names",
}
# Known failures, each to be removed when its cause is fixed (strict: an unexpected pass fails,
# so the entry cannot outlive the fix).
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


def _cases(variants) -> list:
    out = []
    for key in sorted(FIXTURES):
        for fx in FIXTURES[key]:
            for v in variants:
                marks = []
                if (key, v) in KNOWN_FAILURES:
                    marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[(key, v)]))
                out.append(pytest.param(key, fx, v, id=f"{key.rsplit('.', 2)[-2]}.{fx.__name__[3:]}-{v}", marks=marks))
    return out


# --- checks ---------------------------------------------------------------------------------------

# Keys whose strings plotly never renders as text.
NOT_RENDERED = {
    "meta",
    "uid",
    "legendgroup",
    "ids",
    "colorscale",
    "type",
    "mode",
    "fill",
    "hoverinfo",
    "xref",
    "yref",
    "xaxis",
    "yaxis",
    "anchor",
    "overlaying",
    "side",
    "symbol",
    "dash",
    "color",
    "fillcolor",
    "bgcolor",
    "bordercolor",
    "family",
    "tickformat",
    "hoverformat",
    "categoryorder",
    "xanchor",
    "yanchor",
    "orientation",
    "texttemplate",
    "hovertemplate_src",
    "autorange",
    "rangemode",
    "matches",
    "tickmode",
    "ticks",
    "textposition",
    "hoveron",
    "valign",
    "align",
    "layer",
    "visible",
    "zerolinecolor",
    "gridcolor",
    "linecolor",
    "tickcolor",
    "font",
    "template",
    "textangle",
    "line",
    "marker",
}


def strings(obj: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (path, string) plotly may render: titles, names, ticks, text, hover, data arrays."""
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in NOT_RENDERED and k not in ("font",):
                if k in ("line", "marker"):  # their own strings are colours/symbols; colorbars hold titles
                    out += strings(
                        {kk: vv for kk, vv in v.items() if kk == "colorbar"} if isinstance(v, dict) else {},
                        f"{path}.{k}",
                    )
                continue
            out += strings(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += strings(v, f"{path}[{i}]")
    elif isinstance(obj, str):
        out.append((path, obj))
    return out


def figure_json(fig: go.Figure) -> dict:
    def no_constants(c: str):
        raise AssertionError(f"figure JSON holds {c}: not valid JSON for the browser")

    text = fig.to_json()
    return json.loads(text, parse_constant=no_constants)


BAD_WORDS = re.compile(r"\b(None|nan|NaN|inf|Infinity|undefined%)\b")


def build(key: str, fx, variant: str, names: Names = PLAIN) -> tuple[go.Figure, dict]:
    fn = builders()[key]
    args, kwargs = fx(variant, names)
    fig = fn(*args, **kwargs)
    assert isinstance(fig, go.Figure), f"{key} returned {type(fig)}"
    return fig, figure_json(fig)


def meta(fig: go.Figure) -> dict:
    m = fig.layout.meta
    return dict(m) if isinstance(m, dict) else {}


# --- tests ------------------------------------------------------------------------------------------


def test_every_builder_has_a_fixture() -> None:
    found = set(builders())
    assert found, "no builders found"
    assert not found - set(FIXTURES), (
        f"figure builders without input fixtures: {sorted(found - set(FIXTURES))} — add them to FIXTURES in {__name__}"
    )
    assert not set(FIXTURES) - found, f"fixtures for builders that no longer exist: {sorted(set(FIXTURES) - found)}"


@pytest.mark.parametrize("key, fx, variant", _cases(VARIANTS))
def test_builder_survives_missing_values(key, fx, variant) -> None:
    fig, data = build(key, fx, variant)
    for path, s in strings(data):
        if path.endswith("hovertemplate") or ".meta" in path:
            continue
        assert not BAD_WORDS.search(s), f"{key}/{variant}: {path} shows {s!r}"
    for tr in fig.data:
        if tr.type == "heatmap" and any(v is None for row in (tr.z or ()) for v in (row or ())):
            assert tr.hoverongaps is False, f"{key}/{variant}: a heatmap hovers over its gaps (reads as a value)"
    m = meta(fig)
    if key in ALWAYS_EMPTY:
        assert m.get("empty")
        return
    if variant == "full":
        assert not m.get("empty") and not m.get("missing"), f"{key}: complete data drawn as missing: {m}"
        return
    says_why = m.get("empty") or (
        m.get("missing", 0) > 0
        and any("no value" in (a.text or "") for a in fig.layout.annotations)
        or "no value" in str(fig.layout.title.text or "")
    )
    assert says_why, f"{key}/{variant}: missing values are not explained (meta {m})"
    if variant == "all_none":  # nothing to mark: no ★ / ▼ / best marker on a grid of gaps
        marked = [t for t in fig.data if (t.meta or {}).get("kind") in ("best", "best_probe", "most_damaging")]
        assert not marked, f"{key}: marks a best cell on a grid without values"


@pytest.mark.parametrize("key, fx", [(k, fx) for k in sorted(FIXTURES) for fx in FIXTURES[k]])
def test_user_text_never_becomes_markup(key, fx) -> None:
    fig, data = build(key, fx, "full", HOSTILE)
    found = strings(data)
    for path, s in found:
        for raw in RAW_MARKUP:
            assert raw not in s, f"{key}: user text became markup at {path}: {s!r}"
        assert "&amp;lt;" not in s, f"{key}: escaped twice at {path}: {s!r}"
    shown = " ".join(s for _p, s in found)
    if key in NO_USER_TEXT:
        return
    assert any(m in shown for m in ESCAPED_MARKERS), f"{key}: no user text reached the figure — fixture too weak?"


def test_escape_helper_is_the_one_used() -> None:
    """The figure modules escape through common.esc (no ad-hoc html.escape elsewhere)."""
    import pathlib

    folder = pathlib.Path(dashboard.figures.__file__).parent
    for path in folder.glob("*.py"):
        if path.name in ("common.py", "__init__.py"):
            continue
        src = path.read_text()
        assert "html.escape" not in src and "import html" not in src, f"{path.name}: escape with common.esc"


def test_the_legend_clears_facet_titles():
    """The legend sat on the facet titles of the behaviour-by-length figure (docs/figures)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from dashboard.figures.common import base_layout

    faceted = base_layout(make_subplots(rows=1, cols=2, subplot_titles=["Parity", "Dyck"]))
    titles_top = max(a.y for a in faceted.layout.annotations)
    assert faceted.layout.legend.y >= titles_top + 0.05 and faceted.layout.margin.t > 40
    plain = base_layout(go.Figure())
    assert plain.layout.legend.y == 1.02 and plain.layout.margin.t == 40  # unchanged without facets
