"""Server-side aggregates over seeds: curves, profiles, claims (memoised per data version)."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api import aggregate, queries
from backend.api.deps import CacheDep, ReadAuth, SessionDep
from backend.api.params import EvalLengthQ, FamilyQ, PretrainedQ, SuiteQ, TaskQ
from backend.api.schemas import Claim, CurvePoint, Profile

router = APIRouter(tags=["aggregates"], dependencies=[ReadAuth])


def _key(*parts: object) -> tuple:
    return tuple(tuple(p) if isinstance(p, list) else p for p in parts)


@router.get("/curves", response_model=list[CurvePoint],
            summary="Probe accuracy per layer: mean and 95% t-interval over seeds")
def get_curves(session: SessionDep, cache: CacheDep, task: TaskQ = None, family: FamilyQ = None,
               eval_length: EvalLengthQ = None, suite: SuiteQ = None, pretrained: PretrainedQ = None) -> list[dict]:
    flt = queries.RunFilter(task=task, family=family, suite=suite, pretrained=pretrained)
    return cache.get(session, _key("curves", task, family, eval_length, suite, pretrained),
                     lambda: aggregate.curves(session, flt, eval_length))


@router.get("/profiles", response_model=list[Profile],
            summary="SPEC's profile metrics per (task, family, eval length): mean and 95% t-interval over seeds")
def get_profiles(session: SessionDep, cache: CacheDep, task: TaskQ = None, family: FamilyQ = None,
                 eval_length: EvalLengthQ = None, suite: SuiteQ = None, pretrained: PretrainedQ = None) -> list[dict]:
    flt = queries.RunFilter(task=task, family=family, suite=suite, pretrained=pretrained)
    return cache.get(session, _key("profiles", task, family, eval_length, suite, pretrained),
                     lambda: aggregate.profiles(session, flt, eval_length))


@router.get("/claims", response_model=list[Claim], summary="SPEC's six claims: a verdict from the stored results")
def get_claims(session: SessionDep, cache: CacheDep, suite: SuiteQ = None) -> list[dict]:
    return cache.get(session, _key("claims", suite), lambda: aggregate.claims(session, queries.RunFilter(suite=suite)))
