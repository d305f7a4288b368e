"""API benchmark: submit-to-start latency, and p50/p95 of ``GET /api/runs/{id}/probes`` and
``GET /api/profiles`` over ~1M generated result rows, in Postgres and in SQLite.

    python benchmarks/bench_api.py                       # 1M probe rows, both databases
    python benchmarks/bench_api.py --rows 50000 --db sqlite --requests 50   # a quick look

The data: suites of 5 families × 4 tasks × 3 seeds (60 runs of 12 layers, as Pythia-160M), each
run with probe rows for emb + 12 layers at 5 eval lengths (65 rows, per-position accuracy of
eval-length entries) and project_out intervention rows at L=40 (12 rows); suites are added
until the probe rows reach ``--rows``. Requests go through the ASGI app in process (httpx
TestClient: app + DB, no network). Submit-to-start: a job POSTed to the API, picked up by a
separate ``layerscope worker`` process (fast fake pipeline) — SQLite queue with SQLite, Redis
queue with Postgres — measured as the job's started_at − created_at.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from layerscope_core.registry import EVAL_LENGTHS, FAMILIES, STUDY_TASKS  # noqa: E402

SEEDS = (0, 1, 2)
N_LAYERS = 12
PROBE_ROWS_PER_RUN = (N_LAYERS + 1) * len(EVAL_LENGTHS)

PROBE_COLS = (
    "id",
    "run_id",
    "layer",
    "eval_length",
    "accuracy",
    "majority_baseline",
    "per_position",
    "n_train",
    "n_test",
    "converged",
    "n_iter",
    "config_hash",
)
IV_COLS = (
    "id",
    "run_id",
    "method",
    "layer",
    "eval_length",
    "k",
    "base_acc",
    "edited_acc",
    "delta_pp",
    "drop_rel_chance",
    "refit_acc",
    "refit_majority",
    "rank_removed",
    "p_value",
    "p_holm",
    "significant",
    "n_sequences",
    "seed",
    "config_hash",
)
RUN_COLS = (
    "id",
    "name",
    "suite",
    "family",
    "task",
    "seed",
    "pretrained",
    "n_layers",
    "d_model",
    "n_params",
    "task_params",
    "model_config",
    "train_config",
    "config_hash",
    "checkpoint_id",
    "status",
    "steps",
    "train_seconds",
    "stopped_early",
    "loss_curve",
    "behaviour",
    "created_at",
)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def generate(rows: int, seed: int = 0):
    """Yield (runs, probes, interventions) row tuples in chunks (one suite at a time)."""
    rng = random.Random(seed)
    pools = {L: [json.dumps([round(rng.random(), 3) for _ in range(L)]) for _ in range(32)] for L in EVAL_LENGTHS}
    now = datetime.now(UTC).isoformat()
    run_id = probe_id = iv_id = 0
    suite = 0
    while probe_id < rows:
        runs, probes, ivs = [], [], []
        for task in STUDY_TASKS:
            for family in FAMILIES:
                for s in SEEDS:
                    run_id += 1
                    runs.append(run_row(run_id, f"bench-{suite:04d}", family, task, s, now))
                    probes += probe_rows(rng, pools, run_id, probe_id + 1, late=family != "transformer")
                    probe_id = probes[-1][0]
                    ivs += intervention_rows(rng, run_id, iv_id + 1, s)
                    iv_id = ivs[-1][0]
        suite += 1
        yield runs, probes, ivs


def run_row(run_id: int, suite: str, family: str, task: str, seed: int, now: str) -> tuple:
    """A complete run of 12 layers (``RUN_COLS``)."""
    return (
        run_id,
        f"{family}-{task}-s{seed}",
        suite,
        family,
        task,
        seed,
        None,
        N_LAYERS,
        128,
        830_000,
        "{}",
        "{}",
        "{}",
        uuid.uuid4().hex,
        None,
        "complete",
        1000,
        60.0,
        False,
        "[]",
        json.dumps({str(L): {"token_acc": 0.9} for L in EVAL_LENGTHS}),
        now,
    )


def probe_rows(rng: random.Random, pools: dict[int, list[str]], run_id: int, first_id: int, late: bool) -> list[tuple]:
    """A run's probe rows (``PROBE_COLS``), emb + 12 layers at every eval length, ids from
    ``first_id``: accuracy rising with depth, late (depth⁶) when ``late``."""
    out: list[tuple] = []
    for L in EVAL_LENGTHS:
        for layer in range(-1, N_LAYERS):
            d = (layer + 1) / N_LAYERS
            acc = 0.5 + 0.45 * (d**6 if late else d) + rng.gauss(0, 0.01)
            out.append(
                (first_id + len(out), run_id, layer, L, acc, 0.5, rng.choice(pools[L]), 400, 100, True, 50, "bench")
            )
    return out


def intervention_rows(rng: random.Random, run_id: int, first_id: int, seed: int) -> list[tuple]:
    """A run's project_out rows at L=40 (``IV_COLS``), one per block, ids from ``first_id``."""
    out = []
    for layer in range(N_LAYERS):
        delta = -rng.random() * 30
        out.append(
            (
                first_id + layer,
                run_id,
                "project_out",
                layer,
                40,
                None,
                0.9,
                0.9 + delta / 100,
                delta,
                0.3,
                0.6,
                0.5,
                1,
                0.01,
                0.05,
                True,
                400,
                seed,
                "bench",
            )
        )
    return out


