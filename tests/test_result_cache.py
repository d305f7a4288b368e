"""The API's result cache: one computation per key at a time (backend.api.across_seeds.ResultCache)."""

from __future__ import annotations

import threading

import pytest

from backend.api.across_seeds import ResultCache

KEY = ("claims", ("s",))
HANG_GUARD_S = 60  # waits below are hang guards, not time limits


class FixedFingerprint(ResultCache):
    """The data never changes: the fingerprint is a constant (no database needed)."""

    @staticmethod
    def fingerprint(session) -> tuple:
        return ("unchanged",)


class SeenWaiting:
    """Stands in for the cache's in-flight event: says when a second request waits on it."""

    def __init__(self, event: threading.Event) -> None:
        self.event, self.waiting = event, threading.Event()

    def wait(self, timeout=None):
        self.waiting.set()
        return self.event.wait(timeout)

    def set(self) -> None:
        self.event.set()


def _first_in_flight(cache: ResultCache, compute) -> tuple[threading.Thread, SeenWaiting, list]:
    """Start a request whose ``compute`` blocks; return its thread, the in-flight event (wrapped)
    and the list its answer (or its error's text) lands in."""
    started = threading.Event()
    got: list = []

    def blocked():
        started.set()
        return compute()

    def request():
        try:
            got.append(cache.get(None, KEY, blocked))
        except RuntimeError as exc:
            got.append(str(exc))

    first = threading.Thread(target=request)
    first.start()
    assert started.wait(HANG_GUARD_S)
    (full,) = cache._running
    seen = cache._running[full] = SeenWaiting(cache._running[full])
    return first, seen, got


def test_a_second_request_for_a_key_being_computed_waits_for_that_result() -> None:
    cache = FixedFingerprint()
    release = threading.Event()
    calls = []

    def compute():
        calls.append(1)
        assert release.wait(HANG_GUARD_S)
        return b"claims"

    first, seen, got = _first_in_flight(cache, compute)
    second: list = []
    waiter = threading.Thread(target=lambda: second.append(cache.get(None, KEY, compute)))
    waiter.start()
    assert seen.waiting.wait(HANG_GUARD_S)  # the second request waits on the first computation
    release.set()
    first.join(HANG_GUARD_S)
    waiter.join(HANG_GUARD_S)
    assert got == second == [b"claims"]
    assert len(calls) == 1 and (cache.misses, cache.hits) == (1, 1)
    assert cache._running == {}


def test_when_the_computation_fails_the_waiting_request_computes_itself() -> None:
    cache = FixedFingerprint()
    release = threading.Event()

    def failing():
        assert release.wait(HANG_GUARD_S)
        raise RuntimeError("database gone")

    first, seen, got = _first_in_flight(cache, failing)
    second: list = []
    waiter = threading.Thread(target=lambda: second.append(cache.get(None, KEY, lambda: b"second")))
    waiter.start()
    assert seen.waiting.wait(HANG_GUARD_S)
    release.set()
    first.join(HANG_GUARD_S)
    waiter.join(HANG_GUARD_S)
    assert got == ["database gone"] and second == [b"second"]
    assert cache.get(None, KEY, lambda: pytest.fail("computed again")) == b"second"


def test_changed_data_is_computed_again() -> None:
    class Changing(ResultCache):
        version = 0

        @staticmethod
        def fingerprint(session) -> tuple:
            return (Changing.version,)

    cache = Changing()
    assert cache.get(None, KEY, lambda: "old") == "old"
    assert cache.get(None, KEY, lambda: pytest.fail("computed again")) == "old"
    Changing.version = 1  # a result row written
    assert cache.get(None, KEY, lambda: "new") == "new"
