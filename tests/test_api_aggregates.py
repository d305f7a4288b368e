"""/profiles, /claims and the export, over seeded results."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from tests.conftest import seed_runs


@pytest.fixture
def seeded(api):
    api.run_ids = seed_runs(api.factory)
    return api


def test_profiles_aggregate_over_seeds(seeded) -> None:
    c = seeded.client
    items = c.get("/api/profiles", params={"task": "parity", "eval_length": 40}).json()
    assert {(p["task"], p["family"], p["eval_length"]) for p in items} == {
        ("parity", "lstm", 40),
        ("parity", "transformer", 40),
    }
    lstm = next(p for p in items if p["family"] == "lstm")
    assert lstm["n"] == 3 and lstm["seeds"] == [0, 1, 2] and lstm["n_layers"] == 2
    assert lstm["profile_class"] in ("early", "late", "gradual", "flat")
    assert {"best_layer", "first_95", "late_concentration", "auc", "damaging_layer", "decoupling_distance"} <= set(
        lstm["metrics"]
    )
    best = lstm["metrics"]["best_layer"]
    assert best["mean"] == 1 and best["n"] == 3
    assert len(lstm["per_seed"]) == 3 and lstm["per_seed"][0]["seed"] == 0 and lstm["per_seed"][0]["run_id"]
    assert lstm["per_seed"][0]["decoupling_method"] == "project_out"
    assert lstm["per_seed"][0]["damaging_layer"] == 1  # the seeded delta grows with depth
    assert sum(lstm["class_counts"].values()) == 3
    every = c.get("/api/profiles").json()
    assert len(every) == 2 * 2 * 2  # tasks × families × eval lengths


def test_profiles_skip_gapped_curves(seeded) -> None:
    from store.models import ProbeResult

    with seeded.factory() as s:  # a run half-written: its layer 0 at L=40 is missing
        s.query(ProbeResult).filter(
            ProbeResult.run_id == seeded.run_ids[0], ProbeResult.layer == 0, ProbeResult.eval_length == 40
        ).delete()
        s.commit()
    items = seeded.client.get("/api/profiles", params={"task": "parity", "family": "lstm", "eval_length": 40}).json()
    assert items[0]["n"] == 2


def test_claims(seeded) -> None:
    claims = seeded.client.get("/api/claims").json()
    assert [c["id"] for c in claims] == [1, 2, 3, 4, 5, 6]
    for c in claims:
        assert (
            c["verdict"] in ("supported", "contradicted", "not enough data")
            and c["title"]
            and isinstance(c["views"], list)
        )
    assert seeded.client.get("/api/claims", params={"suite": "t"}).status_code == 200
    unknown = seeded.client.get("/api/claims", params={"suite": "nosuch"})  # no verdicts about no runs
    assert unknown.status_code == 404 and "nosuch" in unknown.json()["detail"] and "'t'" in unknown.json()["detail"]


def test_aggregates_are_cached_until_results_change(seeded) -> None:
    c = seeded.client
    cache = seeded.app.state.aggregate_cache
    a = c.get("/api/curves").json()
    hits = cache.hits
    assert c.get("/api/curves").json() == a and cache.hits == hits + 1
    seed_runs(seeded.factory, families=("gru",), tasks=("s3",), seeds=(0,), suite="more")
    b = c.get("/api/curves").json()
    assert len(b) > len(a)


@pytest.mark.parametrize("resource", ["runs", "probes", "curves", "interventions", "patching", "profiles"])
def test_export_every_resource_in_every_format(seeded, resource) -> None:
    c = seeded.client
    rows = c.get(f"/api/export/{resource}.json", params={"task": "parity"}).json()
    assert rows and isinstance(rows, list)
    if resource not in ("runs",):
        assert {r["task"] for r in rows} == {"parity"}
    csv = c.get(f"/api/export/{resource}.csv", params={"task": "parity"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.headers["content-disposition"] == f'attachment; filename="{resource}.csv"'
    df = pd.read_csv(io.StringIO(csv.text))
    assert len(df) == len(rows)
    pq = c.get(f"/api/export/{resource}.parquet", params={"task": "parity"})
    assert pq.status_code == 200
    df2 = pd.read_parquet(io.BytesIO(pq.content))
    assert len(df2) == len(rows) and list(df2.columns) == list(df.columns)


def test_export_filters_and_tidy_columns(seeded) -> None:
    c = seeded.client
    rid = seeded.run_ids[0]
    rows = c.get("/api/export/probes.json", params={"run_id": rid, "eval_length": 40}).json()
    assert len(rows) == 3 and {r["run_id"] for r in rows} == {rid}
    assert {"task", "family", "seed", "layer_name", "depth", "accuracy"} <= set(rows[0])
    csv = pd.read_csv(io.StringIO(c.get("/api/export/probes.csv", params={"run_id": rid}).text))
    assert json.loads(csv["per_position"][0])  # nested values as JSON text in CSV
    rows = c.get("/api/export/interventions.json", params={"method": "mean"}).json()
    assert {r["method"] for r in rows} == {"mean"}
    prof = c.get("/api/export/profiles.json", params={"task": "dyck"}).json()
    assert {"metric", "mean", "lo", "hi", "n", "profile_class"} <= set(prof[0])


def test_export_bad_resource_or_format_is_422(seeded) -> None:
    for path, field in (("/api/export/secrets.csv", "resource"), ("/api/export/runs.xlsx", "fmt")):
        r = seeded.client.get(path)
        assert r.status_code == 422 and ["path", field] in [d["loc"] for d in r.json()["detail"]]


@pytest.mark.parametrize("resource", ["runs", "probes", "curves", "interventions", "patching", "profiles"])
def test_export_columns_declared_for_fields_match_the_rows(seeded, resource) -> None:
    from backend.api.routes.export import COLUMNS, Resource

    rows = seeded.client.get(f"/api/export/{resource}.json").json()
    assert rows and all(set(r) == set(COLUMNS[Resource(resource)]) for r in rows)


def test_export_fields_picks_columns_in_order(seeded) -> None:
    c = seeded.client
    full = c.get("/api/export/probes.json", params={"task": "parity"}).json()
    picked = "seed,run_id,layer_name,accuracy,seed"
    rows = c.get("/api/export/probes.json", params={"task": "parity", "fields": picked}).json()
    assert [list(r) for r in rows] == [["seed", "run_id", "layer_name", "accuracy"]] * len(full)
    assert rows == [{k: f[k] for k in ("seed", "run_id", "layer_name", "accuracy")} for f in full]
    depth_only = c.get("/api/export/probes.json", params={"fields": "depth"}).json()  # needs layer, not shown
    assert {r["depth"] for r in depth_only} == {0.0, 0.5, 1.0} and all(list(r) == ["depth"] for r in depth_only)
    csv = pd.read_csv(io.StringIO(c.get("/api/export/curves.csv", params={"fields": "task,layer,mean"}).text))
    assert list(csv.columns) == ["task", "layer", "mean"] and len(csv) > 0
    # an intervention's own seed and its run's seed (seed_1) keep their names when picked alone
    both = c.get("/api/export/interventions.json", params={"fields": "seed_1,layer,seed"}).json()
    whole = c.get("/api/export/interventions.json").json()
    assert both == [{k: w[k] for k in ("seed_1", "layer", "seed")} for w in whole]
    assert c.get("/api/export/interventions.json", params={"fields": "seed_1"}).json() == [
        {"seed_1": w["seed_1"]} for w in whole
    ]
    runs = c.get("/api/export/runs.json", params={"fields": "id,name"}).json()
    assert len(runs) == 12 and all(list(r) == ["id", "name"] for r in runs)
    pq = pd.read_parquet(io.BytesIO(c.get("/api/export/profiles.parquet", params={"fields": "metric,mean"}).content))
    assert list(pq.columns) == ["metric", "mean"]


@pytest.mark.parametrize(
    "resource, fields, needle",
    [
        ("probes", "run_id,bogus", "'bogus'"),
        ("runs", "loss_curve", "'loss_curve'"),  # not an exported column of runs
        ("curves", "accuracy", "'accuracy'"),  # a probes column, not a curves one
        ("probes", ",,", "at least one field"),
        ("probes", "run id", "pattern"),
    ],
)
def test_export_unknown_field_is_422_naming_it(seeded, resource, fields, needle) -> None:
    r = seeded.client.get(f"/api/export/{resource}.csv", params={"fields": fields})
    assert r.status_code == 422, r.text
    detail = [d for d in r.json()["detail"] if d["loc"] == ["query", "fields"]]
    assert detail and needle in detail[0]["msg"], r.json()


def test_curve_and_profile_intervals_stay_in_range(seeded) -> None:
    """Accuracies near 1.0 over 3 seeds: the unclipped t-interval reaches past 1.0 (and past 0
    near 0); the API's intervals are clipped to the quantity's range (science.stats.clip_interval)."""
    from science.stats import t_interval
    from store.models import ProbeResult

    accs = {0: 1.0, 1: 0.76, 2: 1.0}
    assert t_interval(list(accs.values()))[2] > 1.0  # the case the clipping is for
    with seeded.factory() as s:
        rows = (
            s.query(ProbeResult)
            .filter(ProbeResult.run_id.in_(seeded.run_ids), ProbeResult.layer == 0, ProbeResult.eval_length == 40)
            .all()
        )
        for r in rows:
            r.accuracy = accs[r.run_id % 3]
        s.commit()
    items = seeded.client.get("/api/curves", params={"eval_length": 40}).json()
    assert items and all(0.0 <= p["lo"] <= p["mean"] <= p["hi"] <= 1.0 for p in items if p["lo"] is not None)
    assert any(p["hi"] == 1.0 and p["layer"] == 0 for p in items)
    for prof in seeded.client.get("/api/profiles", params={"eval_length": 40}).json():
        for name in ("auc", "max_accuracy", "depth_first_95"):  # bounded (late concentration is not: stats.BOUNDS)
            m = prof["metrics"].get(name) or {}
            if m.get("lo") is not None:
                assert min(0.0, m["mean"]) <= m["lo"] and m["hi"] <= max(1.0, m["mean"]), (name, m)


def test_an_unknown_suite_is_404_everywhere_a_suite_is_aggregated(seeded) -> None:
    c = seeded.client
    for path in ("/api/curves", "/api/profiles", "/api/claims", "/api/export/profiles.csv", "/api/export/curves.json"):
        r = c.get(path, params={"suite": "nosuch"})  # a typo must not read as "no data"
        assert r.status_code == 404 and "'nosuch' not found" in r.json()["detail"], (path, r.text)
        assert c.get(path, params={"suite": "t"}).status_code == 200, path


def test_a_queued_suite_with_no_run_yet_is_known(seeded) -> None:
    from worker.job_params import SuiteParams
    from worker.queue import submit

    submit(seeded.factory, seeded.queue, "suite", SuiteParams(preset="smoke", name="live"))
    r = seeded.client.get("/api/claims", params={"suite": "live"})  # the demo's live suite, before its first run
    assert r.status_code == 200 and all(x["verdict"] == "not enough data" for x in r.json())
    assert seeded.client.get("/api/curves", params={"suite": "live"}).json() == []


def test_the_cache_sees_a_run_trained_again(seeded) -> None:
    from store.models import Run
    from worker import persist

    cache = seeded.app.state.aggregate_cache
    with seeded.factory() as s:
        before = cache.fingerprint(s)
        run = s.get(Run, seeded.run_ids[0])
        fields = {c.key: getattr(run, c.key) for c in Run.__table__.columns if c.key not in ("id", "created_at")}
    with seeded.factory() as s:  # the same config hash stored again: new weights, same id and row counts
        persist.save_run(s, **{**fields, "heldout_acc": 0.5})
        persist.drop_results(s, seeded.run_ids[0])
    with seeded.factory() as s:
        assert cache.fingerprint(s) != before


def test_csv_export_defuses_spreadsheet_formulas_owasp(seeded) -> None:
    """A text cell starting with = + - @ tab or CR gets a leading single quote (OWASP CSV
    injection); JSON and Parquet keep the value as stored, numbers are untouched."""
    from store.models import Run

    rid = seeded.run_ids[0]
    note = '=HYPERLINK("http://x","y")'
    with seeded.factory() as s:
        run = s.get(Run, rid)
        run.notes, run.name = note, "@SUM(1)"
        s.commit()
    csv = pd.read_csv(io.StringIO(seeded.client.get("/api/export/runs.csv").text), keep_default_na=False)
    row = csv[csv["id"] == rid].iloc[0]
    assert row["notes"] == "'" + note and row["name"] == "'@SUM(1)"
    assert (csv["seed"] >= 0).all()  # numbers stay numbers
    rows = seeded.client.get("/api/export/runs.json").json()
    assert next(r for r in rows if r["id"] == rid)["notes"] == note


def test_claims_name_the_curriculum_stage_a_cell_not_learned_stopped_at(api) -> None:
    """GET /api/claims reads the stage (and each stopped run's slope) from the loss curves of runs
    stopped by a plateau or their budget only (the aggregate does not load every curve): "… plateaued at steps 4,700–6,200, at the L 12 curriculum stage"."""
    from sqlalchemy import update

    from store.models import Run

    ids = seed_runs(api.factory, families=("lstm", "transformer"), tasks=("parity",), suite="nl")
    with api.factory() as s:
        for run_id, steps in zip(ids[3:], (4700, 5900, 6200), strict=True):  # the transformer's three seeds
            s.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(
                    heldout_acc=0.36,
                    best_heldout_acc=0.36,
                    stop_reason="plateau",
                    steps=steps,
                    train_config={"max_steps": 40000, "train_length": 40, "plateau_revision": 3},
                )
            )
            s.get(Run, run_id).loss_curve = [
                {"step": 1, "loss": 1.0, "length": 8, "heldout_token_acc": None},
                *({"step": steps - d, "loss": 0.4, "length": 12, "heldout_token_acc": 0.36} for d in (100, 50, 0)),
            ]
        s.commit()
    claim_1 = api.client.get("/api/claims", params={"suite": "nl"}).json()[0]
    assert (
        "transformer × parity: not learned by this architecture at this size within 40,000 steps "
        "(3 of 3 seeds plateaued at steps 4,700–6,200, at the L 12 curriculum stage" in claim_1["detail"]
    )
    # each stopped run's slope at the stop and budget share, read from its curve (docs/SCIENCE.md#plateau)
    assert (
        "seed 0 at step 4,700 of 40,000 (12% of its budget), held-out slope +0.00 pp per 1,000 steps "
        "(95% CI +0.00 to +0.00, last 101 steps)" in claim_1["detail"]
    )
