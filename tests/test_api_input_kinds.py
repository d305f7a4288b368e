"""Every kind of hostile or careless input is a 4xx naming the field, and nothing is
stored that cannot be read back. Each kind: the issue's examples plus generated ones."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from layerscope_core.json_checks import MAX_JSON_DEPTH
from store.models import Job, SavedView

HYPO = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TRAIN = {"kind": "train", "params": {"family": "gru", "task": "parity"}}
VIEW = {"title": "t", "page": "/curves", "state": {}}


def counts(api) -> tuple[int, int]:
    with api.factory() as s:
        return (
            s.execute(select(func.count()).select_from(Job)).scalar_one(),
            s.execute(select(func.count()).select_from(SavedView)).scalar_one(),
        )


def strict_json(text: str):
    """The error body must be real JSON: no NaN/Infinity, no lone surrogates."""

    def no_constant(c: str):
        raise AssertionError(f"non-JSON constant {c} in a response")

    doc = json.loads(text, parse_constant=no_constant)
    text.encode("utf-8")  # a lone surrogate would not encode
    return doc


def post_raw(api, path: str, raw: str | bytes):
    body = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return api.client.post(path, content=body, headers={"content-type": "application/json"})


def assert_422_at(api, r, loc: list) -> None:
    assert r.status_code == 422, r.text
    detail = strict_json(r.text)["detail"]
    assert loc in [d["loc"][: len(loc)] for d in detail], (loc, detail)


# ----------------------------------------------------------------------------- 1. non-finite numbers

# (path, JSON text with @ where the number goes, the loc it must be reported at)
NUMBER_SITES = [
    ("/api/jobs", '{"kind":"train","params":{"family":"gru","task":"parity","lr":@}}', ["body", "params", "lr"]),
    (
        "/api/jobs",
        '{"kind":"train","params":{"family":"gru","task":"parity","max_seconds":@}}',
        ["body", "params", "max_seconds"],
    ),
    (
        "/api/jobs",
        '{"kind":"train","params":{"family":"gru","task":"parity","weight_decay":@}}',
        ["body", "params", "weight_decay"],
    ),
    ("/api/jobs", '{"kind":"train","params":{"family":"gru","task":"parity","seed":@}}', ["body", "params", "seed"]),
    (
        "/api/jobs",
        '{"kind":"train","params":{"family":"gru","task":"parity","task_params":{"x":@}}}',
        ["body", "params", "task_params", "x"],
    ),
    (
        "/api/jobs",
        '{"kind":"train","params":{"family":"gru","task":"parity","measure":{"eval_lengths":[40,@]}}}',
        ["body", "params", "measure", "eval_lengths", 1],
    ),
    ("/api/jobs", '{"kind":"suite","params":{"preset":"smoke","seeds":[0,@]}}', ["body", "params", "seeds", 1]),
    (
        "/api/jobs",
        '{"kind":"train","params":{"family":"gru","task":"parity"},"max_attempts":@}',
        ["body", "max_attempts"],
    ),
    ("/api/views", '{"title":"t","page":"/curves","state":{"x":@}}', ["body", "state", "x"]),
    ("/api/views", '{"title":"t","page":"/curves","state":{"a":[{"b":@}]}}', ["body", "state", "a", 0, "b"]),
]
NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E999", "-2.5e308"])


@pytest.mark.parametrize("path, template, loc", NUMBER_SITES)
def test_issue_examples_non_finite(api, path, template, loc) -> None:
    before = counts(api)
    for literal in ("NaN", "Infinity", "-Infinity", "1e400"):
        assert_422_at(api, post_raw(api, path, template.replace("@", literal)), loc)
    assert counts(api) == before  # nothing stored


@HYPO
@given(site=st.sampled_from(NUMBER_SITES), literal=NON_FINITE)
def test_non_finite_anywhere_is_422(api, site, literal) -> None:
    path, template, loc = site
    before = counts(api)
    assert_422_at(api, post_raw(api, path, template.replace("@", literal)), loc)
    assert counts(api) == before


def test_the_422_handler_survives_non_finite_input(api) -> None:
    """Errors raised past the body checks (a route's own, pydantic's) never echo NaN raw."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError

    app: FastAPI = api.app

    @app.get("/api/_test_nan_echo")
    def _echo() -> None:
        raise RequestValidationError(
            [
                {
                    "type": "x",
                    "loc": ("query", "q"),
                    "msg": "bad",
                    "input": {"a": float("nan"), "b": [float("inf")], "c": "x\ud800"},
                }
            ]
        )

    r = api.client.get("/api/_test_nan_echo")
    assert r.status_code == 422
    detail = strict_json(r.text)["detail"]
    assert detail[0]["loc"] == ["query", "q"] and detail[0]["input"]["a"] == "nan"


