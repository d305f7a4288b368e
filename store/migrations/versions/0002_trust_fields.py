"""Fields for trustworthy verdicts and recurrent-state patching.

runs: held-out accuracy, early-stop criterion, where the run was made.
probe_results: balanced accuracy, control-task accuracy and selectivity.
intervention_results: INLP convergence and rounds, sequences the edit was fitted on.
patching_results: the patching site (part of the unique key), corruption position, dropped pairs, a note.

Only columns are added, plus one rebuild of ``patching_results`` (a leaf table: nothing
references it) for its unique key; ``runs`` is never rebuilt.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("heldout_acc", sa.Float(), nullable=True))
    op.add_column("runs", sa.Column("early_stop_acc", sa.Float(), nullable=True))
    op.add_column("runs", sa.Column("made_on", sa.String(length=200), nullable=True))
    op.add_column("probe_results", sa.Column("balanced_accuracy", sa.Float(), nullable=True))
    op.add_column("probe_results", sa.Column("control_accuracy", sa.Float(), nullable=True))
    op.add_column("probe_results", sa.Column("selectivity", sa.Float(), nullable=True))
    op.add_column("intervention_results", sa.Column("inlp_converged", sa.Boolean(), nullable=True))
    op.add_column("intervention_results", sa.Column("inlp_rounds", sa.Integer(), nullable=True))
    op.add_column("intervention_results", sa.Column("n_fit_sequences", sa.Integer(), nullable=True))
    with op.batch_alter_table("patching_results") as batch:
        batch.add_column(sa.Column("site", sa.String(length=16), nullable=False, server_default="resid_post"))
        batch.add_column(sa.Column("corrupt_position", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("n_dropped", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("note", sa.String(length=300), nullable=True))
        batch.drop_constraint("uq_patching", type_="unique")
        batch.create_unique_constraint("uq_patching", ["run_id", "eval_length", "site", "layer", "position"])
    # Runs made before this revision: backfill the criterion from their stored train config and
    # the held-out accuracy from the last evaluated point of their loss curve (done in Python,
    # portable across SQLite and PostgreSQL).
    conn = op.get_bind()
    runs = sa.table(
        "runs",
        sa.column("id", sa.Integer),
        sa.column("train_config", sa.JSON),
        sa.column("loss_curve", sa.JSON),
        sa.column("heldout_acc", sa.Float),
        sa.column("early_stop_acc", sa.Float),
    )
    for rid, train_config, curve in conn.execute(sa.select(runs.c.id, runs.c.train_config, runs.c.loss_curve)):
        accs = [p.get("heldout_token_acc") for p in (curve or []) if isinstance(p, dict)]
        accs = [a for a in accs if a is not None]
        crit = (train_config or {}).get("early_stop_acc", 0.99)
        conn.execute(
            sa.update(runs).where(runs.c.id == rid).values(heldout_acc=accs[-1] if accs else None, early_stop_acc=crit)
        )


def downgrade() -> None:
    with op.batch_alter_table("patching_results") as batch:
        batch.drop_constraint("uq_patching", type_="unique")
        batch.create_unique_constraint("uq_patching", ["run_id", "eval_length", "layer", "position"])
        batch.drop_column("note")
        batch.drop_column("n_dropped")
        batch.drop_column("corrupt_position")
        batch.drop_column("site")
    for table, cols in (
        ("intervention_results", ("n_fit_sequences", "inlp_rounds", "inlp_converged")),
        ("probe_results", ("selectivity", "control_accuracy", "balanced_accuracy")),
        ("runs", ("made_on", "early_stop_acc", "heldout_acc")),
    ):
        for col in cols:
            op.drop_column(table, col)
