"""GET /api/suites says how far a preset study has come and whether it is partial (with the
imported bundle's reasons), and the dashboard shows it: the suite picker's label and one banner."""

from __future__ import annotations

from datetime import UTC, datetime

from store.models import Job, Run
from tests.conftest import seed_runs

WHY = "one GPU lease ran out"


def _import_job(factory, suite: str, partial: dict | None) -> None:
    with factory() as s:
        s.add(
            Job(
                kind="import",
                state="succeeded",
                params={"suite": suite},
                config_hash=f"import-{suite}",
                progress=1.0,
                result={"manifest": {"suite": suite, **({"partial": partial} if partial else {})}},
                finished_at=datetime.now(UTC),
            )
        )
        s.commit()


def test_api_suites_flag_a_partial_preset_study_with_why(api):
    seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0, 1, 2), suite="paper")
    seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), suite="mine")
    seed_runs(api.factory, families=("gru",), tasks=("dyck",), seeds=(0,), suite="theirs")
    with api.factory() as s:
        s.query(Run).filter(Run.suite == "paper", Run.seed < 2).update({"status": "complete"})
        s.commit()
    _import_job(api.factory, "paper", {"complete": False, "why": WHY, "notes": ["resumed on a CPU"]})
    _import_job(api.factory, "theirs", {"complete": False, "notes": ["stopped early"]})
    rows = {r["name"]: r for r in api.client.get("/api/suites").json()}
    paper = rows["paper"]
    assert (paper["preset_runs"], paper["runs_remaining"], paper["partial"]) == (72, 70, True)
    assert paper["partial_why"] == f"{WHY}; resumed on a CPU" and paper["imported"] is True
    with api.factory() as s:  # measured runs that learned their task: what a verdict can read
        expected = sum(
            r.status == "complete" and (r.heldout_acc or 0) >= (r.early_stop_acc or 0.99)
            for r in s.query(Run).filter(Run.suite == "paper")
        )
    assert paper["n_trained_measured"] == expected <= paper["n_measured"]
    # no preset: nothing to count; partial only when its bundle said so
    assert "preset_runs" not in rows["mine"] and "partial" not in rows["mine"]
    assert rows["theirs"]["partial"] is True and rows["theirs"]["partial_why"] == "stopped early"


def test_a_complete_preset_suite_is_not_partial(api):
    seed_runs(
        api.factory,
        families=("lstm", "transformer", "mamba", "mamba2", "gru"),
        tasks=("parity", "dyck", "s3"),
        seeds=(0,),
        suite="smoke",
        eval_lengths=(40,),
        n_layers=1,
    )
    with api.factory() as s:
        s.query(Run).update({"status": "complete"})
        s.commit()
    (row,) = api.client.get("/api/suites").json()
    assert (row["preset_runs"], row["runs_remaining"], row["partial"]) == (15, 0, False)
    assert "partial_why" not in row


PAPER = {
    "name": "paper",
    "n_runs": 48,
    "n_trained": 30,
    "n_measured": 23,
    "imported": True,
    "preset_runs": 60,
    "runs_remaining": 37,
    "partial": True,
    "partial_why": WHY,
}


def test_suite_picker_label_says_partial():
    from dashboard.suites import suite_label

    assert suite_label(PAPER) == "paper — imported, partial: 23 of 60 measured"
    assert (
        suite_label({**PAPER, "n_trained_measured": 17})
        == "paper — imported, partial: 23 of 60 measured (17 of them trained)"
    )
    assert suite_label({**PAPER, "partial": False, "runs_remaining": 0}) == "paper — imported (48 runs)"
    assert (
        suite_label({"name": "x", "n_runs": 3, "imported": True, "partial": True, "n_measured": 1})
        == "x — imported, partial: 1 of 3 runs measured"
    )
    queued = {"name": "smoke", "n_runs": 0, "queued": True, "partial": True, "preset_runs": 3, "runs_remaining": 3}
    assert suite_label(queued) == "smoke — queued, no run stored yet"


def test_partial_banner_is_one_line_for_the_chosen_suite():
    from dashboard.suites import partial_notice

    line = partial_notice([PAPER, {"name": "live", "n_runs": 2, "imported": False}], "paper")
    assert line.children == f"Partial study: 23 of the preset's 60 runs measured, 37 remain ({WHY})"
    assert partial_notice([PAPER], "live") is None and partial_notice([], "paper") is None
    # all suites shown: the partial ones among them are named
    assert "paper" in partial_notice([PAPER], None).children
    # a long reason: its first sentence on the line, the whole of it on hover
    long_why = "made in one 15-minute GPU lease: the suite was stopped at its deadline. Training was capped at 75 s."
    banner = partial_notice([{**PAPER, "partial_why": long_why}], "paper")
    assert banner.children.endswith("37 remain (made in one 15-minute GPU lease…)") and banner.title == long_why


def test_partial_banner_is_on_every_aggregate_page():
    from dash import html

    from dashboard.pages import claims, curves, patching, probe_causal, reversal
    from tests.test_dashboard_pages import FakeApi

    class Partial(FakeApi):
        def suites(self):
            return [PAPER]

    def find(node, cid):
        if getattr(node, "id", None) == cid:
            return node
        kids = getattr(node, "children", None)
        for k in kids if isinstance(kids, list | tuple) else [kids]:
            if k is not None and not isinstance(k, str | int | float) and (hit := find(k, cid)) is not None:
                return hit
        return None

    for page in (curves, reversal, claims, probe_causal, patching):
        root = page.PAGE.layout(search="?suite=paper", base=None, embed=False, api=Partial(), path_for=lambda p: p)
        slot = find(root, f"{page.PAGE.key}-partial")
        assert isinstance(root, html.Div) and slot is not None, page.PAGE.key
        assert slot.children is not None and slot.children.children.startswith("Partial study"), page.PAGE.key


def test_a_suite_queued_without_runs_is_listed_with_zero_counts(api):
    # the routes' 404s already knew a queued suite; GET /api/suites did not list it (a new user's trial)
    seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), suite="mine")
    assert api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke"}}).status_code == 201
    r = api.client.post("/api/jobs", json={"kind": "suite", "params": {"preset": "smoke", "name": "later"}})
    assert r.status_code == 201
    with api.factory() as s:  # a finished suite job whose runs were deleted is not listed
        s.add(Job(kind="suite", state="succeeded", params={"preset": "smoke", "name": "gone"}, config_hash="g"))
        s.commit()
    rows = {r["name"]: r for r in api.client.get("/api/suites").json()}
    assert set(rows) == {"mine", "smoke", "later"}
    assert "queued" not in rows["mine"] and rows["mine"]["n_runs"] == 1
    smoke = rows["smoke"]
    assert smoke["queued"] is True and smoke["n_runs"] == smoke["n_measured"] == 0 and smoke["partial"] is True
    assert smoke["preset_runs"] == smoke["runs_remaining"] > 0
    assert rows["later"]["queued"] is True and "preset_runs" not in rows["later"]  # named apart: no preset's count
    assert api.client.get("/api/curves", params={"suite": "later"}).status_code == 200  # known to the aggregates too
