"""The launch form on /jobs: its fields (which job kinds each belongs to, its widget and help),
the form's values → a job's params JSON, the checks made in the browser (numbers JSON cannot
carry), a 422's messages placed at the fields they name, and the submission itself."""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

from dash import dcc, html, no_update

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import api_alert
from dashboard.state import INT_MAX, parse_int
from dashboard.theme import (
    EVAL_LENGTHS,
    MEASURE_PARTS,
    METHODS,
    PRESETS,
    all_tasks,
    family_label,
    family_names,
    method_label,
    task_label,
)

# how the API words a run without weights here (worker.run_weights.missing_weights): the form then
# offers the rebuild first
WEIGHTLESS = "has no model weights here"

# name → (label, widget, kinds, help); widget: text | int | float | ints | family | families | task | tasks |
# methods | preset | flag (a checkbox: sent as true only when ticked) | parts (the measurement parts:
# sent only when some are unticked, so a whole suite keeps the server's default) | params (a
# method's parameters, "method.name=value, ...": what each method declares is GET /api/meta's)
FIELDS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "preset": (
        "Preset",
        "preset",
        ("suite",),
        "smoke: tiny, minutes · quick: study-sized models, 1 seed · paper: 3 seeds",
    ),
    "family": ("Family", "family", ("train",), ""),
    "task": ("Task", "task", ("train",), ""),
    "families": ("Families", "families", ("suite",), "empty = the preset's"),
    "tasks": ("Tasks", "tasks", ("suite",), "empty = the preset's"),
    "seed": ("Seed", "int", ("train",), "≥ 0"),
    "seeds": ("Seeds", "ints", ("suite",), "comma-separated, e.g. 0, 1, 2"),
    "run_id": ("Run id", "int", ("probe", "intervene", "patch"), "the run to measure (see the runs table)"),
    "n_layers": ("Layers", "int", ("train",), "default 4"),
    "d_model": ("d_model", "int", ("train",), "empty = solved to the parameter target (830K)"),
    "max_steps": ("Max steps", "int", ("train", "suite"), "step budget (suite: empty = the preset's)"),
    "max_seconds": (
        "Max seconds",
        "float",
        ("train", "suite"),
        "wall-clock training budget (suite: empty = the preset's; resume a suite with the budget "
        "it was made with, e.g. 75 for the bundled study)",
    ),
    "methods": ("Methods", "methods", ("intervene",), ""),
    "layers": ("Layers", "ints", ("intervene",), "comma-separated; empty = every layer"),
    "eval_lengths": (
        "Eval lengths",
        "ints",
        ("probe", "intervene"),
        f"comma-separated; empty = {', '.join(map(str, EVAL_LENGTHS))}",
    ),
    "eval_length": ("Eval length", "int", ("patch",), "default 40"),
    "positions": ("Positions", "ints", ("patch",), "0-based, comma-separated; empty = the middle position"),
    "n_pairs": ("Pairs", "int", ("patch",), "clean/corrupted pairs (default 128)"),
    "pca_k": ("PCA k", "int", ("intervene",), "directions removed by pca_top_k (empty = its default)"),
    "method_params": (
        "Method parameters",
        "params",
        ("intervene",),
        "method.parameter=value, comma-separated, e.g. my_edit.k=8 (empty = each method's defaults)",
    ),
    "n_probe_sequences": ("Probe sequences", "int", ("probe",), "held-out sequences per length (default 500)"),
    "suite": ("Suite", "text", ("train",), "a tag to group runs: letters, digits, . _ -"),
    "force": (
        "Train again",
        "flag",
        ("train", "suite"),
        "re-run runs already stored with these settings (default: skip them, finish the rest)",
    ),
    "rebuild_weights": (
        "Rebuild weights",
        "flag",
        ("suite",),
        "runs imported without weights: rebuild them within their recorded step budget and "
        "measure them again (unmeasured ones are rebuilt anyway)",
    ),
    "parts": (
        "Measure",
        "parts",
        ("suite",),
        "the parts measured now: probes alone first (minutes a run), then the same suite with "
        "every part adds the rest without fitting the probes again",
    ),
    "name": ("Name", "text", ("train", "suite"), "a run's: free text; a suite's: letters, digits, . _ -"),
}


