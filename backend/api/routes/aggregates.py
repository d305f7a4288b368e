"""Server-side aggregates over seeds: curves, profiles, claims.

Each answer is memoised as its JSON bytes per (filters, data fingerprint): over a million
result rows the aggregate costs seconds, a repeat (the dashboard polling, a second viewer)
costs the fingerprint's few index look-ups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter

from backend.api import across_seeds, queries
from backend.api.across_seeds import ResultCache
from backend.api.deps import UNAUTHORIZED, CacheDep, ReadAuth, Responses, SessionDep
from backend.api.query_params import (
    ControlsQ,
    EvalLengthQ,
    FamilyQ,
    PretrainedQ,
    SuiteQ,
    TaskQ,
    TrainedQ,
)
from backend.api.schemas import Claim, CurvePoint, Profile

router = APIRouter(tags=["aggregates"], dependencies=[ReadAuth], responses=UNAUTHORIZED)

CURVES = TypeAdapter(list[CurvePoint])
PROFILES = TypeAdapter(list[Profile])
CLAIMS = TypeAdapter(list[Claim])
UNKNOWN_SUITE: Responses = {404: {"description": "a named suite is unknown (no run stored, none queued)"}}


def _key(*parts: object) -> tuple:
    return tuple(tuple(p) if isinstance(p, list) else p for p in parts)


def _json(cache: ResultCache, session: Any, key: tuple, adapter: TypeAdapter, compute: Callable[[], list]) -> Response:
    body = cache.get(session, ("json", *key), lambda: adapter.dump_json(adapter.validate_python(compute())))
    return Response(content=body, media_type="application/json")


@router.get(
    "/curves",
    response_model=list[CurvePoint],
    responses=UNKNOWN_SUITE,
    summary="Probe accuracy per layer: mean and 95% t-interval over seeds, one point per suite",
)
def get_curves(
    session: SessionDep,
    cache: CacheDep,
    task: TaskQ = None,
    family: FamilyQ = None,
    eval_length: EvalLengthQ = None,
    suite: SuiteQ = None,
    pretrained: PretrainedQ = None,
    trained: TrainedQ = None,
    controls: ControlsQ = "exclude",
) -> Response:
    queries.require_suites(session, suite)
    flt = queries.RunFilter(
        task=task, family=family, suite=suite, pretrained=pretrained, trained=trained, controls=controls
    )
    return _json(
        cache,
        session,
        _key("curves", task, family, eval_length, suite, pretrained, trained, controls),
        CURVES,
        lambda: across_seeds.curves(session, flt, eval_length),
    )


@router.get(
    "/profiles",
    response_model=list[Profile],
    responses=UNKNOWN_SUITE,
    summary="Profile metrics per (suite, task, family, eval length): mean and 95% t-interval over seeds",
)
def get_profiles(
    session: SessionDep,
    cache: CacheDep,
    task: TaskQ = None,
    family: FamilyQ = None,
    eval_length: EvalLengthQ = None,
    suite: SuiteQ = None,
    pretrained: PretrainedQ = None,
    trained: TrainedQ = None,
) -> Response:
    queries.require_suites(session, suite)
    flt = queries.RunFilter(task=task, family=family, suite=suite, pretrained=pretrained, trained=trained)
    return _json(
        cache,
        session,
        _key("profiles", task, family, eval_length, suite, pretrained, trained),
        PROFILES,
        lambda: across_seeds.profiles(session, flt, eval_length),
    )


@router.get(
    "/claims",
    response_model=list[Claim],
    summary="The study's six claims: a verdict from the stored results of one suite",
    description="The runs read must all belong to one suite: when runs of more than one suite match "
    "(no `suite` given, or several), the answer is 422 at `suite`, naming the suites present "
    "(docs/SCIENCE.md#suites); an unknown suite is a 404.",
    responses=UNKNOWN_SUITE,
)
def get_claims(session: SessionDep, cache: CacheDep, suite: SuiteQ = None) -> Response:
    queries.require_suites(session, suite)  # 404: no verdicts about a suite that holds no run
    try:
        return _json(
            cache,
            session,
            _key("claims", suite),
            CLAIMS,
            lambda: across_seeds.claims(session, queries.RunFilter(suite=suite)),
        )
    except across_seeds.MixedSuites as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "suite"), "msg": str(exc), "input": suite}]
        ) from exc
