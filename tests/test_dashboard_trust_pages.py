"""Trust fixes on the pages, as plain functions (no server, no browser): /reversal says which
pairs rest on untrained cells and defers to claim 3; the runs page flags untrained runs; the
/patching default stays on one task; a malformed ``?trained=`` falls back to on; the import job
row shows no attempt count."""

from __future__ import annotations

from dashboard.components import trained_field
from dashboard.figures.runs import loss_figure
from dashboard.pages import jobs, patching, reversal, runs
from dashboard.state import PageState
from tests.conftest import find_component
from tests.dashboard_data import curve_rows, profile_rows


def _texts(c) -> str:
    out = []

    def walk(x):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif x is not None and hasattr(x, "children"):
            walk(x.children)

    walk(c)
    return " ".join(out)


def _untrained(profiles, cells):
    return [{**p, "untrained_run_ids": [7, 8, 9]} if (p["family"], p["task"]) in cells else p for p in profiles]


# ----------------------------------------------------------------------------- item 3: /reversal


def test_reversal_list_names_untrained_cells_and_gives_n_and_intervals():
    profs = profile_rows()
    revs = reversal.find_reversals(profs)
    assert revs
    r = revs[0]
    cells = {(r["family_a"], r["task_a"]), (r["family_b"], r["task_b"])}
    listing = _texts(reversal.reversal_list(revs, _untrained(profs, cells), trained_only=False))
    assert "rest on cells with untrained runs" in listing and "the 'trained runs only' switch is off" in listing
    assert "rests on untrained runs in" in listing and "untrained: 3 of 3" in listing
    assert "n=3" in listing and "late concentration" in listing and "[" in listing  # n and the interval
    assert "untrained, not a finding" in listing  # the swap badge itself says so
    items = reversal.reversal_list(revs, _untrained(profs, cells), trained_only=False).children[1].children
    flagged = [li for li in items if li.className == "reversal-untrained"]
    assert flagged and all(
        "badge-swap" not in (getattr(c, "className", None) or "") for li in flagged for c in li.children
    )
    trained = _texts(reversal.reversal_list(revs, profs, trained_only=True))
    assert "trained runs only" in trained and "untrained" not in trained.replace("trained runs only", "")


def test_s3_answer_defers_to_claim_3_and_names_untrained_families():
    crv = curve_rows()
    crv = [{**c, "untrained_run_ids": [4]} if c["family"] == "mamba" else c for c in crv]
    dist = reversal.s3_distances(crv, eval_length=40)
    assert all(d["n"] == 3 for d in dist)
    weak = _texts(reversal.s3_answer(dist, {"id": 3, "verdict": "not enough data"}, trained_only=False))
    assert weak.startswith("Not enough data (claim 3 on /claims)") and "descriptively only" in weak
    assert "(n=3)" in weak and "rest on untrained runs (Mamba)" in weak
    ok = _texts(reversal.s3_answer([d for d in dist if d["family"] != "mamba"], {"id": 3, "verdict": "supported"}))
    assert "claim 3 on /claims: supported" in ok and "untrained" not in ok and "trained runs only" in ok


# ----------------------------------------------------------------------------- item 11: runs page


def test_runs_page_trained_column_flag_and_string_row_ids():
    assert any(c["field"] == "trained_label" for c in runs.COLUMNS)
    run = {
        "id": 12,
        "name": "a",
        "family": "lstm",
        "task": "parity",
        "seed": 0,
        "trained": False,
        "heldout_acc": 0.47,
        "early_stop_acc": 0.99,
    }
    row = runs.table_row(run)
    assert row["row_id"] == "12" and isinstance(row["row_id"], str) and row["trained_label"] == "untrained"
    assert runs.table_row({**run, "trained": True})["trained_label"] == "trained"
    flag = _texts(runs.trained_flag(run))
    assert flag.startswith("Untrained") and "47.0%" in flag and "99%" in flag
    assert _texts(runs.trained_flag({**run, "trained": True, "heldout_acc": 0.995})).startswith("Trained")
    # where and by which code each run was made: a study made in parts mixes machines
    assert {"made_on", "commit"} <= {c["field"] for c in runs.COLUMNS}
    made = runs.table_row({**run, "made_on": "cpu on vm", "made_with": {"git_commit": "57e4b4fb07baeaa5"}})
    assert (made["made_on"], made["commit"]) == ("cpu on vm", "57e4b4f") and row["commit"] == ""


def test_runs_layout_subtitle_and_grid_row_id(monkeypatch):
    class Api:
        def suites(self):
            return []

    page = runs.layout(search="", base=None, embed=False, api=Api(), path_for=lambda p: p)
    text = _texts(page)
    assert "Every trained model" not in text and "trained or not" in text

    grid = find_component(page, "rn-grid")
    assert grid.getRowId == "params.data.row_id"


