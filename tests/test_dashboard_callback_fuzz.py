"""Every registered Dash callback, posted hypothesis-generated bodies: values of the wrong type,
huge integers, NaN/inf, hostile query strings, malformed request shapes. The count of answers
≥ 500 must be 0: a bad request is a 400 from ``dashboard.callback_guard``, a no-update (204), or
a page that shows the problem — never a traceback.

The dashboard talks to the real API (over the TestClient's transport) on a seeded SQLite DB."""

from __future__ import annotations

import json
import os
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dashboard.api_client import ApiClient
from dashboard.app import create_dash
from tests.conftest import seed_runs

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "nan", "inf", "-1", "0", "99999999999999999999", "1e400", "parity", "lstm", "40", "-2"]),
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=8,
)
QUERY_KEYS = [
    "page",
    "size",
    "seed",
    "run",
    "task",
    "tasks",
    "family",
    "families",
    "lengths",
    "length",
    "layer",
    "eval_length",
    "x",
    "view",
    "ci",
    "suite",
    "runs",
    "site",
    "trained",
    "kind",
    "show",
    "sort",
    "metric",
    "embed",
    "fig",
    "method",
    "baseline",
    "seeds",
    "pretrained",
    "selectivity",
]
QUERY = st.builds(
    lambda pairs, q: ("?" if q else "") + urlencode(pairs, safe=","),
    st.lists(
        st.tuples(
            st.sampled_from(QUERY_KEYS),
            st.one_of(
                st.sampled_from(
                    [
                        "99999999999999999999999",
                        "-1",
                        "0",
                        "nan",
                        "inf",
                        "-inf",
                        "1e999",
                        "",
                        "2",
                        "40,60",
                        "dyck",
                        "parity,s3",
                        "1,2,99999999999999999999",
                        "none",
                        "x",
                    ]
                ),
                st.text(max_size=8),
            ),
        ),
        max_size=6,
    ),
    st.booleans(),
)


def typed(prop: str) -> st.SearchStrategy:
    """Values of the right JSON type for ``prop`` (content hostile), or anything at all."""
    right = {
        "search": st.one_of(QUERY, st.text(max_size=20)),
        "pathname": st.sampled_from(
            ["/", "/curves", "/reversal", "/probe-vs-causal", "/patching", "/claims", "/jobs", "/v/nope", "/x"]
        ),
        "n_clicks": st.one_of(st.none(), st.integers(min_value=0), st.integers(min_value=2**63, max_value=10**30)),
        "n_intervals": st.one_of(st.none(), st.integers(min_value=0)),
        "value": st.one_of(SCALARS, st.lists(SCALARS, max_size=4)),
        "data": ANY_JSON,
        "style": st.one_of(st.none(), st.dictionaries(st.text(max_size=6), SCALARS, max_size=3)),
        "selectedRows": st.one_of(
            st.none(),
            st.lists(
                st.dictionaries(st.sampled_from(["id", "task", "family", "name"]), SCALARS, max_size=4), max_size=3
            ),
        ),
        "className": st.one_of(st.none(), st.text(max_size=10)),
    }.get(prop, ANY_JSON)
    return st.one_of(right, right, right, ANY_JSON)


def item(dec: dict) -> st.SearchStrategy:
    cid, prop = dec["id"], dec["property"]
    if cid.startswith("{"):
        pattern = json.loads(cid)
        key = next(k for k, v in pattern.items() if isinstance(v, list))

        def one(sub, value):
            sid = {**{k: v for k, v in pattern.items() if not isinstance(v, list)}, key: sub}
            return {"id": sid, "property": prop, **({"value": sid} if prop == "id" else {"value": value})}

        return st.lists(st.builds(one, st.one_of(st.integers(), st.text(max_size=8)), typed(prop)), max_size=3)
    return st.builds(lambda v: {"id": cid, "property": prop, "value": v}, typed(prop))


def prop_id(entry) -> list[str]:
    if isinstance(entry, list):
        return [json.dumps(e["id"], sort_keys=True, separators=(",", ":")) + "." + e["property"] for e in entry]
    return [f"{entry['id']}.{entry['property']}"]


def outputs_spec(cb: dict):
    """The ``outputs`` the renderer sends (pattern-matching outputs: no matching component)."""
    out = cb["output"]
    specs = [
        [] if o.to_dict()["id"].startswith("{") else o.to_dict() for o in (out if isinstance(out, list) else [out])
    ]
    return specs if isinstance(out, list) else specs[0]


def body_for(output: str, cb: dict) -> st.SearchStrategy:
    def build(inputs, state, pick):
        changed = [p for e in inputs for p in prop_id(e)]
        return {
            "output": output,
            "outputs": outputs_spec(cb),
            "inputs": inputs,
            "state": state,
            "changedPropIds": changed[pick % len(changed) :][:1] if changed else [],
        }

    return st.builds(
        build,
        st.tuples(*[item(d) for d in cb["inputs"]]).map(list),
        st.tuples(*[item(d) for d in cb.get("state", [])]).map(list),
        st.integers(0, 50),
    )


MALFORMED = st.one_of(
    ANY_JSON,
    st.fixed_dictionaries({"output": st.one_of(st.text(max_size=10), st.just("x.y"), ANY_JSON), "inputs": ANY_JSON}),
    st.just({"output": "x.y", "inputs": []}),
)


