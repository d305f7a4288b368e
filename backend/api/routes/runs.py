"""Runs and their per-layer results."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api import queries
from backend.api.deps import UNAUTHORIZED, ReadAuth, SessionDep
from backend.api.params import (
    EvalLengthQ,
    FamilyQ,
    Limit,
    MethodQ,
    PatchSiteQ,
    Offset,
    PretrainedQ,
    RunIdPath,
    RunSortQ,
    SiteNameQ,
    SeedQ,
    SuiteQ,
    TaskQ,
    TrainedQ,
)
from backend.api.schemas import ErrorOut, InterventionOut, Page, PatchingOut, ProbeOut, RunDetail, RunOut
from layerscope_core.sites import parse_site, site_name

router = APIRouter(prefix="/runs", tags=["runs"], dependencies=[ReadAuth], responses=UNAUTHORIZED)
NOT_FOUND = {404: {"model": ErrorOut, "description": "unknown run id"}}


@router.get("", response_model=Page[RunOut], summary="Runs, filtered and paged (without loss curves)")
def list_runs(
    session: SessionDep, task: TaskQ = None, family: FamilyQ = None, seed: SeedQ = None, suite: SuiteQ = None,
    pretrained: PretrainedQ = None, limit: Limit = 100, offset: Offset = 0, sort: RunSortQ = None,
    trained: TrainedQ = None,
) -> dict:
    flt = queries.RunFilter(task=task, family=family, seed=seed, suite=suite, pretrained=pretrained, trained=trained)
    items, total = queries.list_runs(session, flt, limit, offset, sort)
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/{run_id}", response_model=RunDetail, responses=NOT_FOUND, summary="One run, with its loss curve")
def get_run(run_id: RunIdPath, session: SessionDep) -> dict:
    run = queries.get_run(session, run_id)
    return {c.key: getattr(run, c.key) for c in run.__table__.columns}


@router.get("/{run_id}/probes", response_model=list[ProbeOut], responses=NOT_FOUND,
            summary="Probe accuracy per layer and eval length")
def run_probes(run_id: RunIdPath, session: SessionDep, eval_length: EvalLengthQ = None) -> list[dict]:
    return [{**r, "site_name": site_name("resid_post", r["layer"])} for r in queries.probe_rows(session, run_id, eval_length)]


@router.get("/{run_id}/interventions", response_model=list[InterventionOut], responses=NOT_FOUND,
            summary="Interventions per layer, method and eval length (with the refit probe)")
def run_interventions(
    run_id: RunIdPath, session: SessionDep, eval_length: EvalLengthQ = None, method: MethodQ = None
) -> list[dict]:
    return queries.intervention_rows(session, run_id, eval_length, method)


@router.get("/{run_id}/patching", response_model=list[PatchingOut], responses=NOT_FOUND,
            summary="Activation-patching recovery per site × layer × position")
def run_patching(run_id: RunIdPath, session: SessionDep, eval_length: EvalLengthQ = None,
                 site: PatchSiteQ = None, at: SiteNameQ = None) -> list[dict]:
    """Rows ordered by eval length, site, layer, position. ``recovery`` is None (with ``note``)
    when too few pairs had a usable clean–corrupted gap; ``corrupt_position`` is the grid's
    corrupted token (0-based). ``site_name`` names each row's site in TransformerLens's style;
    ``at`` keeps the rows of those names only (``blocks.2.state``, ``embed``, ...)."""
    wanted = {parse_site(n) for n in at} if at else None
    rows = queries.patching_rows(session, run_id, eval_length, sorted({s for s, _ in wanted}) if wanted else site)
    out = []
    for r in rows:
        if wanted is None or (r["site"], r["layer"]) in wanted:
            out.append({**r, "site_name": site_name(r["site"], r["layer"])})
    return out