def load_sqlite(path: Path, rows: int) -> dict:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    counts = {"runs": 0, "probe_results": 0, "intervention_results": 0}
    with conn:
        for runs, probes, ivs in generate(rows):
            for table, cols, data in (
                ("runs", RUN_COLS, runs),
                ("probe_results", PROBE_COLS, probes),
                ("intervention_results", IV_COLS, ivs),
            ):
                conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", data)
                counts[table] += len(data)
    conn.execute("ANALYZE")
    conn.close()
    return counts


def load_postgres(url: str, rows: int) -> dict:
    import psycopg

    counts = {"runs": 0, "probe_results": 0, "intervention_results": 0}
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        with conn.cursor() as cur:
            for runs, probes, ivs in generate(rows):
                for table, cols, data in (
                    ("runs", RUN_COLS, runs),
                    ("probe_results", PROBE_COLS, probes),
                    ("intervention_results", IV_COLS, ivs),
                ):
                    with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
                        for row in data:
                            cp.write_row(row)
                    counts[table] += len(data)
            for table in counts:  # ids were given explicitly: move the sequences past them
                cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
    return counts


def timed(client, path: str | Callable[[int], str], n: int, params_fn=None) -> list[float]:
    out: list[float] = []
    for i in range(n):
        params = params_fn(i) if params_fn else None
        t0 = time.perf_counter()
        r = client.get(path(i) if callable(path) else path, params=params)
        out.append((time.perf_counter() - t0) * 1000)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return out


def summary(ms: list[float]) -> dict:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p95_ms": round(pct(ms, 95), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def bench_reads(settings, n_requests: int, n_runs: int, n_suites: int) -> dict:
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from store.session import make_engine, make_sessionmaker
    from worker.queue import JobQueue

    factory = make_sessionmaker(make_engine(settings.resolved_db_url))
    app = create_app(settings, factory, queue=JobQueue.from_settings(settings), background=False)
    rng = random.Random(1)
    res: dict[str, dict] = {}
    with TestClient(app) as c:
        timed(c, "/api/health", 5)
        ids = [rng.randint(1, n_runs) for _ in range(n_requests)]
        res["GET /api/runs/{id}/probes (65 rows)"] = summary(
            timed(c, lambda i: f"/api/runs/{ids[i]}/probes", n_requests)
        )
        res["GET /api/runs/{id}/probes?eval_length=40 (13 rows)"] = summary(
            timed(c, lambda i: f"/api/runs/{ids[i]}/probes", n_requests, lambda i: {"eval_length": 40})
        )
        n_prof = max(5, n_requests // 4)
        suites = [f"bench-{rng.randrange(n_suites):04d}" for _ in range(n_prof)]
        app.state.aggregate_cache.size = 0  # every request computes (no memo)
        res["GET /api/profiles?suite=S (one suite: 60 runs, 20 groups × 5 lengths), uncached"] = summary(
            timed(c, "/api/profiles", n_prof, lambda i: {"suite": suites[i]})
        )
        res["GET /api/profiles?suite=S&eval_length=40, uncached"] = summary(
            timed(c, "/api/profiles", n_prof, lambda i: {"suite": suites[i], "eval_length": 40})
        )
        res["GET /api/profiles?task=parity&family=lstm&eval_length=40 (every suite), uncached"] = summary(
            timed(c, "/api/profiles", 5, lambda i: {"task": "parity", "family": "lstm", "eval_length": 40})
        )
        res["GET /api/profiles (every row), uncached"] = summary(timed(c, "/api/profiles", 1))
        app.state.aggregate_cache.size = 64
        timed(c, "/api/profiles", 1)
        res["GET /api/profiles (every row), memoised (data unchanged)"] = summary(timed(c, "/api/profiles", n_requests))
        app.state.aggregate_cache.size = 0
        res["GET /api/curves?task=parity&family=F&eval_length=40 (every suite), uncached"] = summary(
            timed(
                c,
                "/api/curves",
                5,
                lambda i: {"task": "parity", "eval_length": 40, "family": FAMILIES[i % len(FAMILIES)]},
            )
        )
    factory.kw["bind"].dispose()
    return res


def bench_submit(settings, env: dict, n: int) -> dict:
    """Submit over HTTP (in process) → a separate worker process claims the job."""
    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from store.models import Job
    from store.session import make_engine, make_sessionmaker
    from worker.queue import JobQueue

    factory = make_sessionmaker(make_engine(settings.resolved_db_url))
    queue = JobQueue.from_settings(settings)
    queue.flush()
    app = create_app(settings, factory, queue=queue, background=False)
    proc_env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "LAYERSCOPE_FAKE_STEP_S": "0"}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backend.cli",
            "worker",
            "--name",
            "bench",
            "--device",
            "cpu",
            "--executor",
            "tests.lab.fake_pipeline:execute",
        ],
        env=proc_env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lat = []
    body: dict[str, Any] = {
        "kind": "train",
        "params": {
            "family": "lstm",
            "task": "parity",
            "n_layers": 1,
            "max_steps": 1,
            "measure": {"eval_lengths": [40]},
        },
    }
    try:
        with TestClient(app) as c:
            for i in range(n + 2):
                body["params"]["seed"] = 100_000 + i
                job_id = c.post("/api/jobs", json=body).json()["id"]
                deadline = time.monotonic() + 120
                while True:
                    with factory() as s:
                        job = s.get_one(Job, job_id)
                        if job.state in ("succeeded", "failed"):
                            break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"job {job_id} not picked up")
                    time.sleep(0.02)
                if i >= 2:  # the first two warm the worker up (imports, connections)
                    if job.started_at is None:  # a finished job was started
                        raise RuntimeError(f"job {job_id} finished without a start time")
                    created = job.created_at.replace(tzinfo=None)
                    started = job.started_at.replace(tzinfo=None)
                    lat.append((started - created).total_seconds() * 1000)
    finally:
        worker.terminate()
        worker.wait(30)
    return summary(lat)


