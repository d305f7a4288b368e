"""Controls and stop reasons (docs/SCIENCE.md#controls, #plateau, #random-removal).

- ``runs.control``: ``"init"`` for a random-init control run (the same architecture and seed as
  a trained run, not trained, probed only); NULL for every other run.
- ``runs.stop_reason`` (``trained`` | ``plateau`` | ``budget`` | ``time_limit`` |
  ``rebuild_step``), ``runs.best_heldout_acc`` and ``runs.best_step``: why training stopped and
  its best held-out accuracy at the training length.
- ``probe_results.type_accuracy``: probe accuracy per token type (``{"open": acc, ...}``).
- ``intervention_results.random_delta_pp`` / ``random_delta_lo`` / ``random_delta_hi`` /
  ``random_draws``: the behavioural change when the same number of random orthonormal
  directions is removed at the same layer (mean and range over the draws, pp).

Existing rows keep NULL (not measured). Plain ``ADD COLUMN``s: no table is rebuilt, so no child
row is touched (a batch rebuild of ``runs`` on SQLite cascades deletes).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_COLUMNS: tuple[sa.Column[Any], ...] = (
    sa.Column("control", sa.String(16), nullable=True),
    sa.Column("stop_reason", sa.String(16), nullable=True),
    sa.Column("best_heldout_acc", sa.Float(), nullable=True),
    sa.Column("best_step", sa.Integer(), nullable=True),
)
INTERVENTION_COLUMNS: tuple[sa.Column[Any], ...] = (
    sa.Column("random_delta_pp", sa.Float(), nullable=True),
    sa.Column("random_delta_lo", sa.Float(), nullable=True),
    sa.Column("random_delta_hi", sa.Float(), nullable=True),
    sa.Column("random_draws", sa.Integer(), nullable=True),
)


def upgrade() -> None:
    for col in RUN_COLUMNS:
        op.add_column("runs", col)
    op.add_column("probe_results", sa.Column("type_accuracy", sa.JSON(), nullable=True))
    for col in INTERVENTION_COLUMNS:
        op.add_column("intervention_results", col)


def downgrade() -> None:
    for col in INTERVENTION_COLUMNS:
        op.drop_column("intervention_results", col.name)
    op.drop_column("probe_results", "type_accuracy")
    for col in RUN_COLUMNS:
        op.drop_column("runs", col.name)
