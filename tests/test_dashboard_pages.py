"""Pages and callbacks as plain functions, against a fake API (no server, no browser)."""

from __future__ import annotations

from typing import Any

import pytest
from dash import dcc, html, no_update

from dashboard import suites
from dashboard.all_pages import PAGES
from dashboard.api_client import ApiError
from dashboard.app import create_dash, render_page
from dashboard.components import Bind, sync_step
from dashboard.pages import claims, curves, jobs, probe_causal, reversal, runs
from layerscope_core.csv_cells import csv_safe
from tests.dashboard_data import FAMILIES, curve_rows, intervention_rows, patching_rows, probe_rows, profile_rows

XSS = "<script>alert(1)</script>"


class FakeApi:
    """The ApiClient surface the pages use, backed by tests/dashboard_data."""

    def __init__(self):
        self.runs_list = [
            {
                "id": i + 1,
                "name": XSS if i == 2 else f"run-{i + 1}",
                "family": f,
                "task": t,
                "seed": s,
                "n_layers": 4,
                "d_model": 128,
                "n_params": 830_000,
                "steps": 100,
                "suite": "synthetic",
                "pretrained": None,
                "config_hash": "abc123",
                "created_at": "2026-06-01T09:00:00Z",
                "behaviour": {"40": {"token_acc": 0.9, "last_acc": 0.88}, "120": {"token_acc": 0.7}},
            }
            for i, (t, f, s) in enumerate(
                (t, f, s) for t in ("parity", "s3", "dyck") for f in FAMILIES for s in (0, 1, 2)
            )
        ]
        self.created: list[tuple] = []

    def runs(self, *, task=None, family=None, seed=None, suite=None, limit=50, offset=0, **_):
        def ok(r):
            return (
                (not task or r["task"] in ([task] if isinstance(task, str) else task))
                and (not family or r["family"] in ([family] if isinstance(family, str) else family))
                and (seed is None or r["seed"] == seed)
            )

        items = [r for r in self.runs_list if ok(r)]
        return {"items": items[offset : offset + limit], "total": len(items), "limit": limit, "offset": offset}

    def all_runs(self, limit=500, **f):
        return self.runs(limit=limit, **f)["items"]

    def suites(self):
        return [
            {"name": "synthetic", "n_runs": len(self.runs_list), "n_complete": 0, "imported": False},
            {"name": "paper", "n_runs": 60, "n_complete": 60, "imported": True},
        ]

    def run(self, run_id):
        for r in self.runs_list:
            if r["id"] == run_id:
                return {
                    **r,
                    "loss_curve": [
                        {"step": 0, "loss": 1.0, "heldout_token_acc": 0.5},
                        {"step": 50, "loss": 0.1, "heldout_token_acc": 0.99},
                    ],
                }
        raise ApiError(404, f"run {run_id} not found")

    def curves(self, **_):
        return curve_rows(lengths=(40, 120))

    def profiles(self, **_):
        return profile_rows()

    def run_probes(self, run_id, eval_length=None):
        return probe_rows(run_id)

    def meta(self):
        from layerscope_core.registry import meta

        return meta()

    def run_weights(self, run_id):
        return [
            {
                "kind": "probe",
                "method": "",
                "layer": -1,
                "eval_length": 40,
                "artifact_id": "ab" * 32,
                "config_hash": "c" * 64,
            }
        ]

    def run_interventions(self, run_id, eval_length=None, method=None):
        return intervention_rows(run_id)

    def run_patching(self, run_id, eval_length=None, site=None):
        return [{**r, "site": site or "resid_post"} for r in patching_rows(run_id)]

    def export(self, resource, fmt="json", **f):
        runs_ = self.all_runs()
        if resource == "probes":
            return [
                {
                    **p,
                    "family": r["family"],
                    "task": r["task"],
                    "seed": r["seed"],
                    "n_layers": 4,
                    "depth": (p["layer"] + 1) / 4,
                    "run_name": r["name"],
                    "pretrained": None,
                }
                for r in runs_
                for p in probe_rows(r["id"])
            ]
        if resource == "interventions":
            return [
                {**i}
                for r in runs_
                for i in intervention_rows(r["id"], damaging=1 if r["family"] == "transformer" else 3)
            ]
        raise AssertionError(resource)

    def claims(self, suite=None):
        return [
            {
                "id": 1,
                "title": "Claim <b>one</b>",
                "verdict": "supported",
                "detail": "3/3 cells",
                "numbers": {
                    "match_fraction": 1.0,
                    "test": {"p": 0.0004, "diff": 0.6},
                    "gap": {"mean": 0.4, "lo": 0.3, "hi": 0.5, "n": 5},
                    "cells": [
                        {
                            "task": "parity",
                            "family": "lstm",
                            "matches": True,
                            "by_length": {"40": {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 3}},
                        }
                    ],
                },
                "views": ["/curves?task=parity&eval_length=40", "/reversal"],
            },
            {"id": 5, "title": "Conv1D", "verdict": "not enough data", "detail": "", "numbers": {}, "views": []},
        ]

    def view(self, slug):
        if slug == "xss":
            return {"slug": "xss", "title": XSS, "page": "/curves", "state": {"x": "depth", "tasks": ["dyck"]}}
        raise ApiError(404, f"view {slug} not found")

    def jobs(self, **_):
        return {
            "items": [
                {
                    "id": 1,
                    "kind": "train",
                    "state": "running",
                    "progress": 0.4,
                    "message": XSS,
                    "params": {"name": XSS},
                    "attempt": 1,
                    "max_attempts": 3,
                    "run_id": None,
                    "created_at": "2026-06-01T09:00:00+00:00",
                    "cancel_requested": False,
                }
            ],
            "total": 1,
            "limit": 50,
            "offset": 0,
        }

    def create_job(self, kind, params, idempotency_key=None):
        self.created.append((kind, params))
        return {"id": 9, "kind": kind, "state": "queued"}