def run_one(kind: str, rows: int, n_requests: int, n_submit: int, pg_admin: str, redis_url: str) -> dict:
    from store.migrate import init_db
    from store.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix=f"ls-bench-{kind}-"))
    dbname = None
    env = {}
    if kind == "sqlite":
        db_url = f"sqlite:///{tmp / 'bench.db'}"
        env = {"LAYERSCOPE_DB_URL": db_url, "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp / 'queue.db'}"}
    else:
        import psycopg
        from sqlalchemy.engine import make_url

        dbname = f"ls_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        db_url = make_url(pg_admin).set(drivername="postgresql+psycopg", database=dbname).render_as_string(False)
        env = {
            "LAYERSCOPE_DB_URL": db_url,
            "LAYERSCOPE_QUEUE_URL": redis_url,
            "LAYERSCOPE_QUEUE_NAME": f"bench{uuid.uuid4().hex[:8]}",
        }
    env.update(LAYERSCOPE_HOME=str(tmp), LAYERSCOPE_STORE_DIR=str(tmp / "store"))
    settings = Settings(
        _env_file=None,
        home=tmp,
        db_url=db_url,
        queue_url=env["LAYERSCOPE_QUEUE_URL"],
        queue_name=env.get("LAYERSCOPE_QUEUE_NAME", "layerscope"),
        store_dir=tmp / "store",
    )
    try:
        init_db(db_url)
        t0 = time.perf_counter()
        counts = load_sqlite(Path(db_url.split("///", 1)[1]), rows) if kind == "sqlite" else load_postgres(db_url, rows)
        load_s = time.perf_counter() - t0
        print(f"[{kind}] loaded {counts} in {load_s:.1f} s", file=sys.stderr)
        n_suites = counts["runs"] // (len(FAMILIES) * len(STUDY_TASKS) * len(SEEDS))
        out = {
            "db": kind,
            "rows": counts,
            "load_seconds": round(load_s, 1),
            "reads": bench_reads(settings, n_requests, counts["runs"], n_suites),
        }
        out["submit_to_start"] = bench_submit(settings, env, n_submit)
        out["queue"] = "redis" if kind != "sqlite" else "sqlite"
        return out
    finally:
        if dbname:
            import psycopg

            with psycopg.connect(pg_admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if kind != "sqlite":
            import redis

            r = redis.Redis.from_url(redis_url)
            for key in r.scan_iter(f"huey.*.{env['LAYERSCOPE_QUEUE_NAME']}*"):
                r.delete(key)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="probe result rows to generate")
    ap.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--requests", type=int, default=200, help="requests per read measurement")
    ap.add_argument("--submits", type=int, default=20, help="jobs for the submit-to-start latency")
    ap.add_argument(
        "--pg-admin-url",
        default=os.environ.get("LAYERSCOPE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    ap.add_argument("--redis-url", default=os.environ.get("LAYERSCOPE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    args = ap.parse_args()
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    results = [run_one(k, args.rows, args.requests, args.submits, args.pg_admin_url, args.redis_url) for k in kinds]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    for r in results:
        print(
            f"\n## {r['db']} ({r['rows']['probe_results']:,} probe rows, {r['rows']['intervention_results']:,} "
            f"intervention rows, {r['rows']['runs']:,} runs; loaded in {r['load_seconds']} s)\n"
        )
        print("| request | n | p50 ms | p95 ms |\n|---|---:|---:|---:|")
        for name, s in r["reads"].items():
            print(f"| `{name}` | {s['n']} | {s['p50_ms']} | {s['p95_ms']} |")
        s = r["submit_to_start"]
        print(f"| submit → start ({r['queue']} queue, worker process) | {s['n']} | {s['p50_ms']} | {s['p95_ms']} |")


if __name__ == "__main__":
    main()
