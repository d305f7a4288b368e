"""API tokens: shown once at creation, stored as SHA-256 only."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from layerscope_core.text import text_problem
from store.models import ApiToken

TOKEN_PREFIX = "lsk_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, name: str) -> tuple[int, str]:
    """Store a new token's hash under ``name``; return (id, the token) — the only time it is seen."""
    name = name.strip()
    if not name:
        raise ValueError("token name must not be empty")
    if len(name) > 100:
        raise ValueError("token name must be at most 100 characters")
    problem = text_problem(name)
    if problem:
        raise ValueError(f"token name {problem[1]}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, token_hash=hash_token(token))
    session.add(row)
    session.commit()
    return row.id, token


def verify_token(session: Session, token: str | None) -> ApiToken | None:
    """The (unrevoked) token row for ``token``, or None."""
    if not token:
        return None
    digest = hash_token(token)
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == digest, ApiToken.revoked.is_(False))
    ).scalar_one_or_none()
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row


def revoke_token(session: Session, name_or_id: str) -> int:
    """Revoke tokens by id or name; returns how many."""
    q = select(ApiToken).where(ApiToken.revoked.is_(False))
    q = q.where(ApiToken.id == int(name_or_id)) if name_or_id.isdigit() else q.where(ApiToken.name == name_or_id)
    rows = list(session.execute(q).scalars())
    for r in rows:
        r.revoked = True
    session.commit()
    return len(rows)


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token row (revoked ones too), oldest first; the rows hold hashes, never the tokens."""
    return list(session.execute(select(ApiToken).order_by(ApiToken.id)).scalars())