def walk(component):
    """Every component and string in a Dash layout tree."""
    yield component
    children = getattr(component, "children", None)
    if children is None:
        return
    for child in children if isinstance(children, (list, tuple)) else [children]:
        yield from walk(child)


def texts(component) -> list[str]:
    return [c for c in walk(component) if isinstance(c, str)]


def no_raw_html(component):
    for c in walk(component):
        assert not getattr(c, "dangerously_allow_html", False)
        assert not isinstance(c, dcc.Markdown) or not getattr(c, "dangerously_allow_html", False)


@pytest.fixture
def api():
    return FakeApi()


def path_for(p):
    return p


def test_create_dash_registers_every_page():
    app = create_dash("http://127.0.0.1:9")
    assert {p.path for p in PAGES} == {
        "/",
        "/curves",
        "/reversal",
        "/probe-vs-causal",
        "/patching",
        "/claims",
        "/jobs",
        "/views",
    }
    assert len(app.callback_map) > 30
    assert app.config.requests_pathname_prefix == "/"
    prefixed = create_dash("http://127.0.0.1:9", "/dash/")
    assert prefixed.config.requests_pathname_prefix == "/dash/"


@pytest.mark.parametrize("path", ["/", "/curves", "/reversal", "/probe-vs-causal", "/patching", "/claims", "/jobs"])
def test_every_page_renders_and_embeds(api, path):
    body, active = render_page(path, "", api=api, path_for=path_for)
    assert active == path
    no_raw_html(body)
    embedded, _ = render_page(path, "?embed=1", api=api, path_for=path_for)
    assert "page-embed" in embedded.className


def test_embed_can_pick_one_figure(api):
    body, _ = render_page("/reversal", "?embed=1&fig=rv-s3", api=api, path_for=path_for)
    cards = {c.id: getattr(c, "style", None) for c in walk(body) if str(getattr(c, "id", "")).endswith("-card")}
    assert cards == {"rv-matrix-card": {"display": "none"}, "rv-s3-card": None}


