"""The eval lengths a page offers, from the runs it shows: ``GET /api/suites`` says, per suite,
the lengths its runs were probed at (``eval_lengths``; a file task's is its rows' length) and
the lengths they trained at (``train_lengths``). The pickers list those, a length the URL names
that the suite was never measured at gives way to the suite's own (its training length when it
was probed there, else its first), and the page's titles and CSVs read the resolved state. When
the API cannot say, or the suite has no probe rows yet, the study's lengths stand
(``layerscope_core.registry.EVAL_LENGTHS``)."""

from __future__ import annotations

from typing import Any

from dashboard.api_client import ApiClient, ApiError
from dashboard.suites import default_suite, suite_list
from dashboard.theme import EVAL_LENGTHS, TRAIN_LENGTH


def suite_lengths(api: ApiClient, suite: str | None, kind: str = "eval") -> tuple[list[int], list[int]]:
    """(the eval lengths ``suite`` was probed at — ``kind="patch"``: its patching grids were
    measured at, else the probed ones —, the lengths its runs trained at); the default suite's
    when ``suite`` is None; the study's lengths and ``TRAIN_LENGTH`` when the API cannot say or
    the suite has no probe rows."""
    name = suite or default_suite(api)
    try:
        row = next((x for x in suite_list(api) if x.get("name") == name), None) or {}
    except (ApiError, AttributeError, TypeError):
        row = {}
    lengths = [int(x) for x in (kind == "patch" and row.get("patch_lengths")) or row.get("eval_lengths") or []]
    trains = [int(x) for x in row.get("train_lengths") or []]
    if not lengths:
        return list(EVAL_LENGTHS), trains or [TRAIN_LENGTH]
    return lengths, trains


def first_length(lengths: list[int], trains: list[int]) -> int:
    """The length a page opens on: a training length the suite was probed at, else its first."""
    return next((L for L in trains if L in lengths), lengths[0])


def length_options(
    api: ApiClient, suite: str | None, *, mark_train: bool = True, prefix: str = "L=", kind: str = "eval"
) -> list[dict[str, Any]]:
    """The picker's options: ``L=20 (train)``, ``L=40``, … (``prefix`` before each length)."""
    lengths, trains = suite_lengths(api, suite, kind)
    return [{"label": f"{prefix}{L}" + (" (train)" if mark_train and L in trains else ""), "value": L} for L in lengths]


def resolve_length(api: ApiClient, state: dict, key: str = "length", kind: str = "eval") -> dict:
    """``state`` with its one eval length (``key``) set to one the suite was measured at
    (``kind``, as :func:`suite_lengths`): kept when it is one, else :func:`first_length`."""
    lengths, trains = suite_lengths(api, state.get("suite"), kind)
    value = state.get(key)
    return state if value in lengths else {**state, key: first_length(lengths, trains)}


def resolve_lengths(api: ApiClient, state: dict, key: str = "lengths") -> dict:
    """``state`` with its eval lengths (``key``, a list; empty = every length) kept to those the
    suite was probed at; none left: :func:`first_length`."""
    value = state.get(key) or []
    if not value:
        return state
    lengths, trains = suite_lengths(api, state.get("suite"))
    kept = [L for L in value if L in lengths]
    return {**state, key: kept or [first_length(lengths, trains)]}