def _widget(name: str, kind: str, meta: dict | None = None) -> Any:
    fid = {"type": "jf", "name": name}
    tasks = (meta or {}).get("tasks") or all_tasks()  # the API's list: plugin and file tasks too
    methods = [*(meta or {}).get("methods", []), "conv1d_removal"] if meta else METHODS
    if kind == "family":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": family_label(f), "value": f} for f in family_names()],
            value="lstm",
            clearable=False,
        )
    if kind == "families":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": family_label(f), "value": f} for f in family_names()],
            value=[],
            multi=True,
            placeholder="preset's families",
        )
    if kind == "task":
        return dcc.Dropdown(
            id=fid, options=[{"label": task_label(t), "value": t} for t in tasks], value="parity", clearable=False
        )
    if kind == "tasks":
        return dcc.Dropdown(
            id=fid,
            options=[{"label": task_label(t), "value": t} for t in tasks],
            value=[],
            multi=True,
            placeholder="preset's tasks",
        )
    if kind == "methods":
        return dcc.Checklist(
            id=fid,
            options=[{"label": method_label(m), "value": m} for m in methods if m != "conv1d_removal"],
            value=[m for m in methods if m != "conv1d_removal"],
            inline=True,
            className="check",
        )
    if kind == "parts":
        return dcc.Checklist(
            id=fid, options=list(MEASURE_PARTS), value=list(MEASURE_PARTS), inline=True, className="check"
        )
    if kind == "flag":
        return dcc.Checklist(
            id=fid, options=[{"label": "yes", "value": "on"}], value=[], inline=True, className="check"
        )
    if kind == "preset":
        return dcc.Dropdown(id=fid, options=[{"label": p, "value": p} for p in PRESETS], value="smoke", clearable=False)
    value = "0" if name == "seed" else ""
    return dcc.Input(
        id=fid,
        type="text",
        value=value,
        className="input",
        debounce=False,
        inputMode="numeric" if kind in ("int", "float", "ints") else None,  # None: the default keyboard
    )


def form_fields(kind: str, meta: dict | None = None) -> list[Any]:
    """The form's fields; ``meta`` (``GET /api/meta``) supplies the task and method choices."""
    out = []
    for name, (label, widget, kinds, help_) in FIELDS.items():
        out.append(
            html.Div(
                [
                    html.Label(label, className="field-label", htmlFor=""),
                    _widget(name, widget, meta),
                    html.Div(help_, className="field-help") if help_ else None,
                    html.Div(id={"type": "jf-msg", "name": name}, className="field-error"),
                ],
                id={"type": "jf-wrap", "name": name},
                className="field form-field",
                style=None if kind in kinds else {"display": "none"},
            )
        )
    return out


def _num(v: str, cast):
    try:
        return cast(v)
    except (TypeError, ValueError):
        return v  # the server names the bad field