def test_loss_figure_says_heldout_is_at_the_curriculum_length():
    run = {
        "family": "gru",
        "loss_curve": [
            {"step": 1, "loss": 1.0, "heldout_token_acc": 0.6, "length": 8},
            {"step": 2, "loss": 0.8, "heldout_token_acc": 0.9, "length": 16},
        ],
    }
    fig = loss_figure(run)
    acc = next(t for t in fig.data if (t.meta or {}).get("kind") == "heldout")
    assert "curriculum length" in acc.name and list(acc.customdata) == [8, 16]
    assert "curriculum length" in fig.layout.yaxis2.title.text
    plain = loss_figure(
        {
            "family": "gru",
            "train_config": {"train_length": 40},
            "loss_curve": [{"step": 1, "loss": 1.0, "heldout_token_acc": 0.6}],
        }
    )
    assert plain.layout.yaxis2.title.text == "held-out accuracy (L=40)"


# ----------------------------------------------------------------------------- item 14


def test_patching_default_runs_are_of_one_task():
    rs = [
        {"id": 1, "task": "s3", "family": "lstm"},
        {"id": 2, "task": "parity", "family": "lstm"},
        {"id": 3, "task": "parity", "family": "gru"},
        {"id": 4, "task": "s3", "family": "gru"},
        {"id": 5, "task": "parity", "family": "lstm"},
        {"id": 6, "task": "parity", "family": "mamba"},
        {"id": 7, "task": "parity", "family": "transformer"},
    ]
    ids = patching.default_run_ids(rs, n=3)
    assert ids == [2, 3, 6]  # parity comes first in the task order; one run per family
    assert {r["task"] for r in rs if r["id"] in ids} == {"parity"}
    assert patching.default_run_ids(rs) == [2, 3, 6, 7]  # up to the four panels side by side
    assert patching.default_run_ids([]) == []


def test_patching_state_site_opens_on_the_families_that_have_one():
    # on Dyck the Transformer (no recurrent state) used to open the page, Mamba and Mamba-2 left out
    rs = [
        {"id": i, "task": "dyck", "family": f}
        for i, f in enumerate(("transformer", "mamba", "mamba2", "lstm", "gru"), start=1)
    ]
    assert patching.default_run_ids(rs, site="state") == [2, 3, 4, 5]
    assert patching.default_run_ids(rs, site="state:conv") == [2, 3]  # only Mamba's have a conv state
    assert patching.default_run_ids(rs, site="resid_post")[0] == 1
    only_t = [{"id": 9, "task": "parity", "family": "transformer"}] + rs
    assert patching.default_run_ids(only_t, site="state")[0] == 2  # the task with a state-carrying family


def test_malformed_trained_in_url_means_the_default_on():
    spec = PageState([trained_field()])
    assert spec.decode("?trained=maybe", None)["trained"] is True
    assert spec.decode("?trained=0", None)["trained"] is False
    assert spec.decode("?trained=false", None)["trained"] is False
    assert spec.decode("?trained=1", None)["trained"] is True


def test_import_job_shows_no_attempt_count():
    assert jobs.attempt_text({"kind": "import", "attempt": 0, "max_attempts": 3}) == "–"
    assert jobs.attempt_text({"kind": "train", "attempt": 1, "max_attempts": 3}) == "1/3"
    row = jobs.job_row(
        {"id": 9, "kind": "import", "state": "done", "attempt": 0, "max_attempts": 3, "progress": 1.0}, lambda p: p
    )
    assert "0/3" not in _texts(row) and "–" in _texts(row)
    queued = jobs.job_row(
        {"id": 10, "kind": "train", "state": "queued", "attempt": 0, "max_attempts": 3, "progress": 0.0}, lambda p: p
    )
    assert "0/3" in _texts(queued)  # a real queued job keeps its count


def test_probe_vs_causal_summary_asks_only_for_exportable_columns():
    from backend.api.routes.export import COLUMNS, Resource
    from dashboard.pages import probe_causal

    assert set(probe_causal.PROBE_FIELDS.split(",")) <= set(COLUMNS[Resource.probes])
    assert set(probe_causal.EDIT_FIELDS.split(",")) <= set(COLUMNS[Resource.interventions])
    assert {"refit_acc", "refit_majority", "significant"} <= set(probe_causal.EDIT_FIELDS.split(","))


