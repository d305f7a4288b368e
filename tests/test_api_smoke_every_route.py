"""On a smoke suite's DB — curves that never reach their majority floor included (5 of 30 broke
/api/profiles with a 500: ``first_95`` took ``min()`` of nothing) — every read route answers
2xx/4xx at every eval length, with the trained switch on, off and unset."""

from __future__ import annotations

from worker.env import WorkerEnv
from worker.job_params import SuiteParams
from worker.pipeline import run_suite

READS = (
    "/api/curves",
    "/api/profiles",
    "/api/export/profiles.csv",
    "/api/export/profiles.json",
    "/api/export/curves.json",
    "/api/export/probes.csv",
    "/api/runs",
    "/api/suites",
    "/api/claims",
)


def test_every_read_route_answers_on_a_smoke_db_at_every_eval_length(api, tmp_path) -> None:
    run_suite(SuiteParams(preset="smoke"), WorkerEnv(api.factory, tmp_path / "store"))
    c = api.client
    profiles = c.get("/api/profiles", params={"suite": "smoke"}).json()
    assert profiles and {p["eval_length"] for p in profiles} == {40, 60}
    for length in (40, 60, 80):
        for trained in (None, "true", "false"):
            for path in READS:
                params = {"suite": "smoke", "eval_length": length, **({"trained": trained} if trained else {})}
                r = c.get(path, params=params)
                assert r.status_code < 500, (path, params, r.status_code, r.text[:300])
    # a metric a curve cannot have is None, never an error (first_95 of a curve below its floor)
    assert all(row.get("first_95") is None or -1 <= row["first_95"] <= 3 for p in profiles for row in p["per_seed"])