def test_claim_table_csv_rows(api):
    rows = claims.claim_rows_csv(api.claims(), "1", "cells")
    assert rows == [{"task": "parity", "family": "lstm", "matches": True, "by_length 40": "1 [1, 1] (n=3)"}]
    assert claims.claim_rows_csv(api.claims(), "9", "cells") == []


def test_unknown_page_and_view(api):
    body, active = render_page("/nope", "", api=api, path_for=path_for)
    assert active == "" and "Not found" in texts(body)
    body, _ = render_page("/v/missing", "", api=api, path_for=path_for)
    assert any("No saved view" in t for t in texts(body))


def test_saved_view_opens_its_page_with_its_state_and_escapes_the_title(api):
    body, active = render_page("/v/xss", "", api=api, path_for=path_for)
    assert active == "/curves"
    assert XSS in texts(body)  # a text node: React escapes it
    no_raw_html(body)
    x = next(c for c in walk(body) if getattr(c, "id", None) == "cv-x")
    assert x.value == "depth"
    base = next(c for c in walk(body) if getattr(c, "id", None) == "curves-base")
    assert base.data["tasks"] == ["dyck"]


def test_url_sync_rule():
    spec, binds = curves.SPEC, curves.BINDS
    values = [b.to_control(v) for b, v in zip(binds, [curves.SPEC.defaults()[b.name] for b in binds], strict=True)]
    # a control change writes the query string
    changed = list(values)
    changed[[b.name for b in binds].index("x")] = "depth"
    out = sync_step(spec=spec, binds=binds, trigger="cv-x", loc_id="cv-loc", search="", values=changed, base={})
    assert all(v is no_update for v in out[:-1]) and "x=depth" in out[-1]
    # the query string (back button) sets the controls
    out = sync_step(
        spec=spec,
        binds=binds,
        trigger="cv-loc",
        loc_id="cv-loc",
        search="?x=depth&lengths=40,120",
        values=values,
        base={},
    )
    assert out[[b.name for b in binds].index("x")] == "depth"
    assert out[[b.name for b in binds].index("lengths")] == [40, 120]
    assert out[-1] is no_update
    # embed survives a control change
    out = sync_step(spec=spec, binds=binds, trigger="cv-x", loc_id="cv-loc", search="?embed=1", values=changed, base={})
    assert out[-1].endswith("&embed=1")


def test_runs_filter_change_resets_the_page():
    binds = runs.BINDS
    vals = [[], [], None, None, 4, 50, "id", None, "include", 7]  # task … sort, q (search), controls, run
    vals[0] = ["parity"]
    out = sync_step(
        spec=runs.SPEC,
        binds=binds,
        trigger="rn-task",
        loc_id="rn-loc",
        search="?page=4",
        values=vals,
        base={},
        reset={"page": 1, "run": None},
    )
    assert out[4] == 1 and "page=1" in out[-1] and "task=parity" in out[-1]
    out = sync_step(
        spec=runs.SPEC,
        binds=binds,
        trigger="rn-page",
        loc_id="rn-loc",
        search="",
        values=vals,
        base={},
        reset={"page": 1, "run": None},
    )
    assert out[4] is no_update and "page=4" in out[-1]
    vals[6] = "-seed"  # a new order starts at page 1 too
    out = sync_step(
        spec=runs.SPEC,
        binds=binds,
        trigger="rn-sort",
        loc_id="rn-loc",
        search="?page=4",
        values=vals,
        base={},
        reset={"page": 1, "run": None},
    )
    assert out[4] == 1 and "sort=-seed" in out[-1]


def test_runs_sort_is_sent_to_the_server():
    class Recorder:
        def runs(self, **kw):
            self.kw = kw
            return {"items": [], "total": 0, "limit": kw["limit"], "offset": kw["offset"]}

    api = Recorder()
    runs.fetch_page(api, runs.SPEC.decode("?sort=-n_params&page=2&size=25", {}))
    assert (api.kw["sort"], api.kw["offset"], api.kw["limit"]) == ("-n_params", 25, 25)
    assert runs.SPEC.decode("?sort=loss_curve", {})["sort"] == "id"  # not a sortable column: the default
    from typing import get_args

    from backend.api.query_params import RunSort

    assert {v for v, _ in runs.SORTS} == set(get_args(RunSort))  # every order the API offers, and only those


