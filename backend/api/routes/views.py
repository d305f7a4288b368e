"""Saved views: a short link (slug) to a dashboard page and its state."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from backend.api.deps import TOO_LARGE, UNAUTHORIZED, ReadAuth, SessionDep, WriteAuth
from backend.api.schemas import ErrorOut, ViewCreate, ViewCreated, ViewOut
from store.models import SavedView

router = APIRouter(prefix="/views", tags=["views"], responses=UNAUTHORIZED)

SLUG_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: readable aloud
SLUG_LENGTH = 8


def new_slug() -> str:
    return "".join(secrets.choice(SLUG_ALPHABET) for _ in range(SLUG_LENGTH))


def view_url(slug: str) -> str:
    return f"/v/{slug}"


@router.post("", response_model=ViewCreated, status_code=status.HTTP_201_CREATED, dependencies=[WriteAuth],
             responses={**TOO_LARGE, 503: {"model": ErrorOut, "description": "no free slug (retry)"}},
             summary="Save a view; returns its slug and short link")
def create_view(body: ViewCreate, session: SessionDep) -> ViewCreated:
    for _ in range(5):
        slug = new_slug()
        session.add(SavedView(slug=slug, title=body.title, page=body.page, state=body.state))
        try:
            session.commit()
        except IntegrityError:  # a slug collision (1 in 10^12): draw again
            session.rollback()
            continue
        return ViewCreated(slug=slug, url=view_url(slug))
    raise HTTPException(503, detail="could not allocate a unique slug; try again")


@router.get("/{slug}", response_model=ViewOut, responses={404: {"model": ErrorOut}}, dependencies=[ReadAuth],
            summary="A saved view by slug")
def get_view(slug: Annotated[str, Path(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")],
             session: SessionDep) -> ViewOut:
    view = session.execute(select(SavedView).where(SavedView.slug == slug)).scalar_one_or_none()
    if view is None:
        raise HTTPException(404, detail=f"view {slug} not found")
    return ViewOut(slug=view.slug, url=view_url(view.slug), title=view.title, page=view.page, state=view.state,
                   created_at=view.created_at)

