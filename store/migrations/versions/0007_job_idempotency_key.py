"""A job's idempotency key: ``jobs.idempotency_key`` (nullable, unique).

``POST /api/jobs`` with an ``Idempotency-Key`` header stores the key on the job it makes; the
same key again answers that job instead of making a second one (a double click on Launch, a
client retrying after a timeout). Existing jobs keep NULL. A plain ``ADD COLUMN`` and a new
index (no table rebuild), so no row of ``runs`` or its children is touched.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("idempotency_key", sa.String(200), nullable=True))
    op.create_index("ix_jobs_idempotency_key", "jobs", ["idempotency_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_jobs_idempotency_key", table_name="jobs")
    op.drop_column("jobs", "idempotency_key")