# ----------------------------------------------------------------------------- 2. not valid Unicode

SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
STRING_SITES = [  # (path, body builder, loc)
    ("/api/views", lambda s: {**VIEW, "title": s}, ["body", "title"]),
    ("/api/views", lambda s: {**VIEW, "state": {"x": s}}, ["body", "state", "x"]),
    ("/api/views", lambda s: {**VIEW, "state": {"a": {"b": [1, s]}}}, ["body", "state", "a", "b", 1]),
    ("/api/views", lambda s: {**VIEW, "state": {s: 1}}, ["body", "state"]),
    ("/api/jobs", lambda s: {"kind": "train", "params": {**TRAIN["params"], "name": s}}, ["body", "params", "name"]),
    ("/api/jobs", lambda s: {"kind": "suite", "params": {"preset": "smoke", "name": s}}, ["body", "params", "name"]),
    (
        "/api/jobs",
        lambda s: {"kind": "train", "params": {**TRAIN["params"], "task_params": {"k": s}}},
        ["body", "params", "task_params", "k"],
    ),
    (
        "/api/jobs",
        lambda s: {"kind": "train", "params": {**TRAIN["params"], "pretrained": s}},
        ["body", "params", "pretrained"],
    ),
]


def test_issue_example_lone_surrogate_title(api) -> None:
    before = counts(api)
    assert_422_at(api, post_raw(api, "/api/views", '{"title":"a\\ud800b","page":"/curves"}'), ["body", "title"])
    # the same code point as raw (CESU-style) bytes, not a JSON escape
    assert_422_at(api, post_raw(api, "/api/views", '{"title":"a\ud800b","page":"/curves"}'), ["body", "title"])
    assert counts(api) == before


@HYPO
@given(
    site=st.sampled_from(STRING_SITES),
    head=st.text(max_size=5),
    bad=SURROGATE,
    tail=st.text(max_size=5),
    escaped=st.booleans(),
)
def test_lone_surrogates_anywhere_are_422(api, site, head, bad, tail, escaped) -> None:
    path, build, loc = site
    before = counts(api)
    text = json.dumps(build(head + bad + tail), ensure_ascii=escaped)
    assert_422_at(api, post_raw(api, path, text), loc)
    assert counts(api) == before


# ----------------------------------------------------------------------------- 3. depth


def nested(depth: int, kind: str) -> object:
    v: object = 1
    for _ in range(depth):
        v = [v] if kind == "list" else {"k": v}
    return v


def nested_text(depth: int, kind: str) -> str:
    """JSON text of ``depth`` nested lists/objects around 1 (built flat: json.dumps would recurse)."""
    return "[" * depth + "1" + "]" * depth if kind == "list" else '{"k":' * depth + "1" + "}" * depth


def view_with_x(json_text: str) -> str:
    return '{"title":"t","page":"/curves","state":{"x":' + json_text + "}}"


@pytest.mark.parametrize("depth", [300, 400, 900, 5000, 100_000])
def test_issue_examples_deep_state(api, depth) -> None:
    before = counts(api)
    for kind in ("list", "dict"):
        r = post_raw(api, "/api/views", view_with_x(nested_text(depth, kind)))
        assert_422_at(api, r, ["body", "state", "x"])
        assert str(MAX_JSON_DEPTH) in r.text
    assert counts(api) == before


