from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy import text

from backend import __version__
from backend.api.deps import QueueDep, SessionDep
from backend.api.schemas import ErrorOut, Health

router = APIRouter(tags=["health"])


@router.get(
    "/health",
    response_model=Health,
    summary="Liveness and which DB / queue backs the API",
    responses={503: {"model": ErrorOut, "description": "the database is not reachable"}},
)
def health(session: SessionDep, queue: QueueDep) -> Health:
    try:
        session.execute(text("SELECT 1"))
    except Exception as exc:
        raise HTTPException(503, detail=f"database not reachable: {type(exc).__name__}") from exc
    dialect = session.get_bind().dialect.name
    return Health(status="ok", db=dialect, queue=queue.kind, version=__version__)
