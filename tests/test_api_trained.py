"""The "trained runs only" filter: the SQL clause agrees with science.trained.is_trained, and the
curves carry the untrained runs they include."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from science.trained import is_trained
from tests.conftest import seed_runs

CASES = [
    (None, None),
    (None, 0.99),
    (0.5, None),
    (0.989, None),
    (0.99, None),
    (0.995, 0.99),
    (0.95, 0.9),
    (0.85, 0.9),
    (1.0, 1.0),
    (0.999, 1.0),
]


def test_sql_clause_agrees_with_is_trained(db_factory) -> None:
    from backend.api.queries import trained_clause
    from store.models import Run
    from worker import persist

    _, factory = db_factory
    with factory() as s:
        ids = [
            persist.save_run(
                s,
                name=f"r{i}",
                family="lstm",
                task="parity",
                seed=i,
                n_layers=1,
                d_model=4,
                n_params=1,
                config_hash=f"h{i}",
                heldout_acc=h,
                early_stop_acc=c,
            )
            for i, (h, c) in enumerate(CASES)
        ]
        got = dict(s.execute(select(Run.id, trained_clause())).all())
    assert [bool(got[i]) for i in ids] == [is_trained(h, c) for h, c in CASES]
    assert any(got.values()) and not all(got.values())


@pytest.fixture
def mixed(api):
    from sqlalchemy import update

    from store.models import Run

    ids = seed_runs(api.factory, families=("lstm",), tasks=("parity",))
    with api.factory() as s:  # seeds 0 and 1 trained, seed 2 stuck at 0.6
        for rid, acc in zip(ids, (0.995, 1.0, 0.6), strict=True):
            s.execute(update(Run).where(Run.id == rid).values(heldout_acc=acc, early_stop_acc=0.99))
        s.commit()
    api.ids = ids
    return api


def test_curves_filter_and_flag_untrained_runs(mixed) -> None:
    c = mixed.client
    every = c.get("/api/curves", params={"eval_length": 40}).json()
    assert every[0]["n"] == 3 and every[0]["untrained_run_ids"] == [mixed.ids[2]]
    only = c.get("/api/curves", params={"eval_length": 40, "trained": "true"}).json()
    assert only[0]["n"] == 2 and only[0]["untrained_run_ids"] == [] and mixed.ids[2] not in only[0]["run_ids"]
    runs = c.get("/api/runs", params={"trained": "false"}).json()["items"]
    assert [r["id"] for r in runs] == [mixed.ids[2]] and runs[0]["trained"] is False
    profiles = c.get("/api/profiles", params={"eval_length": 40, "trained": "true"}).json()
    assert profiles[0]["n"] == 2
    r = c.get("/api/curves", params={"trained": "maybe"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "trained"]


def test_export_filters_by_trained_and_carries_the_new_fields(mixed) -> None:
    c = mixed.client
    rows = c.get("/api/export/probes.json", params={"trained": "true", "eval_length": 40}).json()
    assert {r["run_id"] for r in rows} == set(mixed.ids[:2])
    assert {"balanced_accuracy", "control_accuracy", "selectivity"} <= set(rows[0])
    iv = c.get("/api/export/interventions.json", params={"trained": "false"}).json()
    assert {r["run_id"] for r in iv} == {mixed.ids[2]}
    assert {"inlp_converged", "inlp_rounds", "n_fit_sequences"} <= set(iv[0])
    curves = c.get(
        "/api/export/curves.json", params={"eval_length": 40, "fields": "layer,untrained_run_ids,selectivity"}
    ).json()
    assert curves[0]["untrained_run_ids"] == [mixed.ids[2]] and "selectivity" in curves[0]
    profiles = c.get("/api/export/profiles.json", params={"eval_length": 40}).json()
    assert profiles and all(r["untrained_run_ids"] == [mixed.ids[2]] for r in profiles)  # the CSV says it too
    csv = c.get("/api/export/profiles.csv", params={"eval_length": 40}).text
    assert "untrained_run_ids" in csv.splitlines()[0]
