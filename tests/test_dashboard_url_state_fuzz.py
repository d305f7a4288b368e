"""URL state: every page's query string is parsed into its fields' types and ranges
(huge integers clamped, NaN / inf / wrong types dropped), every page renders for hostile query
strings and its layout encodes as JSON (a 20-digit page number once broke the encoder: a blank
page with no nav bar); the runs grid clamps a page past the end; the jobs form refuses NaN / inf
at the field."""

from __future__ import annotations

from urllib.parse import urlencode

from dash._utils import to_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.all_pages import PAGES
from dashboard.api_client import ApiError
from dashboard.app import render_page
from dashboard.pages import jobs, runs
from dashboard.state import INT_MAX, INT_MIN, F, parse_int
from tests.test_dashboard_pages import FakeApi

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "99999999999999999999999",
            "-99999999999999999999",
            "-1",
            "0",
            "nan",
            "inf",
            "-inf",
            "1e999",
            "",
            "2.5",
            "none",
            "1,2,99999999999999999999",
            "x",
            "9" * 5000,
        ]
    ),
    st.integers().map(str),
    st.text(max_size=10),
)


def queries(page):
    keys = [f.name for f in page_spec(page).fields] + ["embed", "fig", "eval_length", "run_id"]
    return st.lists(st.tuples(st.sampled_from(keys), HOSTILE), max_size=6).map(
        lambda pairs: "?" + urlencode(pairs, safe=",")
    )


def page_spec(page):
    import importlib

    return importlib.import_module(page.register.__module__).SPEC


# the pages that keep state in their URL (/views lists saved views and has none)
STATEFUL_PAGES = [p for p in PAGES if hasattr(__import__(p.register.__module__, fromlist=["SPEC"]), "SPEC")]


def in_range(f: F, v) -> bool:
    if f.kind == "int":
        return v is None or (isinstance(v, int) and not isinstance(v, bool) and f.lo <= v <= f.hi)
    if f.kind == "list_int":
        return isinstance(v, list) and all(isinstance(x, int) and f.lo <= x <= f.hi for x in v)
    if f.kind == "bool":
        return isinstance(v, bool)
    if f.kind == "str":
        return v is None or (isinstance(v, str) and (f.allowed() is None or v in f.allowed() or v == f.default))
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


FUZZ = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.data())
def test_every_field_is_parsed_into_its_range(data) -> None:
    for page in STATEFUL_PAGES:
        spec = page_spec(page)
        state = spec.decode(data.draw(queries(page)))
        for f in spec.fields:
            assert in_range(f, state[f.name]), (page.path, f.name, state[f.name])


@FUZZ
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )
)
def test_saved_view_values_of_any_json_type_parse(raw) -> None:
    for page in STATEFUL_PAGES:
        spec = page_spec(page)
        state = spec.from_dict({f.name: raw for f in spec.fields}, base=raw)  # base need not be a dict
        assert all(in_range(f, state[f.name]) for f in spec.fields)


def test_parse_int_refuses_non_integers() -> None:
    assert parse_int("12") == 12 and parse_int(3.0) == 3
    for bad in ("nan", "inf", "1e999", "2.5", float("nan"), float("inf"), True, [1], {"a": 1}, None, "9" * 5000):
        assert parse_int(bad) is None, bad
    f = F("page", "int", 1, lo=1)
    assert f.parse("99999999999999999999999") == INT_MAX and f.parse("-5") == 1 and f.parse("nan") == 1
    assert F("x", "int", None).parse(str(-(10**30))) == INT_MIN


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_page_renders_and_encodes_for_hostile_queries(data) -> None:
    api = FakeApi()
    for page in STATEFUL_PAGES:
        search = data.draw(queries(page))
        body, active = render_page(page.path, search, api=api, path_for=lambda p: p)
        assert active == page.path
        to_json(body)  # raises on an integer past 64 bits or another value JSON cannot carry


def test_issue_urls_render() -> None:
    api = FakeApi()
    for path, search in (
        ("/curves", "?lengths=99999999999999999999&tasks=dyck"),
        ("/", "?page=99999999999999999999999&size=0"),
        ("/", "?page=-1&size=-5"),
    ):
        body, _ = render_page(path, search, api=api, path_for=lambda p: p)
        to_json(body)
    state = runs.SPEC.decode("?page=99999999999999999999999&size=0")
    assert state["page"] == INT_MAX and state["size"] == 50


def test_a_page_past_the_end_shows_the_last_page() -> None:
    api = FakeApi()  # 45 runs
    state = runs.SPEC.decode("?page=2&size=50")
    page, p = runs.fetch_clamped_page(api, state)
    assert p == 1 and len(page["items"]) == 45 and page["offset"] == 0
    state = runs.SPEC.decode("?page=99999999999999999999999&size=25")
    page, p = runs.fetch_clamped_page(api, state)
    assert p == 2 and [r["id"] for r in page["items"]] == list(range(26, 46))


class OffsetCheckingApi(FakeApi):
    """The API's own bound: ``offset`` above 2**31 - 1 is a 422."""

    def runs(self, *, offset=0, **kw):
        if offset > INT_MAX:
            raise ApiError(422, "offset: Input should be less than or equal to 2147483647")
        return super().runs(offset=offset, **kw)


def test_a_huge_page_number_shows_the_last_page_not_an_api_error() -> None:
    api = OffsetCheckingApi()  # 45 runs
    for search in ("?page=50000000", "?page=99999999999999999999", "?page=50000000&size=200"):
        page, p = runs.fetch_clamped_page(api, runs.SPEC.decode(search))
        assert p == 1 and len(page["items"]) == 45 and page["offset"] == 0
    page, p = runs.fetch_clamped_page(api, runs.SPEC.decode("?page=50000000&size=25"))
    assert p == 2 and [r["id"] for r in page["items"]] == list(range(26, 46))


def test_jobs_form_refuses_non_finite_numbers_at_the_field() -> None:
    for typed in ("nan", "inf", "-inf", "1e999", "NaN"):
        errors = jobs.local_errors("train", {"max_seconds": typed, "max_steps": "10"})
        assert set(errors) == {"max_seconds"} and "finite" in errors["max_seconds"]
    assert jobs.local_errors("train", {"max_seconds": "30", "max_steps": "abc"}) == {}
    assert jobs.next_refresh("x") == 1 and jobs.next_refresh(3) == 4 and jobs.next_refresh(10**30) == 1
    assert jobs.form_values([{"name": "nope"}], [1]) is None