def test_curves_figures_for_every_view(api):
    api.suites = lambda: FakeApi.suites(api)[:1]  # the default suite is the one whose rows these are
    state = curves.SPEC.defaults()
    fig, _ = curves.build_figure(api, state)
    assert len({t.meta["family"] for t in fig.data if (t.meta or {}).get("kind") == "mean"}) == 5
    fig, _ = curves.build_figure(api, {**state, "seeds": True})
    assert any((t.meta or {}).get("kind") == "seed" for t in fig.data)
    fig, _ = curves.build_figure(api, {**state, "view": "position"})
    assert fig.layout.meta["figure"] == "position_curves"
    fig, _ = curves.build_figure(api, {**state, "view": "behaviour"})
    assert fig.layout.meta["figure"] == "length_generalisation"
    rows = curves.csv_rows(api, {**state, "lengths": [40, 120]})
    assert rows and {r["eval_length"] for r in rows} == {40, 120}


def test_curves_asks_the_export_only_for_columns_it_has():
    from backend.api.routes.export import COLUMNS, Resource

    assert set(curves.SEED_FIELDS) < set(curves.POSITION_FIELDS) <= set(COLUMNS[Resource.probes])
    assert "per_position" not in curves.SEED_FIELDS  # the heavy column only for the position view


def test_reversal_and_s3_answer(api):
    state = reversal.SPEC.defaults()
    revs = reversal.find_reversals(reversal.profiles(api, state))
    listing = reversal.reversal_list(revs)
    assert any("partial" in t for t in texts(listing))
    answer = reversal.s3_answer(reversal.s3_distances(reversal.curves(api, state), eval_length=40))
    assert "S3 groups with Parity: " in texts(answer)
    assert reversal.matrix_csv(api, state)[0]["late_concentration_mean"] is not None


def test_probe_vs_causal_data(api):
    run, probes, interventions = probe_causal.heatmap_data(api, probe_causal.SPEC.defaults())
    assert run["id"] == 1 and probes and interventions
    state = probe_causal.SPEC.defaults()
    assert state["method"] == "auto"
    # claim 4's rule (changed: the summary used to ignore the refit probe): auto = LEACE here,
    # which removed the variable; the fixture's project-out refit still reads it (not removed)
    pts = probe_causal.summary_points(api, {**state, "method": "auto"})
    assert {p["family"] for p in pts} == set(FAMILIES)
    assert all(p["decoupled"] == (p["family"] == "transformer") for p in pts)
    assert {p["method"] for p in pts} == {"leace"}
    pts = probe_causal.summary_points(api, {**state, "method": "project_out"})
    assert {p["family"] for p in pts} == set(FAMILIES)
    assert all(p["status"] == "not removed" and p["decoupled"] is None for p in pts)
    assert len(probe_causal.summary_points(api, {**state, "seed": 1})) == 3 * len(FAMILIES)


def test_runs_suite_picker_says_imported_or_made_here_and_links_the_bundle(api):
    labels = {o["value"]: o["label"] for o in suites.suite_options(api)}
    assert labels == {"synthetic": "synthetic — made here (45 runs)", "paper": "paper — imported (60 runs)"}
    assert runs.bundle_href("paper") == "/api/suites/paper/bundle"
    assert runs.bundle_href("a b/c") == "/api/suites/a%20b%2Fc/bundle" and runs.bundle_href(None) == ""
    # while runs are being rebuilt the plain link would get a 409: it asks for the partial bundle and says so
    listed = [{"name": "paper", "n_rebuilding": 2}, {"name": "synthetic"}]
    href, label, title = runs.bundle_link("paper", listed)
    assert href == "/api/suites/paper/bundle?allow_partial=true"
    assert label == "Download suite bundle (partial: 2 runs are being rebuilt)" and "without all their results" in title
    assert runs.bundle_link("synthetic", listed)[:2] == ("/api/suites/synthetic/bundle", "Download suite bundle")
    assert runs.bundle_link(None, listed)[0] == ""

    class Down(FakeApi):
        def suites(self):
            raise ApiError(503, "down")

    assert suites.suite_options(Down(), "kept") == [{"label": "kept", "value": "kept"}]


