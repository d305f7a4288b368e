"""Indexes the pages read ``runs`` through (``ix_runs_created_at``, ``ix_runs_read``).

On SQLite a row is one record, its columns in table order: reading a column stored after
``loss_curve`` (``created_at``, ``heldout_acc``, ``control``, …) walks the overflow pages of the
loss curve, up to megabytes per run. With both shipped studies imported (40 MB of loss curves)
the result cache's fingerprint (``max(created_at)``) took 0.13–0.25 s on every request, and every
aggregate's read of its runs as long. ``ix_runs_created_at`` answers the fingerprint from the
index; ``ix_runs_read`` (suite first) holds every column the aggregates and the suite counts read
of a run, so those queries read the index, not the rows (``backend.api.across_seeds`` reads the runs
alone, then their result rows by id). PostgreSQL keeps large values apart (TOAST) and only
gains two small indexes.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# store.models.RUNS_READ_COLUMNS, as of this revision
READ_COLUMNS = [
    "suite",
    "id",
    "task",
    "family",
    "seed",
    "name",
    "pretrained",
    "n_layers",
    "control",
    "heldout_acc",
    "early_stop_acc",
    "best_heldout_acc",
    "stop_reason",
    "status",
    "config_hash",
]


def upgrade() -> None:
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_index("ix_runs_read", "runs", READ_COLUMNS)


def downgrade() -> None:
    op.drop_index("ix_runs_read", table_name="runs")
    op.drop_index("ix_runs_created_at", table_name="runs")