def test_curves_page_names_the_cells_with_runs_but_no_probe_curve():
    from dashboard.pages import curves

    runs_ = [{"family": f, "task": "code_depth"} for f in ("lstm", "transformer", "mamba")] + [
        {"family": "lstm", "task": "dyck"}
    ]
    rows = [{"family": "lstm", "task": "code_depth"}, {"family": "lstm", "task": "dyck"}]
    note = curves.unprobed_note(runs_, rows)
    assert note.startswith("No probe curve yet for") and "Transformer" in note and "Mamba" in note
    assert "LSTM" not in note and "Code-Depth" in note
    assert curves.unprobed_note(runs_[:1], rows) is None
    # a cell probed at another length only (a file task's rows' length) says so, not "not probed"
    other = curves.unprobed_note(runs_, rows, {("transformer", "code_depth"): [20]})
    assert "Transformer on Code-Depth at L=20" in other and "tick it in Eval lengths" in other
    assert "Mamba on Code-Depth: their runs are stored but not probed" in other


def _as_api(job: dict) -> dict:
    """A job dict as ``GET /api/jobs`` returns it: ``state`` read through ``store.jobs.suite_state``,
    the row's own in ``job_state``."""
    from store.jobs import suite_state

    return {**job, "job_state": job["state"], "state": suite_state(job["state"], job.get("children"))}


def test_a_fanned_out_suite_job_shows_how_far_its_runs_are():
    from dashboard.pages import jobs

    suite = {
        "id": 2,
        "kind": "suite",
        "state": "succeeded",
        "progress": 1.0,
        "attempt": 1,
        "max_attempts": 3,
        "children": {"succeeded": 3, "running": 2, "queued": 10},
        "children_progress": 0.25,
    }
    assert jobs.suite_progress(suite) == (0.25, "3 done, 2 running, 10 queued of 15 runs")
    row = _texts(jobs.job_row(_as_api(suite), lambda p: p))
    assert "3 done, 2 running" in row and "25%" in row and "running" in row and "succeeded" not in row
    done = {**suite, "children": {"succeeded": 14, "failed": 1}, "children_progress": 1.0}
    text = _texts(jobs.job_row(_as_api(done), lambda p: p))
    assert "14 done, 1 failed of 15 runs" in text and "failed" in text.split("14 done")[0]  # the badge
    assert jobs.suite_progress({"kind": "train", "children": None}) is None
    # one child failed half-way (progress stays below 1), nothing left to run: not "running", the bar full
    ended = {**suite, "children": {"succeeded": 14, "failed": 1}, "children_progress": 0.96}
    assert "running" not in _texts(jobs.job_row(_as_api(ended), lambda p: p))
    assert jobs.suite_progress(ended)[0] == 1.0


def test_a_suite_with_cancelled_runs_says_so():
    """13 of 15 children cancelled read "succeeded · 15 of 15 runs done · 13%"."""
    from dashboard.pages import jobs

    suite = {
        "id": 2,
        "kind": "suite",
        "state": "succeeded",
        "progress": 1.0,
        "attempt": 1,
        "max_attempts": 3,
        "children": {"succeeded": 2, "cancelled": 13},
        "children_progress": 0.13,
    }
    assert jobs.suite_progress(suite) == (1.0, "2 done, 13 cancelled of 15 runs")
    text = _texts(jobs.job_row(_as_api(suite), lambda p: p))
    assert "succeeded" not in text and "cancelled" in text.split("2 done")[0]


def test_the_jobs_list_counts_a_suite_jobs_children(api):
    from store import jobs as J
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite
    from worker.queue import submit

    params = SuiteParams(preset="smoke", families=["lstm", "gru"], tasks=["parity"])
    sid = submit(api.factory, api.queue, "suite", params)
    with api.factory() as s:  # its two train jobs, as the fan-out makes them
        s.add_all([J.new_job("train", p, parent_id=sid) for p in expand_suite(params)])
        s.commit()
    (suite,) = [j for j in api.client.get("/api/jobs").json()["items"] if j["kind"] == "suite"]
    assert suite["children"] == {"queued": 2} and suite["children_progress"] == 0.0
    # fanned out (its own state succeeded) while its runs wait: running in the list, the filter and the detail
    with api.factory() as s:
        s.get(J.Job, sid).state = J.SUCCEEDED
        s.commit()
    running = api.client.get("/api/jobs", params={"state": "running", "kind": "suite"}).json()["items"]
    assert [(j["id"], j["state"], j["job_state"]) for j in running] == [(sid, "running", "succeeded")]
    assert api.client.get("/api/jobs", params={"state": "succeeded", "kind": "suite"}).json()["items"] == []
    assert api.client.get(f"/api/jobs/{sid}").json()["state"] == "running"
    with api.factory() as s:  # every run done, one failed: failed everywhere
        for job in s.query(J.Job).filter(J.Job.parent_id == sid):
            job.state = J.FAILED if job.id % 2 else J.SUCCEEDED
        s.commit()
    failed = api.client.get("/api/jobs", params={"state": "failed", "kind": "suite"}).json()["items"]
    assert [j["state"] for j in failed] == ["failed"]
