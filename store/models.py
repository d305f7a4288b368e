"""SQLAlchemy 2 models: the results schema shared by the API and the worker.

Layer convention everywhere: ``layer`` is an int, ``-1`` is ``emb`` (the embedding output),
``0..n_layers-1`` is the residual stream after block ℓ (docs/SCIENCE.md#layers).
Result tables carry a unique key so a re-run job replaces rows instead of doubling them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.sql.elements import KeyedColumnElement


def utcnow() -> datetime:
    return datetime.now(UTC)


# Named constraints so Alembic migrations (SQLite batch mode included) can address them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


# the columns of ``runs`` the aggregates and the suite counts read of every run, suite first
# (ix_runs_read): on SQLite a query of these alone reads the index, not the rows
RUNS_READ_COLUMNS = (
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
)


class Run(Base):
    """A trained (or fine-tuned) model: family, task, seed, configs, curves, behaviour.

    Its loss curve is a row of ``run_curves`` (:class:`RunCurve`, migration 0012), read only where
    asked for: ``run.loss_curve`` (``[]`` without one) reads and writes it.
    """

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    suite: Mapped[str | None] = mapped_column(String(100), index=True)
    family: Mapped[str] = mapped_column(String(32), index=True)
    task: Mapped[str] = mapped_column(String(32), index=True)
    seed: Mapped[int] = mapped_column(Integer, index=True)
    pretrained: Mapped[str | None] = mapped_column(String(300))  # hub name or folder, None = from scratch
    n_layers: Mapped[int] = mapped_column(Integer)
    d_model: Mapped[int] = mapped_column(Integer)
    n_params: Mapped[int] = mapped_column(Integer)
    task_params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    model_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    train_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config_hash: Mapped[str] = mapped_column(String(64), unique=True)
    checkpoint_id: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="trained")
    steps: Mapped[int] = mapped_column(Integer, default=0)
    train_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    stopped_early: Mapped[bool] = mapped_column(Boolean, default=False)
    # {"40": {"token_acc": float, "last_acc": float, "n": int}, "60": {...}}
    behaviour: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Held-out token accuracy at the training length when training ended (0..1) and the
    # early-stop criterion it was trained for: a run is "trained" when the first reaches the second.
    heldout_acc: Mapped[float | None] = mapped_column(Float)
    early_stop_acc: Mapped[float | None] = mapped_column(Float)
    # Where the run was made (device and host), for the results bundle's provenance.
    made_on: Mapped[str | None] = mapped_column(String(200))
    # Which code made it: {layerscope, git_commit, python, torch, transformers} (None: before 0004).
    made_with: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # "init": a random-init control (same architecture and seed, untrained, probes only); None
    # for every other run (0005). Verdicts never read a control as a trained run.
    control: Mapped[str | None] = mapped_column(String(16))
    # Why training stopped: trained | plateau | budget | time_limit | rebuild_step (None: before
    # 0005), and the best held-out token accuracy at the training length with its step.
    stop_reason: Mapped[str | None] = mapped_column(String(16))
    best_heldout_acc: Mapped[float | None] = mapped_column(Float)
    best_step: Mapped[int | None] = mapped_column(Integer)
    # A researcher's labels and remarks (migration 0006); searched by GET /api/runs?q=.
    tags: Mapped[list[Any] | None] = mapped_column(JSON)
    notes: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the loss curve's row (None: no curve stored), loaded with the run (a LEFT JOIN) as the row
    # held it before 0012, so a run read in a session keeps its curve after it; the pages' reads
    # select columns of runs, never the entity, and so never read a curve
    curve: Mapped[RunCurve | None] = relationship(
        back_populates="run", uselist=False, lazy="joined", cascade="all, delete-orphan", passive_deletes=True
    )

    __table_args__ = (
        Index("ix_runs_task_family_seed", "task", "family", "seed"),
        # the fingerprint of the result cache and the aggregates' joins read these indexes, not
        # the rows (migration 0011; the rows held the loss curves until migration 0012)
        Index("ix_runs_created_at", "created_at"),
        Index("ix_runs_read", *RUNS_READ_COLUMNS),
    )

    @property
    def loss_curve(self) -> list[Any]:
        """``[{"step": int, "loss": float, "heldout_token_acc": float | None, ...}]`` (``[]``: none stored)."""
        return self.curve.loss_curve if self.curve is not None else []

    @loss_curve.setter
    def loss_curve(self, points: list[Any]) -> None:
        if self.curve is None:
            self.curve = RunCurve(loss_curve=points)
        else:
            self.curve.loss_curve = points


class RunCurve(Base):
    """A run's loss curve, apart from ``runs`` (migration 0012): megabytes a run in a long study,
    which SQLite stored inline and walked through to reach any later column of the row."""

    __tablename__ = "run_curves"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    # [{"step": int, "loss": float, "heldout_token_acc": float | None}] (+ "length" with a curriculum)
    loss_curve: Mapped[list[Any]] = mapped_column(JSON, default=list)
    run: Mapped[Run] = relationship(back_populates="curve")


def row_columns(model: type[Base]) -> list[KeyedColumnElement[Any]]:
    """The columns of a row of ``model`` as the API, the bundles and the CLI carry it, in order:
    its table's, and for a run its loss curve (``run_curves`` since migration 0012) in the place it
    had in ``runs``, after ``stopped_early``. Read a row's values with ``getattr(obj, c.key)``."""
    cols: list[KeyedColumnElement[Any]] = list(model.__table__.columns)
    if model is Run:
        at = [c.key for c in cols].index("stopped_early") + 1
        cols.insert(at, RunCurve.__table__.c.loss_curve)
    return cols