def test_runs_table_rows_and_detail_escape_names(api):
    row = runs.table_row(api.runs_list[2])
    assert row["name"] == XSS and row["acc_40"] == 0.9 and row["acc_max"] == 0.7
    detail = runs.run_detail(api, 3, path_for)
    assert XSS in texts(detail)
    no_raw_html(detail)
    assert any(isinstance(c, dcc.Graph) for c in walk(detail))


def test_claims_render_numbers_cis_pvalues_and_links(api):
    cards = [claims.claim_card(c, path_for) for c in api.claims()]
    t = texts(cards[0]) + texts(html.Div(claims.claim_full_text(api.claims()[0])))  # the table + "why / full text"
    assert "Claim <b>one</b>" in t  # escaped by React as text
    assert "p = < 0.001 (diff=0.6)" in t
    assert "0.4 [0.3, 0.5] (n=5)" in t
    assert "1 [1, 1] (n=3)" in t  # nested by_length CI flattened into a column
    links = [c for c in walk(cards[0]) if isinstance(c, dcc.Link)]
    assert [lk.href for lk in links] == ["/curves?task=parity&eval_length=40", "/reversal"]
    badge = next(c for c in walk(cards[1]) if isinstance(c, html.Span) and "badge" in (c.className or ""))
    assert badge.children == "not enough data" and "badge-nodata" in badge.className
    assert claims.fmt_value(True) == "✓ yes" and claims.fmt_value(0.0004, "p_holm") == "< 0.001"


def test_claims_page_picks_a_suite_from_the_url(api):
    page = claims.layout(search="?suite=paper", base={}, embed=False, api=api, path_for=path_for)
    picker = next(c for c in walk(page) if isinstance(c, dcc.Dropdown) and c.id == "cl-suite")
    assert picker.value == "paper"
    assert {"label": "paper — imported (60 runs)", "value": "paper"} in picker.options
    assert claims.SPEC.decode("?suite=quick", {})["suite"] == "quick"


def test_jobs_form_params_and_field_errors(api):
    params = jobs.build_params(
        "train",
        {
            "family": "lstm",
            "task": "parity",
            "seed": "2",
            "d_model": "",
            "max_steps": "abc",
            "run_id": "5",
            "seeds": "1,2",
        },
    )
    assert params == {"family": "lstm", "task": "parity", "seed": 2, "max_steps": "abc"}
    assert jobs.build_params("suite", {"preset": "smoke", "seeds": "0, 1 2", "families": []}) == {
        "preset": "smoke",
        "seeds": [0, 1, 2],
    }
    assert jobs.build_params("intervene", {"run_id": "3", "layers": "1,x"})["layers"] == "1,x"
    # resuming the bundled study from the form: its budget and the rebuild of weightless runs
    resume = jobs.build_params(
        "suite", {"preset": "paper", "max_seconds": "75", "rebuild_weights": ["on"], "force": []}
    )
    assert resume == {"preset": "paper", "max_seconds": 75.0, "rebuild_weights": True}
    from worker.job_params import SuiteParams

    assert SuiteParams(**resume).rebuild_weights and not SuiteParams(**resume).force
    # a staged suite: probes first (every part ticked = the default, sent as nothing; none = a 422)
    every = ["probes", "interventions", "patching"]
    assert "parts" not in jobs.build_params("suite", {"preset": "paper", "parts": every})
    assert jobs.build_params("suite", {"preset": "paper", "parts": ["probes"]})["parts"] == ["probes"]
    assert jobs.build_params("suite", {"preset": "paper", "parts": ["patching", "probes"]})["parts"] == [
        "probes",
        "patching",
    ]
    assert jobs.build_params("suite", {"preset": "paper", "parts": []})["parts"] == []
    assert "parts" not in jobs.build_params("train", {"family": "lstm", "task": "parity", "parts": ["probes"]})
    by_field, other = jobs.field_errors(
        [
            {"loc": ["body", "params", "seed"], "msg": "Input should be greater than or equal to 0"},
            {"loc": ["body", "params", "measure", "eval_lengths"], "msg": "bad"},
            {"loc": ["body", "kind"], "msg": "unknown kind"},
        ]
    )
    assert by_field == {"seed": "Input should be greater than or equal to 0", "eval_lengths": "bad"}
    assert other == ["kind: unknown kind"]


