"""Suites: the list (which ones were imported from a bundle) and a suite's results bundle."""

from __future__ import annotations

import io
import re
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel
from sqlalchemy import select

from backend.api.deps import UNAUTHORIZED, ReadAuth, SessionDep
from backend.api.schemas import ErrorOut
from backend.bundle import export_bundle, imported_suites
from store.models import Run
from backend.measured import measured_run_ids
from science.trained import is_trained

router = APIRouter(prefix="/suites", tags=["suites"], dependencies=[ReadAuth], responses=UNAUTHORIZED)

SuiteName = Annotated[str, Path(min_length=1, max_length=100, description="runs.suite")]


class SuiteOut(BaseModel):
    name: str
    n_runs: int
    n_trained: int  # runs trained for their task (science.trained.is_trained), measured or not
    n_measured: int  # runs with probe, intervention and patching results all stored (trained or not)
    imported: bool  # loaded from a results bundle (`layerscope import`), not made by this installation


@router.get("", response_model=list[SuiteOut],
            summary="Suites with their run counts (stored, trained, measured); imported or made here")
def list_suites(session: SessionDep) -> list[dict]:
    rows = session.execute(select(Run.suite, Run.id, Run.heldout_acc, Run.early_stop_acc)
                           .where(Run.suite.is_not(None)).order_by(Run.suite)).all()
    measured = measured_run_ids(session, [r.id for r in rows])
    imported = imported_suites(session)
    out: dict[str, dict] = {}
    for suite, rid, acc, crit in rows:
        d = out.setdefault(suite, dict(name=suite, n_runs=0, n_trained=0, n_measured=0, imported=suite in imported))
        d["n_runs"] += 1
        d["n_trained"] += is_trained(acc, crit)
        d["n_measured"] += rid in measured
    return list(out.values())


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
