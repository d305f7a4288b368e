"""Suites: the list (which ones were imported from a bundle) and a suite's results bundle."""

from __future__ import annotations

import io
import re
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel
from sqlalchemy import case, func, select

from backend.api.deps import UNAUTHORIZED, ReadAuth, SessionDep
from backend.api.schemas import ErrorOut
from backend.bundle import export_bundle, imported_suites
from backend.db.models import Run

router = APIRouter(prefix="/suites", tags=["suites"], dependencies=[ReadAuth], responses=UNAUTHORIZED)

SuiteName = Annotated[str, Path(min_length=1, max_length=100, description="runs.suite")]


class SuiteOut(BaseModel):
    name: str
    n_runs: int
    n_complete: int
    imported: bool  # loaded from a results bundle (`layerscope import`), not made by this installation


@router.get("", response_model=list[SuiteOut], summary="Suites with their run counts; imported or made here")
def list_suites(session: SessionDep) -> list[dict]:
    rows = session.execute(
        select(Run.suite, func.count(Run.id), func.sum(case((Run.status == "complete", 1), else_=0)))
        .where(Run.suite.is_not(None)).group_by(Run.suite).order_by(Run.suite)
    ).all()
    imported = imported_suites(session)
    return [dict(name=name, n_runs=n, n_complete=int(c or 0), imported=name in imported) for name, n, c in rows]


@router.get("/{name}/bundle", summary="The suite's results bundle (zip: manifest.json + tables/*.json)",
            responses={200: {"content": {"application/zip": {}}, "description": "the bundle"},
                       404: {"model": ErrorOut, "description": "no run in this suite"}},
            response_class=Response)
def suite_bundle(name: SuiteName, session: SessionDep) -> Response:
    buf = io.BytesIO()
    try:
        export_bundle(session, name, buf)
    except LookupError as exc:  # names the suites that exist
        raise HTTPException(404, str(exc.args[0])) from exc
    filename = re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".layerscope.zip"
    return Response(buf.getvalue(), media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})
