"""The suite-selection service of the dashboard: which suites exist (``GET /api/suites``), the
suite a page shows when none is chosen, the suite picker's options and placeholder, and the
banner over a partial study's aggregates.

One ``GET /api/suites`` per render: :func:`suite_list` asks the API once per HTTP request (a
page's layout, one callback) and every helper here reads that answer, so a page that fills its
picker, its placeholder, its default suite and its banner asks once. Outside a request (tests,
notebooks) each call asks again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dash import Dash, Input, Output, html
from flask import g, has_request_context

from dashboard.api_client import ApiClient, ApiError

log = logging.getLogger(__name__)


def _per_request(name: str, api: ApiClient, make: Callable[[], Any]) -> Any:
    """``make()``, once per HTTP request and client (kept on ``flask.g``); an error is not kept."""
    if not has_request_context():
        return make()
    memo = g.setdefault("layerscope_suites", {})
    key = (name, id(api))
    if key not in memo:
        memo[key] = make()
    return memo[key]


def suite_list(api: ApiClient) -> list[dict[str, Any]]:
    """``GET /api/suites`` (read once per request: the list is shared, do not change it).

    Raises:
        ApiError: the API could not answer (not kept: the next call asks again).
    """
    return _per_request("suites", api, api.suites)


# -- partial studies (GET /api/suites: preset_runs, runs_remaining, partial, partial_why) ----------
def partial_counts(suite: dict[str, Any]) -> tuple[int, int] | None:
    """(measured, out of) for a partial suite: against the preset when it is one, else its runs."""
    if not suite.get("partial"):
        return None
    if suite.get("preset_runs") is not None:
        return suite["preset_runs"] - (suite.get("runs_remaining") or 0), suite["preset_runs"]
    return suite.get("n_measured", 0), suite.get("n_runs", 0)


def trained_of_measured(suite: dict[str, Any]) -> str:
    """`` (20 of them trained)``: how many measured runs learned their task (only those reach a
    verdict); empty when the API did not say."""
    n = suite.get("n_trained_measured")
    return "" if n is None else f" ({n} of them trained)"


def _partial_sentence(suite: dict[str, Any], *, named: bool) -> str:
    measured, total = partial_counts(suite) or (0, 0)
    head = f"Partial study {suite['name']!r}" if named else "Partial study"
    if suite.get("preset_runs") is not None:
        text = (
            f"{head}: {measured} of the preset's {total} runs measured{trained_of_measured(suite)}, "
            f"{suite.get('runs_remaining') or 0} remain"
        )
    else:
        text = f"{head}: {measured} of its {total} stored runs measured{trained_of_measured(suite)}"
    return text + (f" ({_first_sentence(suite['partial_why'])})" if suite.get("partial_why") else "")


def _first_sentence(why: str, limit: int = 160) -> str:
    """The banner stays one line: the reason's first sentence, cut at ``limit`` (full text on hover)."""
    first = why.split(". ")[0].split(": ")[0].rstrip(".")
    return first if len(first) <= limit and first == why.rstrip(".") else first[:limit].rstrip() + "…"


def partial_notice(suites: list[dict[str, Any]], suite: str | None) -> html.Div | None:
    """The one-line banner over a suite's aggregates when that suite is a partial study; with no
    suite chosen (all suites shown), one line per partial suite among them. None: nothing partial."""
    if suite:
        row = next((x for x in suites if x.get("name") == suite), None)
        lines = [_partial_sentence(row, named=False)] if row and row.get("partial") else []
    else:
        lines = [_partial_sentence(x, named=True) + " — included in all suites" for x in suites if x.get("partial")]
    if not lines:
        return None
    whys = [
        x["partial_why"]
        for x in suites
        if x.get("partial") and x.get("partial_why") and (not suite or x.get("name") == suite)
    ]
    return html.Div(
        lines[0] if len(lines) == 1 else " · ".join(lines),
        className="alert alert-warning partial-study",
        role="status",
        title=" | ".join(whys) or None,
    )


def _suites_or_none(api: ApiClient) -> list[dict[str, Any]]:
    try:
        return suite_list(api)
    except (ApiError, OSError) as exc:  # the banner is a hint: a page still renders without it
        log.warning("suites not loaded for the partial-study banner: %s", exc)
        return []


def partial_banner(api: ApiClient, suite: str | None, *, page_key: str) -> html.Div:
    """The banner's slot (id ``<page_key>-partial``), filled for ``suite`` now; kept current by
    :func:`register_partial_banner`. Every page that shows a suite's aggregates puts it first."""
    return html.Div(partial_notice(_suites_or_none(api), suite or None), id=f"{page_key}-partial")


