"""A job storing its results: ``jobs.storing`` (boolean, false by default).

Set by the worker, in one conditional UPDATE that fails once a cancel was requested, while a
result write is in progress; cleared when it is committed. A cancel meanwhile answers 409
"already storing its results" (``store.jobs.request_cancel``), so a cancel answered 200 is
never followed by stored results. A plain ``ADD COLUMN`` with a server default (no table
rebuild); existing jobs read false.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("storing", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("jobs", "storing")