def build_params(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """Form values → the params JSON for ``kind``. Text that is not a number is sent as typed,
    so the server's 422 names the field."""
    params: dict[str, Any] = {}
    for name, (_label, widget, kinds, _help) in FIELDS.items():
        if kind not in kinds:
            continue
        v = values.get(name)
        if widget == "parts":  # all ticked: the default; none: [] and the server's 422 at the field
            if isinstance(v, list) and set(v) != set(MEASURE_PARTS):
                params[name] = [p for p in MEASURE_PARTS if p in v]
            continue
        if v is None or v == "" or v == []:
            continue
        if widget == "flag":
            v = True  # ticked (an unticked box is [] and sent as nothing: the server's default)
        elif widget == "int":
            v = _num(str(v).strip(), int)
        elif widget == "float":
            v = _num(str(v).strip(), float)
        elif widget == "ints":
            parts = [p for p in re.split(r"[,\s]+", str(v).strip()) if p]
            try:
                v = [int(p) for p in parts]
            except ValueError:
                v = str(v)
        elif widget == "text":
            v = str(v)
        elif widget == "params":
            v = method_params(str(v))
        params[name] = v
    return params


def method_params(text: str) -> dict[str, dict[str, Any]] | str:
    """``"my_edit.k=8, inlp.max_rounds=3"`` → ``{"my_edit": {"k": 8}, "inlp": {"max_rounds": 3}}``
    (a value that is not a number is sent as typed); text not of that form is sent as typed, so
    the server's 422 names the field."""
    out: dict[str, dict[str, Any]] = {}
    for item in (p for p in re.split(r"[,\s]+", text.strip()) if p):
        m = re.fullmatch(r"(\w+)\.(\w+)=(\S+)", item)
        if m is None:
            return text
        value = _num(m[3], int)
        value = _num(value, float) if isinstance(value, str) else value
        out.setdefault(m[1], {})[m[2]] = m[3] if isinstance(value, float) and not math.isfinite(value) else value
    return out


def is_key(key: Any) -> bool:
    """An Idempotency-Key as the form makes them (32 hex digits)."""
    return isinstance(key, str) and re.fullmatch(r"[0-9a-f]{32}", key) is not None


def next_refresh(refresh: Any) -> int:
    """The refresh counter's next value (the store holds an int; a tampered one restarts at 1)."""
    n = parse_int(refresh)
    return 1 if n is None or not 0 <= n < INT_MAX else n + 1


def local_errors(kind: str, values: dict[str, Any]) -> dict[str, str]:
    """Messages by form field for values the browser can hold but JSON cannot carry: a number
    field holding NaN or ±inf (typed as ``nan`` / ``inf`` / ``1e999``) — refused at the field,
    as the API refuses them in a body."""
    out: dict[str, str] = {}
    for name, (_label, widget, kinds, _help) in FIELDS.items():
        v = values.get(name)
        if kind not in kinds or widget not in ("int", "float") or v is None or v == "":
            continue
        try:
            number = float(str(v).strip())
        except ValueError:
            continue  # not a number at all: the server's 422 names it
        if not math.isfinite(number):
            out[name] = f"must be a finite number (got {str(v).strip()[:20]!r})"
    return out


def form_values(ids: Any, values: Any) -> dict[str, Any] | None:
    """{field name: value} from the form's pattern-matching ids and values; None when they do
    not describe this form (unknown names, lengths that differ: a tampered request)."""
    if not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
        return None
    names = [i.get("name") if isinstance(i, dict) else None for i in ids]
    known = [n for n in names if isinstance(n, str) and n in FIELDS]
    if len(known) != len(names):
        return None
    return dict(zip(known, values, strict=True))


def field_errors(detail: Any) -> tuple[dict[str, str], list[str]]:
    """A 422 ``detail`` → (messages by form field, messages that name no field)."""
    by_field: dict[str, list[str]] = {}
    other: list[str] = []
    if not isinstance(detail, list):
        return {}, [str(detail)]
    for err in detail:
        if not isinstance(err, dict):
            other.append(str(err))
            continue
        loc = [str(x) for x in err.get("loc", [])]
        msg = err.get("msg", "invalid")
        name = next((x for x in reversed(loc) if x in FIELDS), None)
        if name is None:
            other.append(f"{'.'.join(loc[1:]) or 'body'}: {msg}")
        else:
            by_field.setdefault(name, []).append(msg)
    return {k: "; ".join(v) for k, v in by_field.items()}, other


def _invalid(names: list[str], classes: list[str], messages: dict[str, str]) -> list[str]:
    """The fields' classes with ``is-invalid`` added where ``messages`` names the field."""
    return [(c + " is-invalid").strip() if messages.get(nm) else c for nm, c in zip(names, classes, strict=True)]


def submit_job(api: ApiClient, n: Any, kind: str, form: dict[str, Any], classes: list, refresh: Any, key: Any) -> tuple:
    """The Launch button's outcome: (a message per field, the fields' classes, the result line,
    the job list's refresh counter, the next Idempotency-Key) — ``no_update`` where nothing
    changes. Values JSON cannot carry are refused here; the server's 422 is placed at the fields
    it names; a job made renews the key and refreshes the list."""
    names = list(form)
    base_cls = [re.sub(r"\s*is-invalid", "", c if isinstance(c, str) else "") for c in classes]
    clear = [""] * len(names)
    if not n:
        return clear, base_cls, no_update, no_update, no_update
    if local := local_errors(kind, form):
        return (
            [local.get(nm, "") for nm in names],
            _invalid(names, base_cls, local),
            html.Div("Not launched: check the highlighted fields.", className="alert alert-danger"),
            no_update,
            no_update,
        )
    try:
        job = api.create_job(kind, build_params(kind, form), idempotency_key=key if is_key(key) else None)
    except ApiError as exc:
        if exc.status == 422:
            by_field, other = field_errors(exc.detail)
            summary = html.Div(
                ["Not launched: check the highlighted fields.", *[html.Div(o) for o in other]],
                className="alert alert-danger",
            )
            if kind in ("probe", "intervene", "patch") and WEIGHTLESS in by_field.get("run_id", ""):
                from dashboard.pages.run_actions import rebuild_offer  # the rebuild first, then this job

                summary = html.Div([summary, rebuild_offer(kind, build_params(kind, form))])
            return (
                [by_field.get(nm, "") for nm in names],
                _invalid(names, base_cls, by_field),
                summary,
                no_update,
                no_update,
            )
        return clear, base_cls, api_alert(exc), no_update, no_update
    launched = html.Div(
        [f"Job #{job['id']} ({job['kind']}) is {job['state']}."], className="alert alert-success", id="jb-launched"
    )
    return clear, base_cls, launched, next_refresh(refresh), uuid.uuid4().hex
