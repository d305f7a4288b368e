"""Suite names follow one rule (layerscope_core.suite_names) wherever a suite gets its name: the
CLI's ``suite --name``, ``POST /api/jobs`` (a suite job's ``name``, a train job's ``suite``) and a
bundle's manifest on import (tests/test_bundle_checks.py). A fresh user named a suite 'a/b': it
trained and stored, then its page's bundle link, ``PATCH`` and ``DELETE /api/suites/{name}`` were
404s and ``suite delete`` offered to write ``a/b.layerscope.zip`` into a folder that does not exist.
A name looked up (export, delete, tag, note) that breaks the rule and names no stored suite is
refused saying why; a stored one named before the rule stays reachable."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import func, select

from backend.cli import main
from dashboard.runs_table import bundle_href
from layerscope_core.registry import PRESETS
from layerscope_core.suite_names import SUITE_NAME_PATTERN, suite_name_problem
from store.models import Job, Run
from tests.cli_one_line import assert_one_line_error
from tests.conftest import seed_runs
from tests.test_cli_housekeeping import cli_env, factory  # noqa: F401  (cli_env: the fixture, shared)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BAD = [
    ("a/b", "holds '/'"),
    ("..", "starts with '.'"),
    (" paper", "holds ' '"),
    ("paper ", "holds ' '"),
    ("what?", "holds '?'"),
    ("run#2", "holds '#'"),
    ("50%", "holds '%'"),
    ("tab\there", "holds U+0009"),
    ("-x", "starts with '-'"),
    ("", "is empty"),
    ("s" * 101, "is 101 characters long"),
]


def _shipped_suites() -> set[str]:
    names = set()
    for bundle in EXAMPLES.glob("*.layerscope.zip"):
        with zipfile.ZipFile(bundle) as z:
            names.add(json.loads(z.read("manifest.json"))["suite"])
            names |= {r["suite"] for r in json.loads(z.read("tables/runs.json"))}
    return names


def test_presets_and_shipped_names_follow_the_rule_and_need_no_encoding() -> None:
    good = {*PRESETS, *_shipped_suites(), "paper-120s", "byo_model", "v1.2", "s" * 100}
    assert {"paper", "paper-steps", "paper-75s"} <= good
    for name in good:
        assert suite_name_problem(name) is None, name
        assert quote(name, safe="") == name  # a URL path segment, a query value and a file name as it stands
    assert SUITE_NAME_PATTERN.startswith("^") and SUITE_NAME_PATTERN.endswith("$")


@pytest.mark.parametrize(("name", "why"), BAD)
def test_a_bad_name_is_named_with_its_reason(name, why) -> None:
    problem = suite_name_problem(name)
    assert problem and problem.startswith(why) and "ASCII letters, digits, '.', '_' and '-'" in problem
    assert suite_name_problem(name + "\n" if name else "x\n")  # "$" would pass a final newline


# -- the jobs API ------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "why"), BAD)
def test_submit_refuses_a_suite_name_at_the_field(api, name, why) -> None:
    for body, loc in (
        ({"kind": "suite", "params": {"preset": "smoke", "name": name}}, ["body", "params", "name"]),
        ({"kind": "train", "params": {"family": "lstm", "task": "parity", "suite": name}}, ["body", "params", "suite"]),
    ):
        r = api.client.post("/api/jobs", json=body)
        assert r.status_code == 422, r.text
        (error,) = [e for e in r.json()["detail"] if e["loc"][-1] == loc[-1]]
        # the character or length named (a control character by the API's text rule, checked first)
        assert error["loc"][: len(loc)] == loc and why.split(" ", 1)[1] in error["msg"], error
    with api.factory() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 0
    assert not api.queue.pending_ids()


def test_the_schema_documents_the_rule(api) -> None:
    schemas = api.client.get("/api/openapi.json").json()["components"]["schemas"]
    assert schemas["SuiteParams"]["properties"]["name"]["anyOf"][0]["pattern"] == SUITE_NAME_PATTERN


# -- the suites API and the dashboard's links ---------------------------------------------------
def test_suite_routes_refuse_a_name_no_suite_can_have_and_reach_every_stored_one(api) -> None:
    seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,), suite="v1.2_run-3")
    seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), suite="old name")  # before the rule
    c = api.client
    for suite in ("v1.2_run-3", "old name"):
        assert c.get(bundle_href(suite)).status_code == 200  # the dashboard's link
        assert c.patch(f"/api/suites/{quote(suite, safe='')}", json={"tags": ["x"]}).status_code == 200
    for quoted, why in (("a%20b", "holds ' '"), ("what%3F", "holds '?'"), (".x", "starts with '.'")):
        for r in (
            c.get(f"/api/suites/{quoted}/bundle"),
            c.patch(f"/api/suites/{quoted}", json={"tags": ["x"]}),
            c.delete(f"/api/suites/{quoted}"),
        ):
            assert r.status_code == 422, (quoted, r.text)
            (error,) = r.json()["detail"]
            assert error["loc"] == ["path", "name"] and why in error["msg"], error
    assert c.get("/api/suites/nope/bundle").status_code == 404  # a name that may exist: not found
    assert c.delete(f"/api/suites/{quote('old name')}").status_code == 200
    with api.factory() as s:
        assert set(s.execute(select(Run.suite)).scalars()) == {"v1.2_run-3"}


def test_a_name_holding_a_slash_reaches_every_suite_route(api) -> None:
    """``/api/suites/a%2Fb/bundle`` was a 404 (the server decodes %2F before routing, so no
    ``{name}`` route matched): a 422 naming the rule, as for every other name it breaks; a suite
    stored under such a name before the rule is reachable like any stored one."""
    c = api.client
    for quoted, why in (("a%2Fb", "holds '/'"), ("a/b", "holds '/'"), ("a%2F..%2Fb", "holds '/'"), ("a%0Ab", "U+000A")):
        for r in (
            c.get(f"/api/suites/{quoted}/bundle"),
            c.patch(f"/api/suites/{quoted}", json={"tags": ["x"]}),
            c.delete(f"/api/suites/{quoted}"),
        ):
            assert r.status_code == 422, (quoted, r.request.method, r.text)
            (error,) = r.json()["detail"]
            assert error["loc"] == ["path", "name"] and why in error["msg"], error
    assert c.get("/api/suites/x/bundle/bundle").status_code == 422  # suite 'x/bundle'
    for r in (c.patch("/api/suites/x/bundle", json={"tags": ["x"]}), c.delete("/api/suites/x/bundle")):
        assert r.status_code == 405 and r.headers["allow"] == "GET", r.text  # the bundle's path, not a suite's
    seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), suite="old/one")  # before the rule
    assert c.get(bundle_href("old/one")).status_code == 200  # the dashboard's link: /api/suites/old%2Fone/bundle
    assert c.patch("/api/suites/old%2Fone", json={"tags": ["x"]}).json()["tags"] == ["x"]
    assert c.delete("/api/suites/old%2Fone").status_code == 200
    with api.factory() as s:
        assert not set(s.execute(select(Run.suite)).scalars())


# -- the CLI -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "why"), [b for b in BAD if b[0]])  # "" is click's own "requires an argument"
@pytest.mark.usefixtures("cli_env")
def test_suite_name_option_is_refused_in_one_line_before_anything_runs(tmp_path, name, why) -> None:
    for submit in ([], ["--submit"]):
        args = ["suite", "--preset", "smoke", "--family", "gru", "--task", "parity", "--name", name, *submit]
        line = assert_one_line_error(args, why, rc=2)
        assert "'--name'" in line
    with factory(tmp_path)() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0
        assert s.scalar(select(func.count()).select_from(Job)) == 0
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--suite", "a/b", "-o", "{tmp}/a.zip"],
        ["suite", "delete", "a/b", "--yes"],
        ["suite", "tag", "a/b", "x"],
        ["suite", "note", "a/b", "text"],
    ],
)
@pytest.mark.usefixtures("cli_env")
def test_lookups_refuse_a_name_no_suite_can_have_in_one_line(tmp_path, args) -> None:
    f = factory(tmp_path)
    seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0,), suite="a")
    assert_one_line_error([a.format(tmp=tmp_path) for a in args], "suite 'a/b': the name holds '/'")
    assert not (tmp_path / "a.zip").exists()
    with f() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 1


@pytest.mark.usefixtures("cli_env")
def test_a_suite_named_before_the_rule_stays_reachable_from_the_cli(tmp_path) -> None:
    f = factory(tmp_path)
    seed_runs(f, families=("lstm",), tasks=("parity",), seeds=(0,), suite="old name")
    bundle = tmp_path / "old.layerscope.zip"
    assert main(["suite", "tag", "old name", "kept"]) == 0
    assert main(["export", "--suite", "old name", "-o", str(bundle)]) == 0 and bundle.is_file()
    assert main(["suite", "delete", "old name", "--yes"]) == 0
    with f() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0
    assert main(["import", str(bundle)]) == 1  # the rule holds for every bundle read: its bundle is refused