class MeasureSettings(Base):
    """The effective settings a run was measured with; result rows point at it (``settings_id``).

    Written once per distinct settings (get-or-create by ``config_hash``, the SHA-256 of the
    other columns' canonical JSON: ``science.records.MeasureSettingsRecord``). Migration 0003.
    """

    __tablename__ = "measure_settings"

    id: Mapped[int] = mapped_column(primary_key=True)
    config_hash: Mapped[str] = mapped_column(String(64), unique=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the MeasureParams JSON
    eval_lengths: Mapped[list[Any]] = mapped_column(JSON, default=list)  # probes + interventions, ascending
    patch_eval_length: Mapped[int | None] = mapped_column(Integer)  # the patching grid's L
    fit_length: Mapped[int | None] = mapped_column(Integer)  # interventions fitted at (the run's train_length)
    intervention_layers: Mapped[list[Any] | None] = mapped_column(JSON)  # None = every block
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def _settings_fk() -> Mapped[int | None]:
    """``settings_id``: the measure_settings row the result was made with (None: before 0003)."""
    return mapped_column(ForeignKey("measure_settings.id", ondelete="SET NULL"))


def _version_column() -> Mapped[int]:
    """``measurement_version``: the measurement code that made the row
    (``science.measurement_version``). Rows stored before migration 0010, and rows of a bundle
    exported before it, are version 1; the worker writes the current version explicitly."""
    return mapped_column(Integer, default=1, server_default="1")


class ProbeResult(Base):
    """A linear probe on one layer's frozen states at one eval length."""

    __tablename__ = "probe_results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    layer: Mapped[int] = mapped_column(Integer)
    eval_length: Mapped[int] = mapped_column(Integer)
    accuracy: Mapped[float] = mapped_column(Float)
    majority_baseline: Mapped[float] = mapped_column(Float)
    # L entries: per_position[t] = accuracy at the 0-based position t (0..L-1), None where no
    # labelled token; the dashboard's position view draws entry t at x = t + 1.
    per_position: Mapped[list[Any]] = mapped_column(JSON, default=list)
    balanced_accuracy: Mapped[float | None] = mapped_column(Float)  # mean per-class recall, 0..1
    # Hewitt & Liang (2019) control task: same probe, same split, a fixed random label per
    # input-token type. selectivity = accuracy - control_accuracy (0..1 scale).
    control_accuracy: Mapped[float | None] = mapped_column(Float)
    selectivity: Mapped[float | None] = mapped_column(Float)
    # probe accuracy per token type (Dyck: {"open": .., "close": ..}; code_depth: bracket/other), 0..1
    type_accuracy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    n_train: Mapped[int] = mapped_column(Integer)  # sequences
    n_test: Mapped[int] = mapped_column(Integer)  # sequences
    converged: Mapped[bool] = mapped_column(Boolean)
    n_iter: Mapped[int] = mapped_column(Integer)
    config_hash: Mapped[str] = mapped_column(String(64))  # hash of the params that requested the row
    measurement_version: Mapped[int] = _version_column()
    settings_id: Mapped[int | None] = _settings_fk()

    # The unique key leads with (run_id, eval_length): it serves ``/runs/{id}/probes?eval_length=``
    # and the delete-then-insert of a re-run; the second index serves the cross-run aggregates
    # (``/curves``, ``/profiles``) filtered by eval length.
    __table_args__ = (
        UniqueConstraint("run_id", "eval_length", "layer", name="uq_probe"),
        Index("ix_probe_results_eval_length_run", "eval_length", "run_id"),
    )


class InterventionResult(Base):
    """An edit at the output of one layer (or a component edit), applied at one eval length.

    ``method``: project_out | inlp | leace | pca_top_k | mean | conv1d_removal.
    For conv1d_removal ``layer`` is the block index, or -2 for "every layer".
    """

    __tablename__ = "intervention_results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    method: Mapped[str] = mapped_column(String(32))
    layer: Mapped[int] = mapped_column(Integer)
    eval_length: Mapped[int] = mapped_column(Integer)
    k: Mapped[int | None] = mapped_column(Integer)  # the method's declared parameter k (pca_top_k's); None without one
    base_acc: Mapped[float] = mapped_column(Float)  # token accuracy, 0..1
    edited_acc: Mapped[float] = mapped_column(Float)
    delta_pp: Mapped[float] = mapped_column(Float)  # (edited - base) * 100
    drop_rel_chance: Mapped[float | None] = mapped_column(Float)  # (base-edited)/(base-chance)
    refit_acc: Mapped[float | None] = mapped_column(Float)  # probe refit on the edited states
    refit_majority: Mapped[float | None] = mapped_column(Float)
    # the refit accuracy at or under which the edit removed the variable (docs/SCIENCE.md#removal-line);
    # NULL on measurement version 1 rows, judged at refit_majority + 2 pp
    refit_line: Mapped[float | None] = mapped_column(Float)
    rank_removed: Mapped[int | None] = mapped_column(Integer)
    inlp_converged: Mapped[bool | None] = mapped_column(Boolean)  # INLP reached its tolerance
    inlp_rounds: Mapped[int | None] = mapped_column(Integer)  # INLP rounds used
    n_fit_sequences: Mapped[int | None] = mapped_column(Integer)  # sequences the edit was fitted on
    p_value: Mapped[float | None] = mapped_column(Float)  # paired permutation, sequence level
    p_holm: Mapped[float | None] = mapped_column(Float)  # Holm across the run's layers
    significant: Mapped[bool | None] = mapped_column(Boolean)  # p_holm < 0.05; False = "n.s."
    # rank-matched random removal: rank_removed random orthonormal directions removed at the same
    # layer, delta_pp's mean and range over random_draws draws (docs/SCIENCE.md#random-removal)
    random_delta_pp: Mapped[float | None] = mapped_column(Float)
    random_delta_lo: Mapped[float | None] = mapped_column(Float)
    random_delta_hi: Mapped[float | None] = mapped_column(Float)
    random_draws: Mapped[int | None] = mapped_column(Integer)
    n_sequences: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    config_hash: Mapped[str] = mapped_column(String(64))  # hash of the params that requested the row
    measurement_version: Mapped[int] = _version_column()
    settings_id: Mapped[int | None] = _settings_fk()

    __table_args__ = (
        UniqueConstraint("run_id", "eval_length", "method", "layer", name="uq_intervention"),
        Index("ix_intervention_results_eval_length_run", "eval_length", "run_id"),
    )


class PatchingResult(Base):
    """Activation patching: layer ℓ at position p from clean into corrupted (docs/SCIENCE.md#activation-patching)."""

    __tablename__ = "patching_results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    # resid_pre (input of block ℓ) | resid_post (its output) | state (the recurrent state block ℓ
    # carries from position t to t+1), optionally state:ssm / state:conv for Mamba's parts.
    site: Mapped[str] = mapped_column(String(16), default="resid_post", server_default="resid_post")
    layer: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)  # 0-based index into the sequence
    eval_length: Mapped[int] = mapped_column(Integer)
    # mean over pairs, 1.0 = full recovery; None when clean and corrupted logit differences coincide
    recovery: Mapped[float | None] = mapped_column(Float)
    recovery_lo: Mapped[float | None] = mapped_column(Float)  # bootstrap 95% CI over pairs
    recovery_hi: Mapped[float | None] = mapped_column(Float)
    ld_clean: Mapped[float] = mapped_column(Float)
    ld_corrupted: Mapped[float] = mapped_column(Float)
    n_pairs: Mapped[int] = mapped_column(Integer)  # usable pairs (after dropping tiny-gap pairs)
    corrupt_position: Mapped[int | None] = mapped_column(Integer)  # 0-based position of the changed token
    n_dropped: Mapped[int | None] = mapped_column(Integer)  # pairs dropped: clean-corrupted gap too small
    note: Mapped[str | None] = mapped_column(String(300))  # why recovery is None, when it is
    config_hash: Mapped[str] = mapped_column(String(64))  # hash of the params that requested the row
    measurement_version: Mapped[int] = _version_column()
    settings_id: Mapped[int | None] = _settings_fk()

    __table_args__ = (UniqueConstraint("run_id", "eval_length", "site", "layer", "position", name="uq_patching"),)


