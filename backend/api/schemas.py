"""Pydantic response (and request) models: the OpenAPI document of every endpoint."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar, get_type_hints

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    computed_field,
    create_model,
    field_validator,
)

from layerscope_core.json_checks import MAX_JSON_DEPTH, value_errors
from layerscope_core.text import TEXT_PATTERN
from science.records import InterventionRecord, PatchingRecord, ProbeRecord

T = TypeVar("T")


def _utc(d: datetime) -> datetime:
    return d if d.tzinfo else d.replace(tzinfo=UTC)  # SQLite hands back naive UTC


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]


class Page(BaseModel, Generic[T]):
    """A page of a collection."""

    items: list[T]
    total: int = Field(description="rows matching the filters, over all pages")
    limit: int
    offset: int


class Health(BaseModel):
    status: Literal["ok"]
    db: str = Field(description="sqlite | postgresql")
    queue: str = Field(description="sqlite | redis")
    version: str


class FamilyMeta(BaseModel):
    """One registered model family and what it supports (``layerscope_core.registry.FamilySpec``)."""

    name: str
    label: str
    kind: str = Field(description="attention | ssm | rnn")
    has_conv1d: bool = Field(description="blocks hold a depthwise causal Conv1D (Conv1D removal applies)")
    state_parts: list[str] = Field(description="parts of a block's recurrent state (patching site state:<part>)")
    recurrent_state: bool = Field(description="the state patching site applies")
    hf: bool = Field(description="a transformers architecture (pretrained checkpoints load)")
    pretrained: bool = Field(description="fine-tuning a pretrained hub model is supported")
    default_lr: float = Field(description="peak learning rate when a train job gives none")


class MethodParamMeta(BaseModel):
    """One parameter an intervention method declares (``layerscope_core.method_params.MethodParam``)."""

    name: str
    type: Literal["integer", "number"]
    default: int | float | None = Field(description="used when a job gives none; null: the method decides")
    help: str
    ge: int | float | None = Field(description="inclusive lower bound")
    le: int | float | None = Field(description="inclusive upper bound")
    width_bound: bool = Field(description="also at most the model's d_model")
    job_field: str | None = Field(
        description="the job params' own field for it (a built-in's); null: set in method_params.<method>.<name>"
    )


class Meta(BaseModel):
    """The vocabularies every client shares (``GET /api/meta``)."""

    families: list[FamilyMeta]
    tasks: list[str]
    methods: list[str] = Field(description="intervention methods (Conv1D removal runs on has_conv1d families)")
    method_params: dict[str, list[MethodParamMeta]] = Field(
        default_factory=dict, description="per method, the parameters a job may set (intervene, measure)"
    )
    method_traits: dict[str, dict[str, bool]] = Field(
        default_factory=dict,
        description="per method, how its rows read (rank_chosen_by_fit: a rank over half the width is not "
        "selective; random_control_is_itself: its drop is read raw, not beyond random removal)",
    )
    presets: list[str]
    eval_lengths: list[int] = Field(description="default eval lengths")
    train_length: int
    patch_sites: list[str] = Field(description="default patching sites")
    all_patch_sites: list[str]
    read_only: str | None = Field(
        None, description="why this server refuses every write (`layerscope serve BUNDLE.zip`); absent otherwise"
    )


class RunOut(BaseModel):
    """A trained (or fine-tuned) model."""

    model_config = ConfigDict(populate_by_name=True)

    id: int
    name: str
    suite: str | None
    family: str
    task: str
    seed: int
    pretrained: str | None
    n_layers: int
    d_model: int
    n_params: int
    task_params: dict[str, Any]
    model_cfg: dict[str, Any] = Field(alias="model_config", description="the model's dataclass config")
    train_config: dict[str, Any]
    config_hash: str
    checkpoint_id: str | None
    status: str
    steps: int
    train_seconds: float
    stopped_early: bool
    behaviour: dict[str, Any] = Field(description='per eval length: {"40": {"token_acc", "last_acc", "n"}}')
    heldout_acc: float | None = Field(
        None, description="held-out token accuracy at the training length when training ended, 0..1"
    )
    early_stop_acc: float | None = Field(None, description="the early-stop criterion the run was trained for, 0..1")
    made_on: str | None = Field(None, description="device and host the run was made on")
    made_with: dict[str, Any] | None = Field(
        None,
        description="the code that trained it: {layerscope, git_commit, git_dirty, python, torch, "
        "transformers}, and rebuilt_from (what the run recorded first) for a run whose "
        "weights were rebuilt (None: made before this was recorded)",
    )
    control: str | None = Field(
        None,
        description="'init': a random-init control (the same architecture and seed as a "
        "trained run of the suite, not trained, probed only; docs/SCIENCE.md#controls); "
        "null for every other run",
    )
    stop_reason: str | None = Field(
        None,
        description="why training stopped: trained (criterion) | plateau | budget | "
        "time_limit | rebuild_step (docs/SCIENCE.md#plateau); null for a control or a "
        "run made before this was recorded",
    )
    best_heldout_acc: float | None = Field(
        None, description="best held-out token accuracy evaluated at the training length, 0..1"
    )
    best_step: int | None = Field(None, description="the step best_heldout_acc was reached at")
    tags: list[str] | None = Field(None, description="a researcher's labels (PATCH /api/runs/{id})")
    notes: str | None = Field(None, description="a researcher's remarks (PATCH /api/runs/{id})")
    created_at: UtcDatetime

    @computed_field(description="held-out token accuracy reached the early-stop criterion (docs/SCIENCE.md#trained)")  # type: ignore[prop-decorator]  # mypy does not type a decorated property; pydantic's documented form
    @property
    def trained(self) -> bool:
        from science.trained import is_trained

        return is_trained(self.heldout_acc, self.early_stop_acc)


class RunDetail(RunOut):
    loss_curve: list[dict[str, Any]] = Field(description='[{"step", "loss", "heldout_token_acc"}]')


def record_schema(
    name: str, record: type, doc: str, *, extra: dict[str, Any], required: bool = True
) -> type[BaseModel]:
    """The API model of a science record (``science.records``): ``run_id``, then every field of
    the record with its type and ``metadata["description"]``, then ``extra`` (the fields the API
    adds: ``{name: (type, FieldInfo)}``). The record is the one definition of the row; this
    schema is derived from it, so a field added there is served here.

    ``required``: every record field is required in the response (the API serves every stored
    column); the record's defaults are for the science building rows, not for the API.

    Raises:
        TypeError: ``record`` is not a dataclass, or ``extra`` names one of its fields.
    """
    if not dataclasses.is_dataclass(record):
        raise TypeError(f"{record!r} is not a dataclass record")
    hints = get_type_hints(record)
    own: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        default: Any = ... if required or f.default is dataclasses.MISSING else f.default
        own[f.name] = (hints[f.name], Field(default, description=f.metadata.get("description")))
    clash = sorted(set(own) & (set(extra) | {"run_id"}))
    if clash:
        raise TypeError(f"{name}: {clash} already come from {record.__name__}")
    return create_model(name, __doc__=doc, run_id=(int, ...), **own, **extra)


_LAYER_NAME = (str, Field(description="emb, all (layer −2) or the block index (layerscope_core.layers.layer_name)"))
_DEPTH = Field(description="(layer + 1) / n_layers: emb 0, last block 1")

ProbeOut = record_schema(
    "ProbeOut",
    ProbeRecord,
    "A linear probe on one layer's states at one eval length (``science.records.ProbeRecord``).",
    extra={
        "layer_name": _LAYER_NAME,
        "depth": (float, _DEPTH),
        "site_name": (
            str | None,
            Field(
                None,
                description="the probed site in TransformerLens's style: embed, "
                "blocks.{layer}.resid_post (layerscope_core.sites)",
            ),
        ),
    },
)

InterventionOut = record_schema(
    "InterventionOut",
    InterventionRecord,
    "One edit (method × layer) at one eval length (``science.records.InterventionRecord``).",
    extra={
        "layer_name": _LAYER_NAME,
        "depth": (float | None, Field(description="(layer + 1) / n_layers; None for layer −2 (every layer)")),
    },
)

PatchingOut = record_schema(
    "PatchingOut",
    PatchingRecord,
    "Activation patching at one (site, layer, position) (``science.records.PatchingRecord``).",
    extra={
        "layer_name": _LAYER_NAME,
        "depth": (float, _DEPTH),
        "site_name": (
            str | None,
            Field(
                None,
                description="site and layer in TransformerLens's style: embed, "
                "blocks.{layer}.resid_pre / resid_post / state[.part] (layerscope_core.sites)",
            ),
        ),
    },
)


class CurvePoint(BaseModel):
    """Probe accuracy at one layer, aggregated over seeds (mean and 95% t-interval)."""

    suite: str | None = Field(
        None,
        description="the suite of every run in this cell: runs of different suites "
        "are never pooled (docs/SCIENCE.md#suites)",
    )
    task: str
    family: str
    pretrained: str | None = None
    eval_length: int
    layer: int
    layer_name: str
    depth: float
    n_layers: int
    mean: float | None
    lo: float | None
    hi: float | None
    n: int
    seeds: list[int]
    majority_baseline: float | None
    run_ids: list[int]
    untrained_run_ids: list[int] = Field(
        default_factory=list, description="runs in this point that are not trained (docs/SCIENCE.md#trained)"
    )
    selectivity: float | None = Field(
        None,
        description="mean probe selectivity over the seeds that store it "
        "(accuracy − control-task accuracy, 0..1 scale)",
    )
    control: str | None = Field(
        None,
        description="'init': the point of the random-init controls of this cell "
        "(docs/SCIENCE.md#controls); null: of the runs themselves",
    )


class MetricCI(BaseModel):
    mean: float | None
    lo: float | None
    hi: float | None
    n: int


class Profile(BaseModel):
    suite: str | None = Field(
        None,
        description="the suite of every run in this cell: runs of different suites "
        "are never pooled (docs/SCIENCE.md#suites)",
    )
    task: str
    family: str
    pretrained: str | None = None
    eval_length: int
    n_layers: int
    n: int
    seeds: list[int]
    profile_class: str | None
    class_counts: dict[str, int] = Field(description="how many seeds fall in each profile class")
    metrics: dict[str, MetricCI]
    per_seed: list[dict[str, Any]]
    untrained_run_ids: list[int] = Field(
        default_factory=list, description="seeds' runs that are not trained (docs/SCIENCE.md#trained)"
    )
    stability: dict[str, Any] | None = Field(
        None,
        description="the class under every rule with its thresholds moved by the documented margins: "
        "{class, agree, of, stable, classes} (docs/SCIENCE.md#class-stability)",
    )
    against_control: dict[str, Any] | None = Field(
        None,
        description="the same profile measured against each seed's random-init control (the learned gain): "
        "{profile_class, class_votes, margin, stability, metrics, per_seed, control_curve}; "
        "null when a seed has no control (docs/SCIENCE.md#controls)",
    )


class Claim(BaseModel):
    id: str | int
    title: str
    verdict: Literal["supported", "contradicted", "not enough data"]
    numbers: dict[str, Any]
    detail: str
    views: list[str]


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
# the kinds POST /api/jobs takes (worker.job_params.PARAMS_BY_KIND), and "import": the finished job
# row each bundle import records (backend.bundle.IMPORT_JOB_KIND), listed and filtered alike
JobKind = Literal["train", "probe", "intervene", "patch", "suite", "rebuild", "import"]


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    kind: str
    state: JobState = Field(
        description="the job's state; a suite job that has fanned out reads its runs' (running while any "
        "is queued or running, then failed / cancelled when any was, else succeeded: store.jobs.suite_state)"
    )
    job_state: JobState | None = Field(
        None,
        description="the job row's own state (a suite job: succeeded once fanned out); what cancel and retry act on",
    )
    params: dict[str, Any]
    config_hash: str
    parent_id: int | None
    attempt: int
    max_attempts: int
    progress: float = Field(description="0..1")
    message: str
    error: str | None
    worker: str | None
    cancel_requested: bool
    run_id: int | None
    result: dict[str, Any] | None
    created_at: UtcDatetime
    enqueued_at: UtcDatetime | None
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None
    heartbeat_at: UtcDatetime | None
    # A suite job succeeds once it has fanned out; how far its runs are is in its children.
    children: dict[str, int] | None = Field(None, description="a suite's child jobs counted by state (suite jobs)")
    children_progress: float | None = Field(None, description="mean progress of a suite's children, 0..1")


class JobDetail(JobOut):
    log_tail: str = Field(description="the last lines of the job's log")


class Annotation(BaseModel):
    """Tags and notes of a run or suite: a field left out is left as it is."""

    model_config = ConfigDict(extra="forbid")

    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=50, pattern=TEXT_PATTERN)]] | None = Field(
        None, max_length=32, description="replaces the tags (at most 32, each at most 50 characters)"
    )
    notes: str | None = Field(
        None,
        max_length=10_000,
        pattern=TEXT_PATTERN,
        description='replaces the notes ("" clears them); one paragraph: the text rule of '
        "every string (no control characters, line breaks included)",
    )


class AnnotationOut(BaseModel):
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None


class Deleted(BaseModel):
    deleted: dict[str, int] = Field(description="rows removed per table")
    checkpoints: int = Field(description="checkpoint folders removed from the model store")


class ViewCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(
        min_length=1,
        max_length=200,
        pattern=TEXT_PATTERN,
        description="stored as typed (no control characters); escaping is the client's job",
    )
    page: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^/[A-Za-z0-9_\-/]*$",
        description="the dashboard page path, e.g. /curves",
    )
    state: dict[str, Any] = Field(
        default_factory=dict,
        description=f"the page's state (its URL query): at most {MAX_JSON_DEPTH} levels deep in the body, "
        "finite numbers, strings without control characters",
    )

    @field_validator("state")
    @classmethod
    def _storable(cls, v: dict[str, Any]) -> dict[str, Any]:
        """The body checks refuse these before parsing; this keeps the model safe on its own."""
        errors = value_errors(v, prefix=(), max_depth=MAX_JSON_DEPTH - 1)  # the body is level 1
        if errors:
            where = ".".join(map(str, errors[0]["loc"]))
            raise ValueError(f"{where}: {errors[0]['msg']}")
        return v


class ViewCreated(BaseModel):
    slug: str
    url: str


class ViewOut(BaseModel):
    slug: str
    url: str
    title: str
    page: str
    state: dict[str, Any]
    created_by: str | None = None  # the name of the token that saved it (None: saved without a token)
    created_at: UtcDatetime


class ErrorOut(BaseModel):
    detail: str
