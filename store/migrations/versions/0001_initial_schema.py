"""Initial schema: runs, probe/intervention/patching results, jobs, saved views, API tokens.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 19:36:14.989317
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("suite", sa.String(length=100), nullable=True),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=32), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("pretrained", sa.String(length=300), nullable=True),
        sa.Column("n_layers", sa.Integer(), nullable=False),
        sa.Column("d_model", sa.Integer(), nullable=False),
        sa.Column("n_params", sa.Integer(), nullable=False),
        sa.Column("task_params", sa.JSON(), nullable=False),
        sa.Column("model_config", sa.JSON(), nullable=False),
        sa.Column("train_config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("train_seconds", sa.Float(), nullable=False),
        sa.Column("stopped_early", sa.Boolean(), nullable=False),
        sa.Column("loss_curve", sa.JSON(), nullable=False),
        sa.Column("behaviour", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("config_hash", name=op.f("uq_runs_config_hash")),
    )
    op.create_index(op.f("ix_runs_family"), "runs", ["family"], unique=False)
    op.create_index(op.f("ix_runs_seed"), "runs", ["seed"], unique=False)
    op.create_index(op.f("ix_runs_suite"), "runs", ["suite"], unique=False)
    op.create_index(op.f("ix_runs_task"), "runs", ["task"], unique=False)
    op.create_index("ix_runs_task_family_seed", "runs", ["task", "family", "seed"], unique=False)

    op.create_table(
        "views",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=32), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("page", sa.String(length=100), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_views")),
        sa.UniqueConstraint("slug", name=op.f("uq_views_slug")),
    )
    op.create_table(
        "intervention_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("layer", sa.Integer(), nullable=False),
        sa.Column("eval_length", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=True),
        sa.Column("base_acc", sa.Float(), nullable=False),
        sa.Column("edited_acc", sa.Float(), nullable=False),
        sa.Column("delta_pp", sa.Float(), nullable=False),
        sa.Column("drop_rel_chance", sa.Float(), nullable=True),
        sa.Column("refit_acc", sa.Float(), nullable=True),
        sa.Column("refit_majority", sa.Float(), nullable=True),
        sa.Column("rank_removed", sa.Integer(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("p_holm", sa.Float(), nullable=True),
        sa.Column("significant", sa.Boolean(), nullable=True),
        sa.Column("n_sequences", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_intervention_results_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_intervention_results")),
        sa.UniqueConstraint("run_id", "eval_length", "method", "layer", name="uq_intervention"),
    )
    op.create_index(
        "ix_intervention_results_eval_length_run", "intervention_results", ["eval_length", "run_id"], unique=False
    )

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["parent_id"], ["jobs.id"], name=op.f("fk_jobs_parent_id_jobs")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_jobs_run_id_runs"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_config_hash"), "jobs", ["config_hash"], unique=False)
    op.create_index(op.f("ix_jobs_kind"), "jobs", ["kind"], unique=False)
    op.create_index(op.f("ix_jobs_parent_id"), "jobs", ["parent_id"], unique=False)
    op.create_index(op.f("ix_jobs_state"), "jobs", ["state"], unique=False)

    op.create_table(
        "patching_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("layer", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("eval_length", sa.Integer(), nullable=False),
        sa.Column("recovery", sa.Float(), nullable=True),
        sa.Column("recovery_lo", sa.Float(), nullable=True),
        sa.Column("recovery_hi", sa.Float(), nullable=True),
        sa.Column("ld_clean", sa.Float(), nullable=False),
        sa.Column("ld_corrupted", sa.Float(), nullable=False),
        sa.Column("n_pairs", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_patching_results_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_patching_results")),
        sa.UniqueConstraint("run_id", "eval_length", "layer", "position", name="uq_patching"),
    )
    op.create_table(
        "probe_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("layer", sa.Integer(), nullable=False),
        sa.Column("eval_length", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=False),
        sa.Column("majority_baseline", sa.Float(), nullable=False),
        sa.Column("per_position", sa.JSON(), nullable=False),
        sa.Column("n_train", sa.Integer(), nullable=False),
        sa.Column("n_test", sa.Integer(), nullable=False),
        sa.Column("converged", sa.Boolean(), nullable=False),
        sa.Column("n_iter", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_probe_results_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probe_results")),
        sa.UniqueConstraint("run_id", "eval_length", "layer", name="uq_probe"),
    )
    op.create_index("ix_probe_results_eval_length_run", "probe_results", ["eval_length", "run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_probe_results_eval_length_run", table_name="probe_results")

    op.drop_table("probe_results")
    op.drop_table("patching_results")
    op.drop_index(op.f("ix_jobs_state"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_parent_id"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_kind"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_config_hash"), table_name="jobs")

    op.drop_table("jobs")
    op.drop_index("ix_intervention_results_eval_length_run", table_name="intervention_results")

    op.drop_table("intervention_results")
    op.drop_table("views")
    op.drop_index("ix_runs_task_family_seed", table_name="runs")
    op.drop_index(op.f("ix_runs_task"), table_name="runs")
    op.drop_index(op.f("ix_runs_suite"), table_name="runs")
    op.drop_index(op.f("ix_runs_seed"), table_name="runs")
    op.drop_index(op.f("ix_runs_family"), table_name="runs")

    op.drop_table("runs")
    op.drop_table("api_tokens")
