"""The measurement version of each result row (``measurement_version``).

``probe_results``, ``intervention_results`` and ``patching_results`` get an integer
``measurement_version`` (not null, server default 1): the version of the measurement code that
made the row (``science.measurement_version``). Every row stored before this migration was
made by version 1, so the server default states a fact, not a guess; the worker writes the
current version with each new row. Adding a column with a constant default rebuilds nothing on
PostgreSQL; on SQLite it is a plain ``ADD COLUMN``.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RESULT_TABLES = ("probe_results", "intervention_results", "patching_results")


def upgrade() -> None:
    for table in RESULT_TABLES:
        op.add_column(table, sa.Column("measurement_version", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    for table in RESULT_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("measurement_version")
