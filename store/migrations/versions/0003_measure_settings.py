"""Measurement settings as a record of their own (``measure_settings``), and the result rows' link to it.

``measure_settings``: one row per distinct set of effective measurement settings, keyed by
``config_hash`` (unique; SHA-256 over the canonical JSON of the other settings columns, see
``science.records.MeasureSettingsRecord.settings_hash``):

- ``params``: the ``MeasureParams`` JSON the measurements ran with (``worker.job_params``);
- ``eval_lengths``: the resolved eval lengths of probes and interventions (ints, ascending);
- ``patch_eval_length``: the patching grid's sequence length L;
- ``fit_length``: the sequence length interventions were fitted at (the run's ``train_length``);
- ``intervention_layers``: the layers edited (None = every block);
- ``created_at``: when the row was first written (UTC).

``probe_results``, ``intervention_results``, ``patching_results`` get a nullable
``settings_id`` (foreign key, ``ON DELETE SET NULL``: a settings row is shared, removing it
never removes results).

Existing result rows keep ``settings_id`` NULL, on purpose: their settings were never
recorded (only the hash of the job parameters was), and a backfilled row rebuilt from the
behaviour keys and the documented defaults would state settings nobody knows were used. Nothing stored
before changes, so the upgrade test's row counts and checksums stay equal.

The three result tables are leaves (nothing references them), so the SQLite batch rebuild
that adds the foreign key is safe (``store.migrate.init_db`` also runs it with foreign keys
off); ``runs`` is not rebuilt.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RESULT_TABLES = ("probe_results", "intervention_results", "patching_results")


def upgrade() -> None:
    op.create_table(
        "measure_settings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("eval_lengths", sa.JSON(), nullable=False),
        sa.Column("patch_eval_length", sa.Integer(), nullable=True),
        sa.Column("fit_length", sa.Integer(), nullable=True),
        sa.Column("intervention_layers", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measure_settings")),
        sa.UniqueConstraint("config_hash", name=op.f("uq_measure_settings_config_hash")),
    )
    for table in RESULT_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("settings_id", sa.Integer(), nullable=True))
            batch.create_foreign_key(
                f"fk_{table}_settings_id_measure_settings",
                "measure_settings",
                ["settings_id"],
                ["id"],
                ondelete="SET NULL",
            )


def downgrade() -> None:
    for table in RESULT_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"fk_{table}_settings_id_measure_settings", type_="foreignkey")
            batch.drop_column("settings_id")
    op.drop_table("measure_settings")
