"""Loss curves in a table of their own (``run_curves``), out of ``runs``.

On SQLite a row is one record, its columns in table order: a loss curve (up to 1.7 MB a run,
18 MB over both shipped studies) sat in the middle of each ``runs`` row, so reading any column
stored after it (``behaviour``, ``created_at``, ``heldout_acc``, ``control``, …) walked the curve's
overflow pages: every run listing (``GET /api/runs``, which every page asks for) paid that walk.
The curve moves to ``run_curves`` (``run_id`` primary key → ``runs.id``, ``ON DELETE CASCADE``),
read only where a curve is asked for; every run's curve moves, an empty one too, its JSON copied as
stored. The downgrade puts each curve back (``[]`` for a run without a row) and drops the table;
on SQLite the column goes back to its old place, after ``stopped_early``.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_curves",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("loss_curve", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_curves_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_curves")),
    )
    op.execute("INSERT INTO run_curves (run_id, loss_curve) SELECT id, loss_curve FROM runs")
    with op.batch_alter_table("runs") as batch:  # SQLite: the table rebuilt without the column
        batch.drop_column("loss_curve")


def downgrade() -> None:
    # SQLite: rebuilt with the column back after stopped_early (PostgreSQL appends it)
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    order = [c["name"] for c in sa.inspect(bind).get_columns("runs")]
    order.insert(order.index("stopped_early") + 1, "loss_curve")
    with op.batch_alter_table(
        "runs", recreate="always" if sqlite else "auto", partial_reordering=[tuple(order)]
    ) as batch:
        batch.add_column(sa.Column("loss_curve", sa.JSON(), nullable=False, server_default="[]"))
    op.execute(
        "UPDATE runs SET loss_curve = (SELECT c.loss_curve FROM run_curves c WHERE c.run_id = runs.id) "
        "WHERE id IN (SELECT run_id FROM run_curves)"
    )
    with op.batch_alter_table("runs") as batch:  # as 0001 made it: no server default
        batch.alter_column("loss_curve", existing_type=sa.JSON(), existing_nullable=False, server_default=None)
    op.drop_table("run_curves")
