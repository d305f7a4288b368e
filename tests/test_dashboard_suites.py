"""The dashboard's aggregate pages show one suite: with none chosen they ask the API for a
concrete suite (the only one, else the one with the most recent run), never "all suites"
(docs/SCIENCE.md#suites)."""

from __future__ import annotations

from dashboard import suites
from dashboard.pages import claims, curves, reversal
from tests.conftest import find_component


class Api:
    def __init__(self, suites=("paper", "quick"), latest="quick"):
        self._suites, self._latest, self.asked = suites, latest, []

    def suites(self):
        return [{"name": n, "n_runs": 3, "imported": n == "paper"} for n in self._suites]

    def runs(self, *, limit=50, sort=None, **_):
        assert sort == "-id" and limit == 1
        return {"items": [{"id": 99, "suite": self._latest}] if self._latest else [], "total": 1}

    def _rows(self, suite):  # the API's per-suite items: one cell in each suite
        return [
            {
                "suite": s,
                "task": "parity",
                "family": "transformer",
                "eval_length": 40,
                "pretrained": None,
                "layer": 0,
                "seeds": [0, 1, 2] if s == "paper" else [0],
            }
            for s in self._suites
            if suite in (None, s)
        ]

    def curves(self, *, suite=None, **_):
        self.asked.append(("curves", suite))
        return self._rows(suite)

    def profiles(self, *, suite=None, **_):
        self.asked.append(("profiles", suite))
        return self._rows(suite)

    def all_runs(self, **_):
        return [
            {"id": i, "suite": s, "task": "parity", "family": "transformer", "pretrained": None}
            for i, s in enumerate(self._suites)
        ]

    def claims(self, suite=None):
        self.asked.append(("claims", suite))
        return []


def test_default_suite_is_the_one_with_most_runs() -> None:
    # after `make demo`: the imported study (60 runs), not the live quick suite (1 run so far)
    class Demo(Api):
        def suites(self):
            return [{"name": "paper", "n_runs": 60, "imported": True}, {"name": "quick", "n_runs": 1}]

    assert suites.default_suite(Demo(latest="quick")) == "paper"


def test_default_suite_is_the_only_or_the_latest() -> None:
    assert suites.default_suite(Api(suites=("paper",), latest=None)) == "paper"
    assert suites.default_suite(Api(latest="quick")) == "quick"
    assert suites.default_suite(Api(latest="paper")) == "paper"
    assert suites.default_suite(Api(suites=())) is None
    assert suites.suite_placeholder(Api()) == "quick (shown by default)"


def test_pages_show_one_suite_when_none_is_chosen() -> None:
    api = Api()
    state = reversal.SPEC.decode("", None)
    assert state["suite"] is None
    for rows in (
        reversal.profiles(api, state),
        reversal.curves(api, state),
        curves.curve_rows(api, curves.SPEC.decode("", None)),
        curves.behaviour_runs(api, curves.SPEC.decode("", None)),
    ):
        assert [r["suite"] for r in rows] == ["quick"]
    reversal.claim_3_verdict(api, state)  # /api/claims refuses mixed suites: the page names one
    assert api.asked[-1] == ("claims", "quick")
    assert [r["suite"] for r in reversal.profiles(api, {**state, "suite": "paper"})] == ["paper"]  # a chosen one kept
    assert api.asked[-1] == ("profiles", "paper")


def test_claims_page_placeholder_names_the_default_suite() -> None:
    page = claims.layout(search="", base=None, embed=False, api=Api(), path_for=lambda p: p)

    assert find_component(page, "cl-suite").placeholder == "quick (shown by default)"


def test_suite_label_counts_one_run_in_the_singular() -> None:
    from dashboard.suites import suite_label

    assert suite_label({"name": "quick", "n_runs": 1}) == "quick — made here (1 run)"
    assert suite_label({"name": "quick", "n_runs": 2, "imported": True}) == "quick — imported (2 runs)"


def test_claim_numbers_show_an_empty_table_as_none() -> None:
    from dashboard.pages.claims import render_numbers

    out = render_numbers({"cells": [], "runs left out": {}, "n": 3})
    dds = [d for dl in out for d in dl.children if type(d).__name__ == "Dd"]
    assert [d.children for d in dds].count("none") == 2


def test_a_page_asks_for_the_suites_once_per_render() -> None:
    """The suite picker, its placeholder, the default suite and the partial-study banner read one
    ``GET /api/suites`` per request (dashboard.suites); outside a request every call asks again."""
    from flask import Flask

    from dashboard import suites as service
    from dashboard.pages import patching, probe_causal, runs
    from tests.test_dashboard_pages import FakeApi

    class Counting(FakeApi):
        def __init__(self):
            super().__init__()
            self.n_suites = 0

        def suites(self):
            self.n_suites += 1
            return super().suites()

        def claims(self, suite=None):
            return []

    server = Flask(__name__)
    for page in (claims, curves, reversal, patching, probe_causal, runs):
        api = Counting()
        with server.test_request_context("/"):
            page.layout(search="", base=None, embed=False, api=api, path_for=lambda p: p)
        assert api.n_suites == 1, f"{page.__name__}: {api.n_suites} GET /api/suites in one render"
    api = Counting()
    with server.test_request_context("/"):
        assert service.default_suite(api) == service.default_suite(api) == "paper"  # the most runs
    with server.test_request_context("/"):  # the next request asks again: never a stale list
        service.suite_options(api)
    assert api.n_suites == 2
    service.suite_placeholder(api), service.suite_options(api)
    assert api.n_suites == 4