class ResultWeights(Base):
    """What a probe or an edit learned: the safetensors artifact of one result row.

    ``kind``: ``probe`` (a ``probe_results`` row: method "") or ``edit`` (an
    ``intervention_results`` row). ``artifact_id``: SHA-256 of the file
    ``<store>/artifacts/<artifact_id>.safetensors`` (``models_store.artifacts``).
    """

    __tablename__ = "result_weights"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(32), default="")
    layer: Mapped[int] = mapped_column(Integer)
    eval_length: Mapped[int] = mapped_column(Integer)
    artifact_id: Mapped[str] = mapped_column(String(64))
    config_hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (UniqueConstraint("run_id", "kind", "method", "layer", "eval_length", name="uq_result_weights"),)


class Job(Base):
    """The source of truth for work; the queue only carries job ids."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)  # train|probe|intervene|patch|suite
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config_hash: Mapped[str] = mapped_column(String(64), index=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # Queue priority (0006): higher is taken first; store.jobs.PERSON_PRIORITY for jobs a person launches.
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    log: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(200))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # A result write in progress (0009): a cancel meanwhile is a 409, never a 200 the job ignores.
    storing: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    # What the executor returned (JSON), e.g. {"run_id": 3}; None until the job succeeds.
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Last time the job was put on the queue (submit, reaper re-queue, retry, API restart).
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The client's Idempotency-Key of the POST that made the job: the same key answers this job.
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True, index=True)


class SavedView(Base):
    """A dashboard view saved with a short link: slug → page + state."""

    __tablename__ = "views"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(32), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    page: Mapped[str] = mapped_column(String(100))
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_by: Mapped[str | None] = mapped_column(String(100))  # the saving token's name (0006)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SuiteNote(Base):
    """Tags and notes on a suite (a suite has no row of its own: keyed by ``runs.suite``). 0006."""

    __tablename__ = "suite_notes"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    tags: Mapped[list[Any] | None] = mapped_column(JSON)
    notes: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ApiToken(Base):
    """A write token, stored as a SHA-256 hash only."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