def register_partial_banner(
    app: Dash,
    api: ApiClient,
    *,
    page_key: str,
    suite_cid: str,
    default: Callable[[ApiClient], str | None] | None = None,
) -> None:
    """Refill the banner when the page's suite control (``suite_cid``) changes; with no suite
    chosen, the banner is about ``default(api)`` — the suite the page then shows — when given.
    (A page with no suite control shows every suite's runs: its banner names the partial ones,
    set at layout.)"""

    @app.callback(Output(f"{page_key}-partial", "children"), Input(suite_cid, "value"))
    def _banner(suite):
        shown = suite or (default(api) if default else None)
        return partial_notice(_suites_or_none(api), shown or None)


def suite_label(suite: dict) -> str:
    """``paper — imported (60 runs)`` / ``quick — made here (15 runs)``: which suite came from a
    results bundle and which this installation ran; ``smoke — queued, no run stored yet``."""
    if suite.get("queued"):
        return f"{suite['name']} — queued, no run stored yet"
    origin = "imported" if suite.get("imported") else "made here"
    counts = partial_counts(suite)
    if counts is not None:  # ``paper — imported, partial: 23 of 60 measured (17 of them trained)``
        measured, total = counts
        return (
            f"{suite['name']} — {origin}, partial: {measured} of {total}"
            f"{'' if suite.get('preset_runs') is not None else ' runs'} measured{trained_of_measured(suite)}"
        )
    n = suite.get("n_runs", 0)
    return f"{suite['name']} — {origin} ({n} run{'' if n == 1 else 's'})"


def suite_options(api: ApiClient, current: str | None = None) -> list[dict]:
    """The suite picker's options from ``GET /api/suites`` (the current value kept even if the
    API cannot be reached, so a shared link still filters)."""
    try:
        suites = suite_list(api)
    except ApiError:
        suites = []
    options = [
        {
            "label": suite_label(x) + (f" · {', '.join(x['tags'])}" if x.get("tags") else ""),
            "value": x["name"],
            **({"title": x["notes"]} if x.get("notes") else {}),
        }
        for x in suites
    ]  # its tags; notes on hover
    if current and current not in {o["value"] for o in options}:
        options.append({"label": current, "value": current})
    return options


def default_suite(api: ApiClient) -> str | None:
    """The suite a page shows when none is chosen: the only one, else the one with the most runs
    (after ``make demo``: the imported study, not the live quick suite beside it), ties broken by
    the most recently stored run. Runs of different suites are never pooled
    (docs/SCIENCE.md#suites). None when no suite exists or the API cannot say."""
    return _per_request("default", api, lambda: _default_suite(api))


def _default_suite(api: ApiClient) -> str | None:
    try:
        suites = [(x["name"], int(x.get("n_runs") or 0)) for x in suite_list(api)]
    except (ApiError, AttributeError, KeyError, TypeError, ValueError):
        return None
    if len(suites) <= 1:
        return suites[0][0] if suites else None
    most = max(n for _, n in suites)
    names = [name for name, n in suites if n == most]
    if len(names) == 1:
        return names[0]
    try:
        latest = api.runs(limit=1, sort="-id", suite=names)["items"]
    except (ApiError, AttributeError, KeyError, TypeError):
        latest = []
    suite = latest[0].get("suite") if latest else None
    return suite if suite in names else names[0]


def with_suite(api: ApiClient, state: dict) -> dict:
    """``state`` with its suite filled in by :func:`default_suite` when none is chosen."""
    return state if state.get("suite") else {**state, "suite": default_suite(api)}


def one_suite(api: ApiClient, rows: list[dict], chosen: str | None) -> list[dict]:
    """``rows`` (aggregate items or runs, each naming its ``suite``) of one suite: as they are when
    a suite was chosen; else those of :func:`default_suite` — the suite the picker names as shown
    by default, even when it has none of these rows (then the page says why it is empty rather than
    drawing another suite under its name). Only when no default can be had (the API cannot say)
    the rows of one suite present. Pages never show runs of different suites together."""
    if chosen:
        return rows
    pick = default_suite(api)
    present = {r.get("suite") for r in rows if "suite" in r}
    if pick is None:
        if len(present) <= 1:
            return rows
        pick = sorted(present, key=lambda x: x or "")[0]
    return [r for r in rows if r.get("suite", pick) == pick]


def suite_placeholder(api: ApiClient) -> str:
    """A suite control's placeholder: the suite shown when the control is empty."""
    suite = default_suite(api)
    return f"{suite} (shown by default)" if suite else "no suite"
