"""Saved views: a short link (slug) to a dashboard page and its state."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request, status
from fastapi.exceptions import RequestValidationError
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.api.deps import TOO_LARGE, UNAUTHORIZED, ReadAuth, SessionDep, WriteAuth
from backend.api.queries import NotFound
from backend.api.schemas import ErrorOut, ViewCreate, ViewCreated, ViewOut
from backend.core.security import verify_token
from store.models import SavedView

router = APIRouter(prefix="/views", tags=["views"], responses=UNAUTHORIZED)

SLUG_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: readable aloud
SLUG_LENGTH = 8


def new_slug() -> str:
    return "".join(secrets.choice(SLUG_ALPHABET) for _ in range(SLUG_LENGTH))


def view_url(slug: str) -> str:
    return f"/v/{slug}"


Slug = Annotated[str, Path(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]


class ViewNotFound(NotFound):
    """An unknown slug (404)."""


def find_saved(session: Session, slug: str) -> SavedView:
    view = session.execute(select(SavedView).where(SavedView.slug == slug)).scalar_one_or_none()
    if view is None:
        raise ViewNotFound(f"view {slug} not found")
    return view


def list_saved(session: Session) -> list[dict]:
    """Every saved view, newest first (the fields of :class:`ViewOut`)."""
    rows = session.execute(select(SavedView).order_by(SavedView.id.desc())).scalars()
    return [
        dict(
            slug=v.slug,
            url=view_url(v.slug),
            title=v.title,
            page=v.page,
            state=v.state,
            created_by=v.created_by,
            created_at=v.created_at,
        )
        for v in rows
    ]


def delete_saved(session: Session, slug: str) -> None:
    find_saved(session, slug)
    session.execute(delete(SavedView).where(SavedView.slug == slug))
    session.commit()


def _token_name(request: Request, session: Session) -> str | None:
    """The name of the (valid) token the request sent, if any (the route checks it already)."""
    scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
    row = verify_token(session, token.strip()) if scheme.lower() == "bearer" else None
    return row.name if row is not None else None


def _check_page(page: str, pages: frozenset[str] | None) -> None:
    """A 422 at the body's ``page`` when the dashboard served beside this API has no such page
    (``pages``: its page paths, set where the dashboard is mounted; None: the API alone, any path).
    A trailing slash is the page itself, as the dashboard opens it."""
    if pages is None:
        return
    bare = page if page == "/" else page.rstrip("/")
    if bare not in pages:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("body", "page"),
                    "msg": f"no dashboard page at {page!r}; pages: {', '.join(sorted(pages))}",
                    "input": page,
                }
            ]
        )


@router.post(
    "",
    response_model=ViewCreated,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAuth],
    responses={**TOO_LARGE, 503: {"model": ErrorOut, "description": "no free slug (retry)"}},
    description="With the dashboard mounted, ``page`` must be one of its pages (else a 422 at the field).",
    summary="Save a view; returns its slug and short link",
)
def create_view(body: ViewCreate, session: SessionDep, request: Request) -> ViewCreated:
    _check_page(body.page, getattr(request.app.state, "view_pages", None))
    who = _token_name(request, session)
    for _ in range(5):
        slug = new_slug()
        session.add(SavedView(slug=slug, title=body.title, page=body.page, state=body.state, created_by=who))
        try:
            session.commit()
        except IntegrityError:  # a slug collision (1 in 10^12): draw again
            session.rollback()
            continue
        return ViewCreated(slug=slug, url=view_url(slug))
    raise HTTPException(503, detail="could not allocate a unique slug; try again")


@router.get(
    "",
    response_model=list[ViewOut],
    dependencies=[ReadAuth],
    summary="Saved views, newest first, with who saved them (the token's name, where tokens are on)",
)
def list_views(session: SessionDep) -> list[dict]:
    return list_saved(session)


@router.get(
    "/{slug}",
    response_model=ViewOut,
    responses={404: {"model": ErrorOut}},
    dependencies=[ReadAuth],
    summary="A saved view by slug",
)
def get_view(slug: Slug, session: SessionDep) -> ViewOut:
    view = find_saved(session, slug)
    return ViewOut(
        slug=view.slug,
        url=view_url(view.slug),
        title=view.title,
        page=view.page,
        state=view.state,
        created_by=view.created_by,
        created_at=view.created_at,
    )


@router.delete(
    "/{slug}",
    response_model=ViewOut,
    responses={404: {"model": ErrorOut}},
    dependencies=[WriteAuth],
    summary="Delete a saved view (its short link stops working); returns what was deleted",
)
def delete_view(slug: Slug, session: SessionDep) -> ViewOut:
    view = get_view(slug, session)
    delete_saved(session, slug)
    return view