@HYPO
@given(
    extra=st.integers(1, 3000), kind=st.sampled_from(["list", "dict"]), where=st.sampled_from(["state", "task_params"])
)
def test_too_deep_is_422_without_recursion(api, extra, kind, where) -> None:
    if where == "state":  # body(1) > state(2) > x's containers (3, 4, ...)
        text = view_with_x(nested_text(MAX_JSON_DEPTH - 2 + extra, kind))
        path, loc = "/api/views", ["body", "state", "x"]
    else:  # body(1) > params(2) > task_params(3) > x's containers (4, 5, ...)
        text = (
            '{"kind":"train","params":{"family":"gru","task":"parity","task_params":{"x":'
            + nested_text(MAX_JSON_DEPTH - 3 + extra, kind)
            + "}}}"
        )
        path, loc = "/api/jobs", ["body", "params", "task_params", "x"]
    before = counts(api)
    assert_422_at(api, post_raw(api, path, text), loc)
    assert counts(api) == before


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deepest_allowed_state_is_stored_and_reads_back(api, kind) -> None:
    state = {"x": nested(MAX_JSON_DEPTH - 2, kind)}  # the body and state are the first two levels
    r = api.client.post("/api/views", json={**VIEW, "state": state})
    assert r.status_code == 201, r.text
    back = api.client.get(f"/api/views/{r.json()['slug']}")
    assert back.status_code == 200 and back.json()["state"] == state


# ----------------------------------------------------------------------------- 4. control characters

CONTROL = st.one_of(st.integers(0x00, 0x1F), st.integers(0x7F, 0x9F)).map(chr)
FREE_TEXT_SITES = [
    *STRING_SITES,
    ("/api/jobs", lambda s: {"kind": "train", "params": {**TRAIN["params"], "suite": s}}, ["body", "params", "suite"]),
]


@pytest.mark.parametrize("path, build, loc", FREE_TEXT_SITES)
def test_issue_example_nul_in_names(api, path, build, loc) -> None:
    before = counts(api)
    assert_422_at(api, api.client.post(path, json=build("run\u0000one")), loc)
    assert counts(api) == before


@HYPO
@given(site=st.sampled_from(FREE_TEXT_SITES), head=st.text(max_size=5), bad=CONTROL, tail=st.text(max_size=5))
def test_control_characters_in_every_free_text_field_are_422(api, site, head, bad, tail) -> None:
    path, build, loc = site
    before = counts(api)
    assert_422_at(api, post_raw(api, path, json.dumps(build(head + bad + tail))), loc)
    assert counts(api) == before


