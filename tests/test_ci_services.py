"""In CI (``CI`` set) an unreachable PostgreSQL or Redis fails the tests that need it instead of
skipping them, so CI cannot go green without testing the lab path."""

from __future__ import annotations

import pytest

from tests.conftest import in_ci, require_service


@pytest.mark.parametrize(
    "value, expected",
    [("true", True), ("1", True), ("yes", True), ("", False), ("false", False), ("0", False), (None, False)],
)
def test_in_ci_reads_the_ci_variable(monkeypatch, value, expected) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_an_unreachable_service_skips_outside_ci(monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"Redis not reachable at redis://x:1 \(ConnectionError: no\)"):
        require_service("Redis", "redis://x:1", "ConnectionError: no")


def test_an_unreachable_service_fails_in_ci(monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"PostgreSQL not reachable at pg://x \(refused\): CI must test"):
        require_service("PostgreSQL", "pg://x", "refused")


def test_a_reachable_service_neither_skips_nor_fails(monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    require_service("Redis", "redis://x:1", None)
