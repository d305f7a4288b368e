"""Typed dependencies: the DB session, settings, the job queue, and the auth checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from backend.api.across_seeds import ResultCache
from backend.api.schemas import ErrorOut
from backend.core.security import verify_token
from store.settings import Settings
from worker.queue import JobQueue

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="`layerscope token create --name NAME`; needed for writes when the server listens "
    "beyond loopback, and for reads when LAYERSCOPE_REQUIRE_TOKEN_FOR_READS=1. A token sent where "
    "none is needed is checked all the same: a malformed, unknown or revoked one is a 401.",
)


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_db(request: Request) -> Iterator[Session]:
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.close()


def get_factory(request: Request) -> sessionmaker[Session]:
    return request.app.state.session_factory


def get_queue(request: Request) -> JobQueue:
    return request.app.state.queue


def get_cache(request: Request) -> ResultCache:
    return request.app.state.aggregate_cache


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[Session, Depends(get_db)]
QueueDep = Annotated[JobQueue, Depends(get_queue)]
FactoryDep = Annotated[sessionmaker[Session], Depends(get_factory)]
CacheDep = Annotated[ResultCache, Depends(get_cache)]
CredentialsDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def one_header(request: Request, name: str) -> str | None:
    """The value of header ``name`` (any case), sent at most once; None when not sent.

    Raises:
        HTTPException: 400 "N {name} headers: send exactly one" when sent several times: which
            one a proxy or a framework reads differs, so none is trusted."""
    values = request.headers.getlist(name)
    if len(values) > 1:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{len(values)} {name} headers: send exactly one")
    return values[0] if values else None


def single_header(name: str) -> Callable[[Request], None]:
    """A dependency refusing several ``name`` headers with :func:`one_header`'s 400 (the
    route reads the header as a parameter of its own, documented there)."""

    def check(request: Request) -> None:
        one_header(request, name)

    return check


def check_sent_token(request: Request, session: SessionDep) -> None:
    """Every route: an Authorization header, when sent, must carry a valid token — even where
    none is needed (loopback), so a typo in a client's token shows at once rather than the day
    the server moves to the lab network. Several Authorization headers are a 400
    (:func:`one_header`)."""
    header = one_header(request, "Authorization")
    if header is None:
        return
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise _unauthorized(
            "malformed Authorization header: send 'Authorization: Bearer <token>' (layerscope token create)"
        )
    if verify_token(session, token) is None:
        raise _unauthorized("invalid or revoked token")


def _check_token(session: Session, credentials: HTTPAuthorizationCredentials | None, what: str) -> None:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail=f"{what} need a token: send 'Authorization: Bearer <token>' (layerscope token create)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if verify_token(session, credentials.credentials) is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, detail="invalid or revoked token", headers={"WWW-Authenticate": "Bearer"}
        )


def require_write(settings: SettingsDep, session: SessionDep, credentials: CredentialsDep) -> None:
    """Writes need a token when the server listens beyond loopback."""
    if settings.listens_beyond_loopback:
        _check_token(session, credentials, "writes")


def require_read(settings: SettingsDep, session: SessionDep, credentials: CredentialsDep) -> None:
    """Reads need a token only when LAYERSCOPE_REQUIRE_TOKEN_FOR_READS is set."""
    if settings.require_token_for_reads:
        _check_token(session, credentials, "reads")


WriteAuth = Depends(require_write)
ReadAuth = Depends(require_read)
SentTokenCheck = Depends(check_sent_token)
OneIdempotencyKey = Depends(single_header("Idempotency-Key"))


def token_needed(method: str, settings: Settings) -> bool:
    """Whether a request with HTTP ``method`` needs a token under ``settings``: the API's reads
    are GETs (``require_read``), its writes POSTs (``require_write``)."""
    if method.upper() in ("GET", "HEAD"):
        return settings.require_token_for_reads
    return settings.listens_beyond_loopback


Responses = dict[int | str, dict[str, Any]]
"""A route's documented answers besides its own (FastAPI's ``responses=``): status → OpenAPI fields."""

UNAUTHORIZED: Responses = {
    401: {"model": ErrorOut, "description": "a token is needed (or the one sent is malformed, unknown or revoked)"}
}
TOO_LARGE: Responses = {
    400: {"model": ErrorOut, "description": "a body that cannot be parsed (not UTF-8 JSON)"},
    413: {"model": ErrorOut, "description": "request body over LAYERSCOPE_MAX_BODY_BYTES"},
}
