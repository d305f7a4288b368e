"""Polls never pile up, checked on EVERY page: each ``dcc.Interval`` that drives a
server callback is disabled by that callback's ``running=`` while it is in flight, and the page
shows the age of its last result. Intervals that only drive clientside callbacks (the age
ticker) never reach the server and need no guard. The browser side, with a slow API, is in
tests/browser/test_polling_browser.py.
"""

from __future__ import annotations

from dash import dcc, html, no_update

from dashboard.all_pages import PAGES
from dashboard.api_client import ApiError
from dashboard.app import create_dash
from dashboard.pages import jobs
from tests.test_dashboard_pages import FakeApi, walk


def path_for(p):
    return p


def _intervals_by_page() -> dict[str, tuple[list[str], set[str]]]:
    """page path → (Interval ids, every component id) of its layout."""
    out = {}
    for page in PAGES:
        body = page.layout(search="", base=None, embed=False, api=FakeApi(), path_for=path_for)
        comps = list(walk(body))
        ids = {c.id for c in comps if isinstance(getattr(c, "id", None), str)}
        out[page.path] = ([c.id for c in comps if isinstance(c, dcc.Interval)], ids)
    return out


def test_every_server_poll_is_guarded_and_shows_its_age() -> None:
    app = create_dash("http://127.0.0.1:9", client=FakeApi())
    server_callbacks = [c for c in app._callback_list if not c.get("clientside_function")]
    polled = 0
    for path, (intervals, ids) in _intervals_by_page().items():
        for iid in intervals:
            driven = [c for c in server_callbacks if {"id": iid, "property": "n_intervals"} in c["inputs"]]
            for cb in driven:
                polled += 1
                running = cb.get("running") or {}
                assert (running.get("running") or {}).get(f"{iid}.disabled") is True, (
                    f"{path}: the poll {iid} → {cb['output']} can start while one is pending: register it with "
                    f"running=dashboard.poll.guard({iid!r})"
                )
                assert (running.get("runningOff") or {}).get(f"{iid}.disabled") is False
                assert f"{iid}-done.data" in cb["output"], f"{path}: {iid} does not report its outcome"
                assert f"{iid}-age" in ids, f"{path}: no age of the last result for {iid}"
    assert polled >= 1, "no page polls? (the /jobs list does)"


def test_a_failed_poll_keeps_the_last_list_and_says_why() -> None:
    class Down(FakeApi):
        def jobs(self, **_):
            raise ApiError(503, "API not reachable at http://127.0.0.1:9: timed out")

    shown_at = 1_700_000_000_000
    body, outcome = jobs.poll_jobs(Down(), "all", shown_at, path_for)
    assert body is no_update
    assert outcome["ok"] is False and "not reachable" in outcome["error"]
    # nothing shown yet: the error is the content
    body, outcome = jobs.poll_jobs(Down(), "all", None, path_for)
    assert body is not no_update and "not reachable" in " ".join(c for c in walk(body) if isinstance(c, str))

    # a surprise (not an ApiError) does not stop the polling either
    class Broken(FakeApi):
        def jobs(self, **_):
            raise KeyError("items")

    body, outcome = jobs.poll_jobs(Broken(), "all", shown_at, path_for)
    assert body is no_update and outcome["ok"] is False and "KeyError" in outcome["error"]


def test_a_good_poll_shows_the_list() -> None:
    body, outcome = jobs.poll_jobs(FakeApi(), "active", None, path_for)
    assert outcome["ok"] is True and outcome["error"] is None
    assert any(isinstance(c, html.Table) for c in walk(body))