@pytest.fixture(scope="module")
def dash_client(tmp_path_factory):
    yield from dash_over_api(tmp_path_factory.mktemp("fuzz"))


def dash_over_api(tmp):
    """(Dash app, its Flask test client) over the real API on a seeded SQLite DB in ``tmp``."""
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker
    from store.settings import Settings
    from worker.queue import JobQueue

    settings = Settings(
        _env_file=None,
        home=tmp / "home",
        db_url=f"sqlite:///{tmp / 'l.db'}",
        queue_url=f"sqlite:///{tmp / 'q.db'}",
        store_dir=tmp / "store",
        cors_origins=[],
    )
    init_db(settings.resolved_db_url)
    engine = make_engine(settings.resolved_db_url)
    factory = make_sessionmaker(engine)
    seed_runs(factory)
    app = create_app(settings, factory, queue=JobQueue.from_settings(settings), background=False)
    with TestClient(app, raise_server_exceptions=False) as api_client:  # an API 500 reaches the page as an answer
        client = ApiClient("http://testserver")
        client._http = api_client  # the TestClient is an httpx.Client: the dashboard's requests reach the app
        dash_app = create_dash("http://testserver", client=client)
        yield dash_app, dash_app.server.test_client()
    engine.dispose()


def _server_callbacks():
    app = create_dash("http://127.0.0.1:9")
    return sorted(k for k, v in app.callback_map.items() if "callback" in v)


FUZZ = settings(
    max_examples=int(os.environ.get("LAYERSCOPE_FUZZ_EXAMPLES", "15")),
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("output", _server_callbacks())
def test_callback_fuzz_never_5xx(dash_client, output):
    dash_app, client = dash_client
    cb = dash_app.callback_map[output]
    failures = []

    @FUZZ
    @given(body_for(output, cb))
    def run(body):
        r = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
        if r.status_code >= 500:
            failures.append((body, r.status_code))

    run()
    assert failures == [], f"{len(failures)} answers >= 500, the first for {failures[0][0]}"


@FUZZ
@given(MALFORMED)
def test_malformed_callback_requests_are_400(dash_client, body):
    _, client = dash_client
    r = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
    assert r.status_code == 400
    assert r.get_json()["detail"].startswith("bad callback request")


def test_unknown_output_names_the_field(dash_client):
    _, client = dash_client
    r = client.post("/_dash-update-component", json={"output": "x.y", "inputs": []})
    assert r.status_code == 400
    assert "output" in r.get_json()["detail"]


def test_number_for_search_is_400(dash_client):
    _, client = dash_client
    r = client.post(
        "/_dash-update-component",
        json={
            "output": "..page.children...navbar.children...navbar.style...app-root.className..",
            "inputs": [{"id": "url", "property": "pathname", "value": "/"}],
            "state": [{"id": "url", "property": "search", "value": 7}],
            "changedPropIds": ["url.pathname"],
        },
    )
    assert r.status_code == 400
    assert "url.search" in r.get_json()["detail"]


LONG = "s" * 65_536  # the length that was a 500 (httpx refuses a URL component this long)


def _long_body(output: str, cb: dict) -> dict | None:
    """A well-formed request for ``output`` whose address (``url.search``) holds a suite and run
    ``LONG`` characters long, on /claims, and whose suite controls hold ``LONG``."""

    def value(d):
        if d["property"] == "search":
            return f"?suite={LONG}&run={LONG}"
        if d["property"] == "pathname":
            return "/claims"
        return LONG if "suite" in d["id"] and d["property"] == "value" else None

    declared = cb["inputs"] + cb.get("state", [])
    if any(d["id"].startswith("{") for d in declared) or not any(
        d["property"] == "search" or "suite" in d["id"] for d in declared
    ):
        return None
    out = cb["output"]
    specs = [o.to_dict() for o in (out if isinstance(out, list) else [out])]
    return {
        "output": output,
        "outputs": specs if isinstance(out, list) else specs[0],
        "inputs": [{"id": d["id"], "property": d["property"], "value": value(d)} for d in cb["inputs"]],
        "state": [{"id": d["id"], "property": d["property"], "value": value(d)} for d in cb.get("state", [])],
        "changedPropIds": [f"{cb['inputs'][0]['id']}.{cb['inputs'][0]['property']}"],
    }


def test_an_over_long_url_or_suite_is_a_message_not_a_500(dash_client):
    dash_app, client = dash_client
    posted = []
    for output, cb in sorted(dash_app.callback_map.items()):
        body = "callback" in cb and _long_body(output, cb)
        if not body:
            continue
        r = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
        posted.append((output, r.status_code))
        assert r.status_code < 500, (output, r.status_code)
    assert len(posted) >= 10  # the pages that read the address or a suite were all asked
    claims = next(o for o in dash_app.callback_map if o.startswith("cl-body"))
    r = client.post(
        "/_dash-update-component",
        data=json.dumps(_long_body(claims, dash_app.callback_map[claims])),
        content_type="application/json",
    )
    assert r.status_code == 200 and "a URL may hold" in r.get_data(as_text=True)
