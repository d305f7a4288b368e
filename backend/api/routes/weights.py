"""What probes and edits learned: ``GET /api/runs/{id}/weights`` lists a run's kept
probe weights and removed directions; ``GET /api/artifacts/{sha256}`` downloads one as a
safetensors file (tensor names and shapes: ``models_store.artifacts``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from backend.api.deps import UNAUTHORIZED, ReadAuth, SessionDep, SettingsDep
from backend.api.query_params import RunIdPath
from backend.api.schemas import ErrorOut
from models_store.artifacts import ArtifactStore
from store.models import ResultWeights, Run

router = APIRouter(tags=["weights"], dependencies=[ReadAuth], responses=UNAUTHORIZED)
ArtifactId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="the artifact's SHA-256")]


class WeightsOut(BaseModel):
    kind: str = Field(description="probe | edit")
    method: str = Field(description="the edit's method; '' for a probe")
    layer: int
    eval_length: int
    artifact_id: str = Field(description="SHA-256 of the safetensors file: GET /api/artifacts/{artifact_id}")
    config_hash: str


@router.get(
    "/runs/{run_id}/weights",
    response_model=list[WeightsOut],
    responses={404: {"model": ErrorOut, "description": "unknown run id"}},
    summary="A run's probe weights and removed directions (safetensors artifacts)",
)
def run_weights(run_id: RunIdPath, session: SessionDep) -> list[WeightsOut]:
    if session.get(Run, run_id) is None:
        raise HTTPException(404, detail=f"run {run_id} not found")
    rows = session.scalars(
        select(ResultWeights)
        .where(ResultWeights.run_id == run_id)
        .order_by(ResultWeights.kind, ResultWeights.method, ResultWeights.eval_length, ResultWeights.layer)
    ).all()
    return [
        WeightsOut(
            kind=w.kind,
            method=w.method,
            layer=w.layer,
            eval_length=w.eval_length,
            artifact_id=w.artifact_id,
            config_hash=w.config_hash,
        )
        for w in rows
    ]


@router.get(
    "/artifacts/{artifact_id}",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": {}}, "description": "the safetensors file"},
        404: {"model": ErrorOut, "description": "no such artifact in this store"},
    },
    summary="Download a probe's weights or an edit's removed directions (safetensors)",
)
def artifact(artifact_id: ArtifactId, settings: SettingsDep) -> Response:
    try:
        data = ArtifactStore(settings.resolved_store_dir).read_bytes(artifact_id)
    except FileNotFoundError:
        raise HTTPException(404, detail=f"artifact {artifact_id} not found in this store") from None
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{artifact_id[:16]}.safetensors"'},
    )