@HYPO
@given(
    bad=CONTROL,
    path=st.sampled_from(["/api/runs", "/api/curves", "/api/profiles"]),
    param=st.sampled_from(["task", "family", "suite", "pretrained"]),
)
def test_control_characters_in_query_values_are_422(api, bad, path, param) -> None:
    r = api.client.get(path, params={param: f"a{bad}b"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["query", param], r.text


def test_plain_unicode_text_is_accepted_and_reads_back(api) -> None:
    title = "Paritä — 日本語 ✓ 🙂 <b>as typed</b>"
    r = api.client.post("/api/views", json={**VIEW, "title": title, "state": {"ключ": ["значение", 1.5, None]}})
    assert r.status_code == 201, r.text
    assert api.client.get(f"/api/views/{r.json()['slug']}").json()["title"] == title


# ----------------------------------------------------------------------------- 6. body size on every path


async def _call(mw, path: str, method: str, headers: list, chunks: list[bytes]) -> tuple[int | None, int, bool]:
    """Run ``mw`` on one request; returns (status, chunks the middleware read, app reached)."""
    read = 0
    reached = False
    status: list[int] = []

    async def receive():
        nonlocal read
        read += 1
        i = read - 1
        return {"type": "http.request", "body": chunks[i] if i < len(chunks) else b"", "more_body": i < len(chunks) - 1}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    scope = {"type": "http", "path": path, "method": method, "headers": headers}
    await mw(scope, receive, send)
    return (status[0] if status else None), read, reached


def _run(coro):
    """Run ``coro`` on a fresh event loop in its own thread: the browser tests' Playwright
    (sync API) keeps a loop running in the main thread for the whole session, where
    ``asyncio.run`` refuses to start (CI ran the browser tests first and failed here)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.mark.parametrize("path", ["/_dash-update-component", "/api/jobs", "/api/views", "/", "/curves", "/assets/x"])
def test_body_limit_answers_413_before_reading(path) -> None:
    from backend.api.middleware import BodySizeLimit

    reached: list[str] = []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    mw = BodySizeLimit(app, max_bytes=1000)
    # a declared length over the limit: 413 without reading a byte
    status, read, _ = _run(_call(mw, path, "POST", [(b"content-length", b"200000000")], [b"x" * 10]))
    assert status == 413 and read == 0 and not reached
    # a streamed (chunked) body: 413 as soon as it passes the limit, the rest never read
    status, read, _ = _run(_call(mw, path, "POST", [], [b"x" * 600] * 50))
    assert status == 413 and read == 2 and not reached
    # within the limit: the app gets it
    _run(_call(mw, path, "POST", [], [b"x" * 600]))
    assert reached == [path]


def test_dash_update_component_over_the_limit_is_413(db_factory) -> None:
    from fastapi.testclient import TestClient

    from backend.app import create_app

    settings, factory = db_factory
    app = create_app(settings.model_copy(update={"max_body_bytes": 5000}), factory, background=False)
    with TestClient(app) as c:
        r = c.post(
            "/_dash-update-component", content=b"{" + b" " * 20_000 + b"}", headers={"content-type": "application/json"}
        )
        assert r.status_code == 413 and "5000" in r.json()["detail"]
        assert c.post("/api/views", content=b" " * 20_000).status_code == 413


# ----------------------------------------------------------------------------- 8. smaller points


@pytest.mark.parametrize("field", ["families", "tasks", "seeds"])
def test_empty_suite_lists_are_422(api, field) -> None:
    before = counts(api)
    r = api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", field: []}})
    assert_422_at(api, r, ["body", "params", field])
    assert counts(api) == before


BAD_AUTH = [
    "Bearer bogus",
    "Bearer lsk_" + "A" * 43,
    "Basic dXNlcjpwdw==",
    "Bearer",
    "Bearer ",
    "bogus",
    "Bearer a b",
    "Token abc",
]


@pytest.mark.parametrize("header", BAD_AUTH)
@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/api/runs", None),
        ("GET", "/api/health", None),
        ("GET", "/api/jobs", None),
        ("POST", "/api/jobs", TRAIN),
        ("POST", "/api/views", VIEW),
        ("GET", "/api/curves", None),
    ],
)
def test_a_bad_token_is_401_even_on_loopback(api, header, method, path, body) -> None:
    assert not api.settings.listens_beyond_loopback
    before = counts(api)
    r = api.client.request(method, path, json=body, headers={"Authorization": header})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    assert counts(api) == before


def test_a_good_token_is_accepted_on_loopback(api) -> None:
    from backend.core.security import create_token, revoke_token

    with api.factory() as s:
        _, token = create_token(s, "dana")
    auth = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/api/runs", headers=auth).status_code == 200
    assert api.client.post("/api/jobs", json=TRAIN, headers=auth).status_code == 201
    with api.factory() as s:
        revoke_token(s, "dana")
    assert api.client.get("/api/runs", headers=auth).status_code == 401


def _secured(spec: dict) -> set[tuple[str, str]]:
    return {(p, m) for p, ops in spec["paths"].items() for m, op in ops.items() if op.get("security")}


@pytest.mark.parametrize(
    "host, reads, expect",
    [
        ("127.0.0.1", False, "none"),
        ("0.0.0.0", False, "writes"),
        ("127.0.0.1", True, "reads"),
        ("192.168.1.5", True, "both"),
    ],
)
def test_openapi_security_only_where_it_applies(api, host, reads, expect) -> None:
    from fastapi.testclient import TestClient

    from backend.api.main import create_app

    settings = api.settings.model_copy(update={"host": host, "require_token_for_reads": reads})
    spec = (
        TestClient(create_app(settings, api.factory, queue=api.queue, background=False)).get("/api/openapi.json").json()
    )
    secured = _secured(spec)
    writes = {(p, m) for p, ops in spec["paths"].items() for m in ops if m in ("post", "patch", "put", "delete")}
    reads_ = {(p, m) for p, ops in spec["paths"].items() for m in ops if m == "get" and p != "/api/health"}
    expected = {"none": set(), "writes": writes, "reads": reads_, "both": writes | reads_}[expect]
    assert writes and reads_ and secured == expected
    assert ("/api/health", "get") not in secured


WRONG_METHODS = [
    ("PUT", "/api/runs", "GET"),
    ("PUT", "/api/runs/1", "GET, PATCH, DELETE"),
    ("PATCH", "/api/jobs", "GET, POST"),
    ("PUT", "/api/views", "GET, POST"),
    ("PUT", "/api/views/abc", "GET, DELETE"),
    ("GET", "/api/jobs/1/cancel", "POST"),
    ("POST", "/api/health", "GET"),
    ("DELETE", "/api/curves", "GET"),
]


@pytest.mark.parametrize("dashboard", [False, True])
def test_wrong_method_is_405_with_allow(db_factory, dashboard) -> None:
    from fastapi.testclient import TestClient

    from backend.app import create_app

    settings, factory = db_factory
    with TestClient(create_app(settings, factory, background=False, dashboard=dashboard)) as c:
        for method, path, allow in WRONG_METHODS:
            r = c.request(method, path)
            assert r.status_code == 405, (method, path, r.status_code)
            assert set(r.headers["allow"].split(", ")) >= set(allow.split(", ")), (path, r.headers["allow"])
        assert c.put("/api/no-such-thing").status_code == 404


def test_swagger_ui_is_served_offline(api) -> None:
    page = api.client.get("/api/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets and all(a.startswith("/api/docs/assets/") for a in assets), assets  # nothing off-site
    for a in assets:
        r = api.client.get(a)
        assert r.status_code == 200 and len(r.content) > 100, a
    assert "openapi.json" in page.text
    csp = page.headers["content-security-policy"]
    assert "http" not in csp  # no CDN allowed in (or needed)


# ----------------------------------------------------------------------------- the examples on PostgreSQL


@pytest.mark.lab
def test_issue_examples_on_postgresql(pg_url, make_settings) -> None:
    """On PostgreSQL these were 500s (NaN/Infinity in JSONB, NUL in text, surrogates): now 422s,
    nothing stored, and a good view still round-trips."""
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker
    from worker.queue import JobQueue

    init_db(pg_url)
    settings = make_settings(db_url=pg_url)
    engine = make_engine(pg_url)
    factory = make_sessionmaker(engine)
    try:
        with TestClient(
            create_app(settings, factory, queue=JobQueue.from_settings(settings), background=False)
        ) as client:
            api = SimpleNamespace(client=client, factory=factory)
            examples = [
                (
                    "/api/jobs",
                    '{"kind":"train","params":{"family":"gru","task":"parity","lr":NaN}}',
                    ["body", "params", "lr"],
                ),
                (
                    "/api/jobs",
                    '{"kind":"train","params":{"family":"gru","task":"parity","max_seconds":Infinity}}',
                    ["body", "params", "max_seconds"],
                ),
                ("/api/views", '{"title":"t","page":"/curves","state":{"x":NaN}}', ["body", "state", "x"]),
                ("/api/views", '{"title":"a\\ud800b","page":"/curves"}', ["body", "title"]),
                ("/api/views", '{"title":"t","page":"/curves","state":{"x":"\\udfff"}}', ["body", "state", "x"]),
                ("/api/views", view_with_x(nested_text(300, "list")), ["body", "state", "x"]),
                (
                    "/api/jobs",
                    '{"kind":"train","params":{"family":"gru","task":"parity","name":"a\\u0000b"}}',
                    ["body", "params", "name"],
                ),
                (
                    "/api/jobs",
                    '{"kind":"suite","params":{"preset":"smoke","name":"a\\u0000b"}}',
                    ["body", "params", "name"],
                ),
            ]
            for path, text, loc in examples:
                assert_422_at(api, post_raw(api, path, text), loc)
            assert counts(api) == (0, 0)
            r = client.post("/api/views", json={**VIEW, "title": "ok ✓", "state": {"x": [1.5, "é"]}})
            assert r.status_code == 201
            assert client.get(f"/api/views/{r.json()['slug']}").json()["state"] == {"x": [1.5, "é"]}
    finally:
        engine.dispose()
