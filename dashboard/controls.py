"""The control blocks the pages share, each written once: the task / family / seed pickers, the
suite pickers (a free-text box or a dropdown of ``GET /api/suites``), the "compare with" suite,
the eval-length picker, option rows (a non-clearable dropdown, radio items), the grid that holds
a page's controls, and the frame of a page that shows one suite's aggregates (the partial-study
banner first). Each returns a Dash component with the id it is given; the pages bind those ids
to their state (``dashboard.components.Bind``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from dashboard.api_client import ApiClient
from dashboard.components import field, page_frame
from dashboard.suites import default_suite, partial_banner, suite_options, suite_placeholder
from dashboard.theme import all_tasks, family_label, family_names, task_label


def control_grid(*fields: Any) -> html.Div:
    """A page's controls, laid out as a grid (``None`` entries are left out by Dash)."""
    return html.Div(list(fields), className="control-grid")


def _picker(
    label: str, cid: str, options: list[dict], value: Any, *, multi: bool, placeholder: str, width: str
) -> html.Div:
    extra: dict[str, Any] = {"multi": True} if multi else {}
    return field(
        label,
        dcc.Dropdown(id=cid, options=options, value=value, **extra, placeholder=placeholder),
        width=width,
    )


def task_picker(
    cid: str, value: Any, *, multi: bool = False, label: str = "Task", placeholder: str = "any task", width: str
) -> html.Div:
    """A task dropdown over every known task (plugins and file tasks too), labelled."""
    options = [{"label": task_label(t), "value": t} for t in all_tasks()]
    return _picker(label, cid, options, value, multi=multi, placeholder=placeholder, width=width)


def family_picker(
    cid: str, value: Any, *, multi: bool = False, label: str = "Family", placeholder: str = "any family", width: str
) -> html.Div:
    """A family dropdown over every registered family, labelled."""
    options = [{"label": family_label(f), "value": f} for f in family_names()]
    return _picker(label, cid, options, value, multi=multi, placeholder=placeholder, width=width)


def seed_input(cid: str, value: int | None, *, width: str) -> html.Div:
    """A seed box (a whole number ≥ 0; empty: any seed)."""
    box = dcc.Input(
        id=cid, type="number", min=0, step=1, value=value, debounce=True, placeholder="any", className="input"
    )
    return field("Seed", box, width=width)


def _suite_box(cid: str, value: str | None, placeholder: str) -> dcc.Input:
    return dcc.Input(id=cid, type="text", value=value or "", debounce=True, placeholder=placeholder, className="input")


def suite_input(api: ApiClient, cid: str, value: str | None) -> html.Div:
    """The suite typed by name; empty: the default suite, named in the placeholder."""
    return field("Suite", _suite_box(cid, value, suite_placeholder(api)), width="160px")


def compare_input(cid: str, value: str | None, *, help: str) -> html.Div:
    """A second suite typed by name, compared with the page's (``help`` says how it is shown)."""
    return field("Compare with", _suite_box(cid, value, "another suite"), width="160px", help=help)


def suite_dropdown(
    api: ApiClient,
    cid: str,
    value: str | None,
    *,
    label: str = "Suite",
    placeholder: str,
    help: str | None = None,
) -> html.Div:
    """A suite picked from ``GET /api/suites`` (the current value kept when the API is away)."""
    picker = dcc.Dropdown(
        id=cid, options=suite_options(api, value), value=value, placeholder=placeholder, clearable=True
    )
    return field(label, picker, width="300px", help=help)


def length_dropdown(cid: str, value: int, *, options: list[dict], width: str) -> html.Div:
    """One eval length of those in ``options`` (``dashboard.lengths.length_options``: the
    suite's, ``L=40 (train)``, ``L=80``, …)."""
    return choice("Eval length", cid, options, value, width=width)


def choice(
    label: str,
    cid: str,
    options: Sequence[dict] | Sequence[tuple[Any, str]],
    value: Any,
    *,
    width: str | None = None,
    help: str | None = None,
    field_id: str | None = None,
) -> html.Div:
    """A labelled dropdown that always holds one of ``options`` (dicts, or ``(value, label)`` pairs)."""
    opts = [o if isinstance(o, dict) else {"label": o[1], "value": o[0]} for o in options]
    return field(
        label, dcc.Dropdown(id=cid, options=opts, value=value, clearable=False), width=width, help=help, id=field_id
    )


def radio(cid: str, options: Sequence[tuple[Any, str]], value: Any, *, className: str = "radio") -> dcc.RadioItems:
    """Inline radio items from ``(value, label)`` pairs."""
    return dcc.RadioItems(
        id=cid,
        options=[{"label": label, "value": v} for v, label in options],
        value=value,
        inline=True,
        className=className,
    )


def suite_page(
    api: ApiClient,
    suite: str | None,
    *,
    key: str,
    title: str,
    subtitle: str,
    controls: Any,
    body: list[Any],
    embed: bool,
    loc_id: str,
    base: dict | None,
) -> html.Div:
    """A page over one suite's aggregates: ``page_frame`` with the partial-study banner for
    ``suite`` (the default suite when none is chosen) first in its body."""
    return page_frame(
        title=title,
        subtitle=subtitle,
        page_key=key,
        controls=controls,
        body=[partial_banner(api, suite or default_suite(api), page_key=key), *body],
        embed=embed,
        loc_id=loc_id,
        base=base,
    )
