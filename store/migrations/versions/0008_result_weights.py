"""What probes and edits learned: the ``result_weights`` table.

One row per stored probe / intervention result naming the safetensors artifact
(``<store>/artifacts/<sha256>.safetensors``) of its probe weights or removed directions. A new
table: no existing table is rebuilt.

Revision ID: 0008
Revises: 0007 (the lead re-chains at merge)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "result_weights",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("layer", sa.Integer(), nullable=False),
        sa.Column("eval_length", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.String(64), nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("run_id", "kind", "method", "layer", "eval_length", name="uq_result_weights"),
    )
    op.create_index("ix_result_weights_run_id", "result_weights", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_result_weights_run_id", "result_weights")
    op.drop_table("result_weights")
