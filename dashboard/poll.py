"""Polls that never pile up — the one way a page refreshes itself.

A plain ``dcc.Interval`` keeps firing while its callback is still waiting for a slow API (a
worker writing, SQLite busy): Dash drops the answer of every request a newer one overtook, so
the page never updates, while the server works on several polls at once. Here

* the poll callback is registered with ``running=guard(pid)``: Dash disables the interval
  while the request is in flight and re-enables it after, so the next poll starts one
  interval after the previous answer — never two at once;
* the page keeps showing the last finished result, and ``{pid}-age`` says how old it is
  ("updated 4 s ago", "· refreshing…" while a poll is in flight, "· last refresh failed: …"
  when the API answered an error). The age ticks in the browser (a clientside callback on a
  1 s interval that never reaches the server).

A page that polls: put :func:`poll_components` and :func:`poll_status` in its layout, register
its callback with ``Input(pid, "n_intervals")`` and ``running=guard(pid)``, return
:func:`done` / :func:`failed` to ``Output(f"{pid}-done", "data")`` (and ``no_update`` for its
content on an error), and call :func:`register_age` once. ``tests/test_polling.py`` checks
every ``dcc.Interval`` of every page for this.
"""

from __future__ import annotations

import time
from typing import Any

from dash import Input, Output, State, dcc, html

AGE_TICK_MS = 1000


def poll_components(pid: str, interval_ms: int) -> list[Any]:
    """The invisible parts: the poll interval, the age ticker, and two stores."""
    return [
        dcc.Interval(id=pid, interval=interval_ms, n_intervals=0),
        dcc.Interval(id=f"{pid}-tick", interval=AGE_TICK_MS, n_intervals=0),  # clientside only
        dcc.Store(id=f"{pid}-done"),  # {"ok", "error", "t"}: written by the poll callback when it finishes
        dcc.Store(id=f"{pid}-at"),  # browser time (ms) of the last good answer (clientside)
    ]


def poll_status(pid: str) -> html.Span:
    """Where the age of the shown result is written."""
    return html.Span("loading…", id=f"{pid}-age", className="poll-age", role="status")


def guard(pid: str) -> list[tuple[Output, Any, Any]]:
    """``running=`` for the poll callback: no new poll while one is pending, and say so."""
    return [(Output(pid, "disabled"), True, False), (Output(f"{pid}-age", "className"), "poll-age polling", "poll-age")]


def done() -> dict[str, Any]:
    """The poll answered: its result is on the page now."""
    return {"ok": True, "error": None, "t": time.time()}


def failed(message: str) -> dict[str, Any]:
    """The poll failed: the page keeps the last result and says why it is not newer."""
    return {"ok": False, "error": " ".join(str(message).split())[:300], "t": time.time()}


_AGE_JS = """
function(n, done, at) {
    const ctx = window.dash_clientside.callback_context;
    const fromDone = ctx.triggered.some(t => t.prop_id.endsWith('-done.data'));
    let last = at;
    if (fromDone && done && done.ok) { last = Date.now(); }
    let text;
    if (last === null || last === undefined) {
        text = (done && !done.ok) ? 'not loaded: ' + done.error : 'loading…';
    } else {
        const s = Math.max(0, Math.floor((Date.now() - last) / 1000));
        const age = s < 60 ? s + ' s' : (s < 3600 ? Math.floor(s / 60) + ' min' : Math.floor(s / 3600) + ' h');
        text = 'updated ' + age + ' ago';
        if (done && !done.ok) { text += ' · last refresh failed: ' + done.error; }
    }
    return [text, last === at ? window.dash_clientside.no_update : last];
}
"""


def register_age(app, pid: str) -> None:
    """The browser-side age display of ``pid``'s last result."""
    app.clientside_callback(
        _AGE_JS,
        Output(f"{pid}-age", "children"),
        Output(f"{pid}-at", "data"),
        Input(f"{pid}-tick", "n_intervals"),
        Input(f"{pid}-done", "data"),
        State(f"{pid}-at", "data"),
    )
