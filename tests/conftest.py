"""Shared fixtures: a temp SQLite URL, a throwaway Postgres database, a Redis URL, settings.

Postgres / Redis fixtures skip the test when the service is not reachable — except when the
environment variable ``CI`` is set (CI runs with ``CI=true``): there an unreachable service FAILS
the test, so CI cannot pass without testing the lab path. Override the servers with
``LAYERSCOPE_TEST_PG_ADMIN_URL`` (a libpq URL to a database that may run ``CREATE DATABASE``) and
``LAYERSCOPE_TEST_REDIS_URL``.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# One intra-op thread per test process (and the servers/workers it starts, which inherit the
# environment): the browser and lab tests run several processes on a 2-core machine, and
# OpenMP threads spin-waiting against each other made small models ~50x slower there.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.lab.fake_pipeline` must import in-process and in workers
    sys.path.insert(0, str(ROOT))

FAKE_EXECUTOR = "tests.lab.fake_pipeline:execute"
PG_ADMIN_URL = os.environ.get("LAYERSCOPE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LAYERSCOPE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _pg_admin():
    import psycopg

    return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)


def postgres_error() -> str | None:
    """Why PostgreSQL cannot be used (None: it can)."""
    try:
        with _pg_admin() as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:  # noqa: BLE001 - reported: the test skips (or fails in CI) with it
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def redis_error() -> str | None:
    """Why Redis cannot be used (None: it can)."""
    try:
        import redis

        return None if redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping() else "PING failed"
    except Exception as exc:  # noqa: BLE001 - reported: the test skips (or fails in CI) with it
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def postgres_available() -> bool:
    return postgres_error() is None


def redis_available() -> bool:
    return redis_error() is None


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to anything but empty / 0 / false / no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_service(name: str, url: str, error: str | None) -> None:
    """Skip the test when the service is unreachable; in CI, fail it instead."""
    if error is None:
        return
    message = f"{name} not reachable at {url} ({error})"
    if in_ci():
        pytest.fail(
            f"{message}: CI must test the lab path — start the service (.ci/run starts PostgreSQL "
            f"and Redis) or point LAYERSCOPE_TEST_PG_ADMIN_URL / LAYERSCOPE_TEST_REDIS_URL at one",
            pytrace=False,
        )
    pytest.skip(message)


def _sqlalchemy_pg_url(dbname: str) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(PG_ADMIN_URL).set(drivername="postgresql+psycopg", database=dbname)
    return url.render_as_string(hide_password=False)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLAlchemy URL of an empty SQLite file in this test's temp folder."""
    return f"sqlite:///{tmp_path / 'layerscope.db'}"


@pytest.fixture(scope="session")
def pg_error() -> str | None:
    return postgres_error()


@pytest.fixture
def pg_url(pg_error: str | None) -> Iterator[str]:
    """A fresh, empty Postgres database for this test (dropped afterwards); skipped when
    PostgreSQL is unreachable, failed when that happens in CI."""
    require_service("PostgreSQL", PG_ADMIN_URL, pg_error)
    name = f"ls_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _sqlalchemy_pg_url(name)
    finally:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_err() -> str | None:
    return redis_error()


@pytest.fixture
def redis_url(redis_err: str | None) -> str:
    """The Redis URL (skipped when Redis is unreachable, failed in CI). Pair with ``queue_name``."""
    require_service("Redis", REDIS_URL, redis_err)
    return REDIS_URL


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A unique Huey queue name, so parallel test runs never share a Redis queue."""
    name = f"lstest{uuid.uuid4().hex[:10]}"
    yield name
    if redis_available():
        import redis

        conn = redis.Redis.from_url(REDIS_URL)
        for key in conn.scan_iter(f"huey.*.{name}*"):
            conn.delete(key)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., object]:
    """Build a Settings rooted in this test's temp folder (env vars cannot leak in)."""
    from store.settings import Settings

    def _make(**overrides):
        values = {
            "home": tmp_path / "home",
            "db_url": f"sqlite:///{tmp_path / 'layerscope.db'}",
            "queue_url": f"sqlite:///{tmp_path / 'queue.db'}",
            "store_dir": tmp_path / "store",
            "cors_origins": [],
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)

    return _make


