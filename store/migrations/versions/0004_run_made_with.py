"""Which code made each run: ``runs.made_with`` (nullable JSON).

``made_with`` = ``{layerscope, git_commit, python, torch, transformers}`` of the process that
trained the run (``layerscope_core.provenance.code_versions``), beside ``made_on`` (device and
host). A study made in parts can then say which commit made each run, not only which commit
exported the bundle.

Existing runs keep NULL: which code made them was not recorded (a bundle's manifest names the
code of its parts). A plain ``ADD COLUMN`` (no table rebuild), so no child row is touched.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("made_with", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "made_with")