def test_job_list_escapes_messages(api):
    table = jobs.job_table(api.jobs()["items"], 1, path_for)
    assert XSS in texts(table)
    no_raw_html(table)
    buttons = [c for c in walk(table) if isinstance(c, html.Button)]
    assert buttons and buttons[0].id == {"type": "job-cancel", "index": 1}


def test_csv_defuses_formulas():
    import pandas as pd

    df = csv_safe(pd.DataFrame({"name": ["=cmd()", "ok", "-x"], "v": [-1.0, 2.0, 3.0]}))
    assert list(df["name"]) == ["'=cmd()", "ok", "'-x"] and list(df["v"]) == [-1.0, 2.0, 3.0]


def test_runs_csv_download_defuses_formulas_in_every_text_cell():
    import io

    import pandas as pd

    api = FakeApi()
    api.runs_list[0] = {**api.runs_list[0], "notes": "\t=cmd()", "name": "\r+1", "tags": ["@SUM(1)"]}
    sent = runs.export_csv(api, runs.SPEC.decode("", {}))
    assert sent["filename"] == "layerscope-runs.csv"
    df = pd.read_csv(io.StringIO(sent["content"]), keep_default_na=False)
    first = df[df["id"] == api.runs_list[0]["id"]].iloc[0]
    assert first["notes"] == "'\t=cmd()" and first["name"] == "'\r+1" and first["tags"] == '["@SUM(1)"]'


def test_bind_bool_roundtrip():
    b = Bind("ci", "cv-ci", kind="bool")
    assert b.to_control(True) == ["on"] and b.from_control([]) is False


def _unused(*_: Any) -> None:  # keep linters quiet about the helper signature
    return None


def test_rebuilt_fact_names_the_first_machine_and_the_step_budget() -> None:
    from dashboard.pages.runs import rebuilt_fact

    text = rebuilt_fact(
        {
            "made_on": "cuda (NVIDIA H200) on vm",
            "steps": 700,
            "train_seconds": 26.0,
            "heldout_acc": 0.9912,
            "stopped_early": True,
        },
        {"max_steps": 10_000, "max_seconds": 75.0},
    )
    assert text == (
        "here, within the 2019 steps its budget gave it; first made on cuda (NVIDIA H200) on vm: "
        "700 steps in 26 s, held-out acc 0.9912"
    )


def test_a_run_resumed_on_another_machine_says_where_each_attempt_trained() -> None:
    from dashboard.pages.run_detail import run_facts, trained_on_fact

    lease_then_desk = [
        {"from_step": 0, "device": "cuda (NVIDIA H200) on gpu"},
        {"from_step": 7400, "device": "cpu on vm"},
    ]
    assert trained_on_fact(lease_then_desk) == "from step 0: cuda (NVIDIA H200) on gpu; from step 7,400: cpu on vm"
    # begun before attempts were recorded: the first steps' machine is not known, and it says so
    assert trained_on_fact(lease_then_desk[1:]) == "steps 0–7,399: not recorded; from step 7,400: cpu on vm"
    run = {
        "family": "mamba", "task": "s3", "seed": 0, "n_layers": 4, "d_model": 176, "n_params": 855014,
        "made_with": {"resumed_at_steps": [7400], "trained_on": lease_then_desk[1:]},
    }  # fmt: skip
    assert ("trained on", "steps 0–7,399: not recorded; from step 7,400: cpu on vm") in run_facts(run)
    assert "trained on" not in dict(run_facts({**run, "made_with": {}}))