@pytest.fixture
def db_factory(make_settings):
    """(settings, session factory) on a migrated temp SQLite DB with a temp SQLite queue."""
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker

    settings = make_settings()
    init_db(settings.resolved_db_url)
    engine = make_engine(settings.resolved_db_url)
    yield settings, make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def api(db_factory):
    """A TestClient on the API (no dashboard) over a migrated temp SQLite DB and SQLite queue.

    Yields a namespace: ``client``, ``settings``, ``factory``, ``queue``, ``app``."""
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from backend.api.main import create_app
    from worker.queue import JobQueue

    settings, factory = db_factory
    queue = JobQueue.from_settings(settings)
    queue.flush()
    app = create_app(settings, factory, queue=queue, background=False)
    with TestClient(app) as client:
        yield SimpleNamespace(client=client, settings=settings, factory=factory, queue=queue, app=app)


def _no_network(*args, **kwargs):
    raise AssertionError("tried to reach the network")


@pytest.fixture
def hub_offline(monkeypatch):
    """No Hugging Face hub: ``HF_HUB_OFFLINE`` set, and any network lookup fails the test."""
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)


@pytest.fixture
def cli_home(tmp_path, monkeypatch) -> Iterator[Path]:
    """The CLI's settings under ``tmp_path`` (``home/``, ``cli.db``, ``queue.db``, ``store/``), the
    settings cache cleared before and after; yields ``tmp_path``."""
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def seed_runs(
    factory,
    families=("lstm", "transformer"),
    tasks=("parity", "dyck"),
    seeds=(0, 1, 2),
    eval_lengths=(40, 60),
    n_layers=2,
    suite="t",
) -> list[int]:
    """Store runs with probe, intervention and patching rows through ``worker.persist``."""
    from tests.lab.fake_pipeline import probe_rows
    from worker import persist

    ids = []
    with factory() as s:
        for task in tasks:
            for family in families:
                for seed in seeds:
                    run_id = persist.save_run(
                        s,
                        name=f"{family}-{task}-s{seed}",
                        suite=suite,
                        family=family,
                        task=task,
                        seed=seed,
                        n_layers=n_layers,
                        d_model=8,
                        n_params=100,
                        config_hash=f"{suite}-{family}-{task}-{seed}",
                        loss_curve=[{"step": 1, "loss": 1.0}],
                        behaviour={"40": {"token_acc": 0.9}},
                    )
                    persist.replace_probe_results(
                        s, run_id, probe_rows(n_layers, list(eval_lengths), seed, family, "p")
                    )
                    persist.replace_intervention_results(
                        s,
                        run_id,
                        [
                            dict(
                                method=m,
                                layer=layer,
                                eval_length=L,
                                base_acc=0.9,
                                edited_acc=0.9 - 0.1 * (layer + 1),
                                delta_pp=-10.0 * (layer + 1),
                                drop_rel_chance=0.2,
                                refit_acc=0.6,
                                refit_majority=0.5,
                                rank_removed=1,
                                p_value=0.01,
                                p_holm=0.02,
                                significant=True,
                                n_sequences=10,
                                seed=seed,
                                config_hash="i",
                            )
                            for L in eval_lengths
                            for m in ("mean", "project_out")
                            for layer in range(n_layers)
                        ],
                    )
                    persist.replace_patching_results(
                        s,
                        run_id,
                        [
                            dict(
                                layer=layer,
                                position=p,
                                eval_length=40,
                                recovery=(layer + 1) / n_layers,
                                recovery_lo=0.0,
                                recovery_hi=1.0,
                                ld_clean=2.0,
                                ld_corrupted=-2.0,
                                n_pairs=8,
                                config_hash="q",
                            )
                            for layer in range(-1, n_layers)
                            for p in (5, 20)
                        ],
                    )
                    ids.append(run_id)
    return ids


def find_component(c, cid):
    """The Dash component with id ``cid`` in the layout tree under ``c`` (depth first), or None."""
    if getattr(c, "id", None) == cid:
        return c
    kids = getattr(c, "children", None)
    for k in kids if isinstance(kids, (list, tuple)) else [kids]:
        if k is not None and not isinstance(k, str) and (hit := find_component(k, cid)) is not None:
            return hit
    return None
