"""The removal line of each edit's refit probe (``intervention_results.refit_line``).

Measurement version 2 judges "the edit removed the variable" against a line stored with the row:
the best constant guess on the refit's test tokens plus the larger of 2 pp and their one-sided 1 %
binomial margin (docs/SCIENCE.md#removal-line). The column is nullable and left NULL on every row
already stored: version 1 rows were judged at ``refit_majority`` + 2 pp, which the readers apply
where the line is NULL, so no stored row's reading changes. A plain ``ADD COLUMN`` on both
databases; the downgrade drops it.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("intervention_results", sa.Column("refit_line", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("intervention_results") as batch:
        batch.drop_column("refit_line")
