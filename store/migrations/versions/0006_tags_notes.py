"""Tags and notes on runs and suites, who saved a view, and a job's queue priority.

- ``runs.tags`` (JSON list of strings) and ``runs.notes`` (text): a researcher's labels and
  remarks on a run; searched by ``GET /api/runs?q=`` and ``layerscope runs list --search``.
- ``suite_notes``: the same for a suite (keyed by the suite's name; a suite has no row of its own).
- ``jobs.priority`` (int, default 0): the job's priority on the queue; jobs a person launches
  (``POST /api/jobs``: 10, a suite's children inherit it) are taken before background suite jobs
  (``layerscope demo``, ``suite --submit``: 0).
- ``views.created_by``: the name of the token that saved the view (None: no token sent).

Plain ``ADD COLUMN`` and a new table: ``runs`` is never rebuilt (a batch rebuild on SQLite with
foreign keys on would cascade-delete every result row).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("tags", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("notes", sa.Text(), nullable=True))
    op.add_column("views", sa.Column("created_by", sa.String(100), nullable=True))
    op.add_column("jobs", sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "suite_notes",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("tags", sa.JSON(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_suite_notes"),
    )


def downgrade() -> None:
    op.drop_table("suite_notes")
    op.drop_column("jobs", "priority")
    op.drop_column("views", "created_by")
    op.drop_column("runs", "notes")
    op.drop_column("runs", "tags")
