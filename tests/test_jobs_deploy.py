"""docker-compose.yml and the Dockerfile: the lab deployment's services, environment, health checks."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_volumes(compose) -> None:
    assert {"postgres", "redis", "api", "worker"} <= set(compose["services"])
    assert {"pgdata", "store"} <= set(compose["volumes"])
    svc = compose["services"]
    assert any(v.startswith("pgdata:") for v in svc["postgres"]["volumes"])
    for name in ("api", "worker"):
        assert "store:/store" in svc[name]["volumes"], name


def test_every_service_has_a_health_check(compose) -> None:
    for name, svc in compose["services"].items():
        hc = svc.get("healthcheck")
        assert hc and hc["test"] and hc["test"][0] in ("CMD", "CMD-SHELL"), name
    assert "pg_isready" in " ".join(compose["services"]["postgres"]["healthcheck"]["test"])
    assert "ping" in compose["services"]["redis"]["healthcheck"]["test"]
    assert "/api/health" in " ".join(compose["services"]["api"]["healthcheck"]["test"])


def test_environment_points_at_the_lab_services(compose) -> None:
    for name in ("api", "worker"):
        env = compose["services"][name]["environment"]
        assert (
            env["LAYERSCOPE_DB_URL"].startswith("postgresql+psycopg://")
            and "@postgres:5432/" in env["LAYERSCOPE_DB_URL"]
        )
        assert env["LAYERSCOPE_QUEUE_URL"].startswith("redis://redis:6379")
        assert env["LAYERSCOPE_STORE_DIR"] == "/store"
        deps = compose["services"][name]["depends_on"]
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy"
    api = compose["services"]["api"]
    assert "--host" in api["command"] and "0.0.0.0" in api["command"] and api["ports"]


def test_worker_reserves_a_gpu_and_scales(compose) -> None:
    w = compose["services"]["worker"]
    assert w["command"][:2] == ["layerscope", "worker"]
    devices = w["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"] and devices[0]["count"] == 1
    assert "container_name" not in w and "ports" not in w  # nothing pins it to one replica
    assert int(w["deploy"]["replicas"]) >= 1


def test_dockerfile_installs_the_package_and_serves(compose) -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and 'CMD ["layerscope", "serve"' in text and "USER layerscope" in text
    for name in ("api", "worker"):
        assert compose["services"][name]["build"] == "."


def test_image_copies_every_package_the_install_finds() -> None:
    # a package missing from the image is an ImportError at the first request, not at build
    import tomllib

    root = Path(__file__).resolve().parents[1]
    include = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.rstrip("*") for p in include}
    copied = {line.split()[1] for line in (root / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")}
    assert packages <= copied, f"not copied into the image: {sorted(packages - copied)}"
