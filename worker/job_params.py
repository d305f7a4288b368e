"""Validated parameters of every job kind (pydantic).

The API validates ``POST /api/jobs`` bodies with these models (a 422 names the bad field),
the CLI builds them from flags, and the pipeline runs them. Every default is documented in docs/SCIENCE.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from layerscope_core.hashing import config_hash
from layerscope_core.model_sources import (
    absolute_if_local,
    is_folder,
    missing_folder_problem,
    missing_weights_problem,
)
from layerscope_core.registry import (  # noqa: F401
    ALL_PATCH_SITES,
    EVAL_LENGTHS,
    FAMILIES,
    METHODS,
    PATCH_SITES,
    PRESETS,
    families_where,
    family_names,
    get_family,
    patch_sites_of,
)
from models_store.model_config import MAX_PARAMS
from science.precision import Precision
from worker import method_fields
from worker.method_fields import MethodParamValues, job_field, method_params_field
from worker.param_types import (
    EvalLength,
    Family,
    Float,
    Int,
    Method,
    PatchSite,
    PresetName,
    Seed,
    SuiteName,
    TaskName,
    _field_error,
    _Params,
)

# Peak learning rate per family when TrainParams.lr is None (AdamW, batch 64, ~830K parameters,
# with warm-up, cosine decay and clipping; docs/SCIENCE.md#training-recipe). Every family starts
# at the measured 1e-3 (Mamba's instability at 1e-3 is addressed by decay and clipping, not a
# lower peak); bench_steps_to_criterion.py is how an entry earns a different value. Override per
# run with ``lr``, or per preset with its ``family_train`` table.
# The entries are the families' ``FamilySpec.default_lr`` (layerscope_core.registry); a family
# registered later is looked up there (``default_lr``).
DEFAULT_LR: dict[str, float] = {f: get_family(f).default_lr for f in FAMILIES}
PRETRAINED_LR = 1e-4

# TrainParams overrides that reproduce the recipe before the training-recipe fields existed:
# constant lr 1e-3, no warm-up, no clipping, no length curriculum, no START token.
LEGACY_RECIPE: dict[str, Any] = {
    "lr": 1e-3,
    "warmup_steps": 0,
    "lr_schedule": "constant",
    "grad_clip": None,
    "curriculum_start": None,
    "start_token": False,
}


def precision_field() -> Any:
    """The ``precision`` field of the measuring params (docs/SCIENCE.md#precision)."""
    return Field(
        "fp32",
        description="the forward passes' precision: fp32, or bf16 (bfloat16 autocast; states, edits, probes "
        "and statistics stay float32); dumped only when bf16, so fp32 params and hashes are those made before it",
    )


def _drop_default_precision(d: dict[str, Any]) -> dict[str, Any]:
    if d.get("precision") == "fp32":
        d.pop("precision")
    return d


def config_folder_sha256(source: str) -> str | None:
    """SHA-256 of ``source``/config.json when ``source`` is a local folder holding one (None for a
    hub name or a folder without it: nothing here to read)."""
    import hashlib
    from pathlib import Path

    if not is_folder(source):  # a hub name, or no name a file system could hold
        return None
    f = Path(source).expanduser() / "config.json"
    return hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None


def config_folder_depth(source: str) -> int | None:
    """The number of blocks ``source``/config.json states (``num_hidden_layers``, or GPT-2's
    ``n_layer`` and the like, which transformers maps onto it); None for a hub name, a folder
    without a readable config.json or a config that states none. Read as JSON: no torch, no
    transformers (the API calls it when a suite is submitted)."""
    import json
    from pathlib import Path

    f = Path(source).expanduser() / "config.json"
    try:
        cfg = json.loads(f.read_text(encoding="utf-8")) if is_folder(source) and f.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(cfg, dict):
        return None
    for key in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        n = cfg.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            return n
    return None


class MeasureParams(_Params):
    """What to measure on a trained run (probes, interventions, patching)."""

    eval_lengths: list[EvalLength] = Field(default_factory=lambda: list(EVAL_LENGTHS), min_length=1, max_length=32)
    n_probe_sequences: Int = Field(500, ge=20, le=100_000, description="held-out sequences per eval length")
    methods: list[Method] = Field(default_factory=lambda: list(METHODS))
    # the built-ins' parameters with a field of their own (MethodParam.job_field); others: method_params
    pca_k: Int = job_field("pca_k")
    inlp_max_rounds: Int | None = job_field("inlp_max_rounds")
    method_params: MethodParamValues = method_params_field()
    conv1d: bool = Field(True, description="Conv1D removal on mamba/mamba2 runs")
    n_permutations: Int = Field(2000, ge=100, le=1_000_000)
    patch_positions: list[Annotated[Int, Field(ge=0, le=4095)]] | None = Field(
        None, description="0-based positions for the patching grid; None = every position 0..L-1"
    )
    patch_sites: list[PatchSite] = Field(
        default_factory=lambda: list(PATCH_SITES),
        min_length=1,
        description="patching sites; 'state' is skipped on the transformer (asked for alone: a 422)",
    )
    patch_stride: Int = Field(
        1, ge=1, le=4096, description="with patch_positions None: every stride-th position (and the last one)"
    )
    patch_eval_length: Int = Field(40, ge=4, le=4096)
    n_patch_pairs: Int = Field(128, ge=4, le=100_000)
    max_causal_layers: Int | None = Field(
        None,
        ge=1,
        le=64,
        description="deeper models get interventions and patching at every ⌈n_layers / max_causal_layers⌉-th "
        "block from block 0 and the last block (probes: every layer); None = every block "
        "(docs/SCIENCE.md#causal-layers)",
    )
    precision: Precision = precision_field()

    @model_serializer(mode="wrap")
    def _later_fields(self, handler: Any) -> dict[str, Any]:
        """``max_causal_layers`` and ``method_params`` are dumped only when set, ``precision`` only
        when bf16: measurement settings, job params and the hashes over them stay what they were
        for every measurement made without them."""
        d = handler(self)
        if d.get("max_causal_layers") is None:
            d.pop("max_causal_layers", None)
        if not d.get("method_params"):
            d.pop("method_params", None)
        return _drop_default_precision(d)

    @field_validator("eval_lengths")
    @classmethod
    def _lengths(cls, v: list[int]) -> list[int]:
        return sorted(set(v))

    @model_validator(mode="after")
    def _method_params(self) -> MeasureParams:
        method_fields.check(self)  # each value against its method's declaration
        return self

    def method_settings(self) -> dict[str, dict[str, Any]]:
        """``{method: {parameter: value}}`` for each of ``methods``, as their fits receive them."""
        return method_fields.settings(self)


MeasurePart = Literal["probes", "interventions", "patching"]  # = layerscope_core.registry.MEASURE_PARTS


def _with_weights(source: str) -> str:
    """A local folder to fine-tune must hold weights (a 422 at the ``pretrained`` field, not a
    failure on the worker); a config alone is trained from scratch as ``from_config``."""
    if why := missing_weights_problem(source):
        raise ValueError(f"{source!r}: {why}")
    return source


class TrainParams(_Params):
    """One run: train (or fine-tune) a model on a task, then measure it. ``family`` may be left out
    for a transformers model (``pretrained`` / ``from_config``): it is the one its blocks make, read
    from its config as the CLI reads it."""

    family: Family
    task: TaskName
    seed: Seed = 0
    task_params: dict[str, Any] = Field(default_factory=dict)
    n_layers: Int = Field(4, ge=1, le=64)
    d_model: Int | None = Field(None, ge=4, le=8192, description="None = solved to match param_target")
    param_target: Int = Field(
        830_000,
        ge=1_000,
        le=MAX_PARAMS,
        description="parameter budget the width is solved to (±10%); a model with an explicit d_model may "
        f"have at most {MAX_PARAMS:,} parameters too (models_store.model_config.MAX_PARAMS)",
    )
    pretrained: str | None = Field(None, description="hub name or local folder to fine-tune")
    from_config: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        description="hub name or local folder of a transformers config: that architecture built with "
        "random weights and trained from scratch (its family is found from its blocks; "
        "n_layers/d_model/param_target do not apply; docs/BRING_YOUR_OWN.md)",
    )
    from_config_sha256: str | None = Field(
        None,
        pattern="^[0-9a-f]{64}$",
        description="SHA-256 of the config.json of a from_config local folder, read when the job is "
        "made (left out: read then): part of the run's identity, so a folder whose config changed "
        "makes another run, and a rebuild refuses a folder that no longer holds the run's config",
    )
    start_token: bool | None = Field(
        None,
        description="prepend a START token inside the model (docs/SCIENCE.md#start-token); "
        "None = on for the built-in models trained from scratch, off for transformers ones "
        "(pretrained or from_config)",
    )
    train_length: Int = Field(40, ge=2, le=4096)
    batch_size: Int = Field(64, ge=1, le=4096)
    lr: Float | None = Field(
        None,
        gt=0,
        le=1.0,
        description="peak learning rate; None = the family's entry of DEFAULT_LR (docs/SCIENCE.md#training-recipe)",
    )
    weight_decay: Float = Field(0.01, ge=0, le=1.0)
    max_steps: Int = Field(2000, ge=1, le=10_000_000)
    warmup_steps: Int = Field(100, ge=0, le=10_000_000, description="linear learning-rate warm-up (steps)")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "cosine", description="after warm-up: constant, or cosine decay over the remaining max_steps"
    )
    min_lr_ratio: Float = Field(0.1, ge=0, le=1.0, description="cosine floor as a fraction of the peak lr")
    grad_clip: Float | None = Field(1.0, gt=0, description="max global gradient L2 norm; None = no clipping")
    curriculum_start: Int | None = Field(
        8,
        ge=2,
        le=4096,
        description="length curriculum: first training length; None = train at train_length from the start",
    )
    curriculum_step: Int = Field(4, ge=1, le=4096, description="length added when the threshold is passed")
    curriculum_threshold: Float = Field(
        0.95, gt=0, le=1.0, description="held-out token accuracy at the current length that grows it"
    )
    force: bool = Field(
        False, description="train again even if this run is already stored (not part of the run's config hash)"
    )
    rebuild_weights: bool = Field(
        False,
        description="a stored run whose weights are not here is rebuilt to its "
        "recorded step budget and measured again even when complete (not "
        "part of the run's config hash)",
    )
    parts: list[MeasurePart] | None = Field(
        None,
        min_length=1,
        description="measure only these parts now (None = all: probes, interventions, patching); the "
        "run is complete once every part is stored, by this job or a later one (not part of the "
        "run's config hash)",
    )
    max_seconds: Float | None = Field(None, gt=0, description="wall-clock training budget (s)")
    early_stop_acc: Float = Field(0.99, gt=0, le=1.0)
    eval_every: Int = Field(50, ge=1, le=10_000_000, description="held-out evaluation every this many steps")
    n_eval_sequences: Int = Field(500, ge=10, le=100_000)
    suite: SuiteName | None = Field(None, description="the suite the run belongs to (docs/SCIENCE.md#suites)")
    name: str | None = Field(None, max_length=200)
    measure: MeasureParams | None = Field(
        default_factory=MeasureParams,
        description="the measurements after training; left out: every measurement at MeasureParams' "
        "defaults; null = train only",
    )
    learned_positions: Int = Field(
        0,
        ge=0,
        le=65_536,
        description="transformer only: size of a learned absolute position table added to the "
        "token embedding, rotary kept (docs/SCIENCE.md#positions); 0 = rotary only",
    )
    plateau_evals: Int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="stop at a plateau: the held-out accuracy at the current length gained "
        "less than plateau_min_gain over this many evaluations "
        "(docs/SCIENCE.md#plateau); None = off",
    )
    plateau_min_gain: Float = Field(0.01, gt=0, le=1.0, description="the plateau rule's least gain (fraction)")
    plateau_gap_share: Float | None = Field(
        None,
        gt=0,
        le=1.0,
        description="the plateau rule's least gain as a share of the gap left to the stage's target "
        "(the criterion at the full length, the curriculum threshold before it), capped at "
        "plateau_min_gain (docs/SCIENCE.md#plateau); None = plateau_min_gain alone",
    )
    plateau_revision: Literal[3] | None = Field(
        None,
        description="3: revision 3 of the plateau rule — stop only when, over 2,000 steps or 10% of "
        "max_steps (the larger), the upper end of the 95% interval of the held-out accuracy's slope is "
        "below 0.2 pp per 1,000 steps and the training loss fell by less than 1% (docs/SCIENCE.md#plateau); "
        "it replaces plateau_evals' rule. None = revisions 1-2 (plateau_evals, plateau_gap_share)",
    )
    control: Literal["init"] | None = Field(
        None,
        description="'init': the random-init control of this run — the same architecture and seed, not "
        "trained, measured with the probes only (docs/SCIENCE.md#controls)",
    )

    @field_validator("pretrained", "from_config", mode="after")
    @classmethod
    def _source_as_absolute(cls, v: str | None) -> str | None:
        """A local folder stored as its absolute path (workers run elsewhere)."""
        return None if v is None else absolute_if_local(v)

    @field_validator("pretrained", mode="after")
    @classmethod
    def _weights_there(cls, v: str | None) -> str | None:
        return None if v is None else _with_weights(v)

    @field_validator("task_params", mode="after")
    @classmethod
    def _task_builds(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """The task must build with these parameters (names, types, bounds): a 422 at
        ``task_params``, checked before anything is stored or queued."""
        if "task" in info.data:  # absent when the task name itself failed validation
            from science.tasks import get_task

            get_task(info.data["task"], **v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _family_of_the_model(cls, data: Any) -> Any:
        # a transformers model's family is the one its blocks make, read from its config here (a
        # folder, or a hub name in this machine's cache); where it cannot be read, the error says why
        if isinstance(data, dict) and data.get("family") is None:
            source = data.get("from_config") or data.get("pretrained")
            if isinstance(source, str) and source:
                from models_store.any_model import pretrained_family

                field = "from_config" if data.get("from_config") else "pretrained"
                role = "from_config" if field == "from_config" else "pretrained model"
                try:
                    data = {**data, "family": pretrained_family(source, role, local_files_only=True)}
                except (ValueError, OSError) as exc:
                    # reported at the field that holds the model (a 422 at params.from_config), not the model
                    why = f"family not given, and not read from the model's config: {exc}"
                    raise ValidationError.from_exception_data(
                        cls.__name__,
                        [InitErrorDetails(type=PydanticCustomError("value_error", why), loc=(field,), input=source)],
                    ) from None
        return data

    @model_validator(mode="after")
    def _check(self) -> TrainParams:
        tunable = families_where(pretrained=True)
        if self.pretrained and self.family not in tunable:
            raise ValueError(f"pretrained fine-tuning supports family {' or '.join(map(repr, tunable))}")
        if self.from_config is not None:
            if self.pretrained:
                raise ValueError("from_config: not with pretrained (a run is fine-tuned or trained from scratch)")
            if self.from_config_sha256 is None:  # a local folder's config is part of the run's identity
                self.from_config_sha256 = config_folder_sha256(self.from_config)
            hf = families_where(hf=True)
            if self.family not in hf:
                if why := missing_folder_problem(self.from_config):  # the first thing wrong, said first
                    raise ValueError(f"from_config: {self.from_config!r}: {why}")
                raise ValueError(
                    f"from_config: builds a transformers architecture, family {' or '.join(map(repr, hf))} "
                    f"(the one its blocks make), not {self.family!r}"
                )
        hf_model = bool(self.pretrained or self.from_config)  # a transformers model with its own vocabulary
        if self.start_token is None:  # resolved here so the stored config says what was built
            self.start_token = not hf_model
        elif self.start_token and hf_model:
            raise ValueError(
                "start_token: not supported for transformers models (pretrained or from_config: "
                "their vocabulary has no START id)"
            )
        if self.lr is None:  # resolved here too: the stored config carries the lr actually used
            self.lr = get_family(self.family).default_lr if not self.pretrained else PRETRAINED_LR
        if self.rebuild_weights and self.measure is None:  # it would drop a run's results and measure nothing
            raise ValueError("rebuild_weights: needs measurements (a rebuilt run's results are measured again)")
        if self.rebuild_weights and self.force:
            raise ValueError("rebuild_weights: not with force (force trains afresh under the run's own budget)")
        if self.curriculum_start is not None and self.curriculum_start >= self.train_length:
            self.curriculum_start = None  # nothing to grow: the same run as no curriculum
        if self.learned_positions:
            if get_family(self.family).kind != "attention":
                raise ValueError(f"learned_positions: only for attention families, not {self.family!r}")
            if hf_model:
                raise ValueError("learned_positions: not for transformers models (pretrained or from_config)")
        if self.control is not None and self.pretrained:
            raise ValueError("control: random-init controls are for models trained from scratch")
        from science.tasks import get_task  # a bad task parameter is a 422 at submission, not a failed job
        from worker.file_tasks import fit_file_task

        task = get_task(self.task, **self.task_params)
        fit_file_task(self, task)  # a file task: the file's lengths
        self._check_model(task)
        return self

    def _check_model(self, task: Any) -> None:
        """What would fail the job after training started, each an error at its field: a width off
        the family's grid, or a parameter target no width meets (``d_model`` / ``param_target``,
        the model built from scratch exactly as the worker builds it); a learned position table
        shorter than the longest sequence (``learned_positions``); a method parameter wider than
        the model (``measure.pca_k``, ``measure.method_params.<method>.<name>``); patching sites the family has none of (``measure.patch_sites``)."""
        width: int | None = None
        if not (self.pretrained or self.from_config):  # a transformers model's width is read by the worker
            field = "d_model" if self.d_model is not None else "param_target"
            try:
                width = self.scratch_config(task).d_model
            except ValueError as exc:
                raise _field_error((field,), str(exc), getattr(self, field)) from None
        m = self.measure
        lengths = {"train_length": self.train_length}
        if m is not None:
            lengths |= {"measure.eval_lengths": max(m.eval_lengths), "measure.patch_eval_length": m.patch_eval_length}
        longest = max(lengths, key=lengths.__getitem__)
        needed = lengths[longest] + int(bool(self.start_token))
        if self.learned_positions and self.learned_positions < needed:
            raise _field_error(
                ("learned_positions",),
                f"learned_positions {self.learned_positions} is shorter than this run's longest sequence "
                f"({longest} {lengths[longest]}{' + the START token' if self.start_token else ''}: {needed} "
                f"positions); at least {needed}",
                self.learned_positions,
            )
        if m is None:
            return
        if width is not None and (wide := method_fields.width_problems(m, width)):
            raise method_fields.problems_error(wide, ("measure",))
        sites, skipped = patch_sites_of(self.family, m.patch_sites)
        if not sites:
            raise _field_error(
                ("measure", "patch_sites"),
                f"patching sites {skipped}: {self.family} has no such state; its sites are "
                f"{patch_sites_of(self.family, ALL_PATCH_SITES)[0]}",
                m.patch_sites,
            )

    def scratch_config(self, task: Any) -> Any:
        """The :class:`models_store.model_config.ModelConfig` of this run's model built from scratch
        (not pretrained / from_config) for ``task``: the width solved to ``param_target`` unless
        ``d_model`` is set.

        Raises:
            ValueError: a width off the family's grid, a target no width meets, a model over
                ``MAX_PARAMS``."""
        from models_store.model_config import ModelConfig

        return ModelConfig(
            family=self.family,
            vocab_size=task.vocab_size,
            n_classes=task.n_classes,
            n_layers=self.n_layers,
            d_model=self.d_model,
            param_target=self.param_target,
            start_token=bool(self.start_token),
            learned_positions=self.learned_positions,
        )

    def run_config(self) -> dict[str, Any]:
        """The params that define the trained model (measurement settings excluded). Fields added
        after runs were stored (:data:`LATER_FIELDS`) are left out while at their default, so
        every stored run keeps its config hash."""
        out = self.model_dump(mode="json", exclude={"measure", "name", "suite", "force", "rebuild_weights", "parts"})
        for name, default in LATER_FIELDS.items():
            if out.get(name) == default:
                out.pop(name)
        return out

    def train_config(self) -> Any:
        """The :class:`science.training.TrainConfig` of this run (its recipe fields)."""
        from dataclasses import fields

        from science.training import TrainConfig

        return TrainConfig(**{f.name: getattr(self, f.name) for f in fields(TrainConfig)})

    def twin(self, **changes: Any) -> TrainParams:
        """A copy with ``changes`` applied and validated again (e.g. the ``control="init"`` twin)."""
        return TrainParams.model_validate({**self.model_dump(), **changes})

    def run_hash(self) -> str:
        return config_hash(self.run_config())


# TrainParams fields added after the first stored runs, with the default that leaves them out of
# the run config (and so out of the config hash): a run made before them keeps its hash.
LATER_FIELDS: dict[str, Any] = {
    "learned_positions": 0,
    "plateau_evals": None,
    "plateau_min_gain": 0.01,
    "plateau_gap_share": None,
    "plateau_revision": None,
    "control": None,
    "from_config": None,
    "from_config_sha256": None,
}


class ProbeParams(_Params):
    run_id: Int = Field(ge=1, le=2_147_483_647)
    eval_lengths: list[EvalLength] | None = Field(None, min_length=1, max_length=32)
    n_probe_sequences: Int = Field(500, ge=20, le=100_000)
    precision: Precision = precision_field()

    @model_serializer(mode="wrap")
    def _later_fields(self, handler: Any) -> dict[str, Any]:
        """``precision`` is dumped only when bf16 (the params and hash of every fp32 job stay)."""
        return _drop_default_precision(handler(self))


class InterveneParams(_Params):
    run_id: Int = Field(ge=1, le=2_147_483_647)
    methods: list[Method] = Field(default_factory=lambda: list(METHODS))
    layers: list[Annotated[Int, Field(ge=-1, le=4096)]] | None = Field(
        None, description="None = every block (emb = -1 excluded)"
    )
    eval_lengths: list[EvalLength] | None = Field(None, min_length=1, max_length=32)
    pca_k: Int = job_field("pca_k")
    inlp_max_rounds: Int | None = job_field("inlp_max_rounds")
    method_params: MethodParamValues = method_params_field()
    conv1d: bool = True
    n_probe_sequences: Int = Field(500, ge=20, le=100_000)
    n_permutations: Int = Field(2000, ge=100, le=1_000_000)
    precision: Precision = precision_field()

    @model_serializer(mode="wrap")
    def _later_fields(self, handler: Any) -> dict[str, Any]:
        """``method_params`` is dumped only when set, ``precision`` only when bf16: the params and
        hash of every job made without them stay what they were."""
        d = handler(self)
        if not d.get("method_params"):
            d.pop("method_params", None)
        return _drop_default_precision(d)

    @model_validator(mode="after")
    def _method_params(self) -> InterveneParams:
        method_fields.check(self)  # each value against its method's declaration
        return self

    def method_settings(self) -> dict[str, dict[str, Any]]:
        """``{method: {parameter: value}}`` for each of ``methods``, as their fits receive them."""
        return method_fields.settings(self)


class PatchParams(_Params):
    run_id: Int = Field(ge=1, le=2_147_483_647)
    positions: list[Annotated[Int, Field(ge=0, le=4095)]] | None = Field(
        None, description="0-based; None = every position 0..L-1 (every stride-th with stride)"
    )
    sites: list[PatchSite] = Field(
        default_factory=lambda: list(PATCH_SITES),
        min_length=1,
        description="patching sites; 'state' is skipped on the transformer (asked for alone: a 422)",
    )
    stride: Int = Field(1, ge=1, le=4096, description="with positions None: every stride-th position (and the last)")
    eval_length: Int = Field(40, ge=4, le=4096)
    n_pairs: Int = Field(128, ge=4, le=100_000)
    precision: Precision = precision_field()

    @model_serializer(mode="wrap")
    def _later_fields(self, handler: Any) -> dict[str, Any]:
        """``precision`` is dumped only when bf16 (the params and hash of every fp32 job stay)."""
        return _drop_default_precision(handler(self))

    @model_validator(mode="after")
    def _positions(self) -> PatchParams:
        bad = [p for p in self.positions or [] if p >= self.eval_length]
        if bad:
            raise ValueError(f"positions {bad} outside 0..{self.eval_length - 1} (eval_length {self.eval_length})")
        return self


class FollowUp(_Params):
    """A job on a run queued when its rebuild agreed (``RebuildParams.then``)."""

    kind: Literal["probe", "intervene", "patch"]
    params: ProbeParams | InterveneParams | PatchParams

    @model_validator(mode="before")
    @classmethod
    def _params_of_kind(cls, data: Any) -> Any:
        # the params are read as the kind's, not as whichever of the three fits first
        if isinstance(data, dict) and isinstance(data.get("params"), dict):
            kinds: dict[str, type[_Params]] = {"probe": ProbeParams, "intervene": InterveneParams, "patch": PatchParams}
            # a kind that is no name (a dict, say) is left to the Literal to refuse: a 422, not a 500
            if isinstance(data.get("kind"), str) and data["kind"] in kinds:
                data = {**data, "params": kinds[data["kind"]].model_validate(data["params"])}
        return data


class RebuildParams(_Params):
    """Rebuild a stored run's weights and check them against its record
    (``worker.rebuild_check``, docs/SCIENCE.md#rebuilding-weights)."""

    run_id: Int = Field(ge=1, le=2_147_483_647)
    acc_tolerance: Float = Field(
        0.01, ge=0, le=1, description="held-out accuracy may differ from the record by this much (0..1) and agree"
    )
    loss_tolerance: Float = Field(
        0.05,
        ge=0,
        le=100,
        description="the loss curve may differ from the record by this much (nats, at any recorded step) and agree",
    )
    as_suite: SuiteName | None = Field(
        None,
        description="on disagreement, store the rebuild as a new run in this suite (another than the run's); "
        "None = store nothing",
    )
    then: FollowUp | None = Field(
        None, description="a job on the run queued once its weights are there (the jobs form's intervene)"
    )

    @model_validator(mode="after")
    def _then_on_this_run(self) -> RebuildParams:
        if self.then is not None and self.then.params.run_id != self.run_id:
            raise ValueError(f"then.params.run_id: {self.then.params.run_id}, not the rebuilt run {self.run_id}")
        return self


class SuiteParams(_Params):
    preset: PresetName
    families: list[Family] | None = Field(None, min_length=1, description="None = the preset's families")
    tasks: list[TaskName] | None = Field(None, min_length=1, description="None = the preset's tasks")
    seeds: list[Seed] | None = Field(None, min_length=1, description="None = the preset's seeds")
    pretrained: list[Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_with_weights)]] | None = Field(
        None,
        min_length=1,
        max_length=32,
        description="transformers models (hub names or local folders) to fine-tune "
        "instead of the preset's models; each one's family is found from its blocks",
    )
    from_config: list[Annotated[str, Field(min_length=1, max_length=500)]] | None = Field(
        None,
        min_length=1,
        max_length=32,
        description="transformers configs (hub names or local folders) whose architectures are built "
        "with random weights and trained from scratch, instead of (or with pretrained: beside) "
        "the preset's models; each one's family is found from its blocks",
    )
    name: SuiteName | None = Field(None, description="the suite's name, stored with its runs; None = the preset's")
    max_steps: Int | None = Field(None, ge=1, le=10_000_000, description="override the preset's step cap")
    max_seconds: Float | None = Field(None, gt=0, description="override the preset's per-run time budget (s)")
    force: bool = Field(
        False,
        description="re-run runs already stored with the same config hash (default: skip them and finish the rest)",
    )
    rebuild_weights: bool = Field(
        False,
        description="rebuild, within their recorded step budget, the weights of stored "
        "runs that have none here (imported without weights), and "
        "measure them again",
    )
    parts: list[MeasurePart] | None = Field(
        None,
        min_length=1,
        description="measure only these parts of each run now (None = all); e.g. ['probes'] trains "
        "and probes every run first, and the same suite without parts adds the rest later "
        "(docs/SCIENCE.md#staged-measurement)",
    )
    controls: bool | Literal["only"] | None = Field(
        None,
        description="add each run's random-init control (docs/SCIENCE.md#controls); 'only': the controls "
        "alone; None = the preset's choice",
    )
    precision: Precision = precision_field()  # every run's measurement forwards at it

    @model_serializer(mode="wrap")
    def _later_fields(self, handler: Any) -> dict[str, Any]:
        """``precision`` is dumped only when bf16 (the params and hash of every fp32 suite stay)."""
        return _drop_default_precision(handler(self))

    @field_validator("pretrained", "from_config", mode="after")
    @classmethod
    def _sources_as_absolute(cls, v: list[str] | None) -> list[str] | None:
        """Local folders stored as their absolute paths (workers run elsewhere)."""
        return None if v is None else [absolute_if_local(x) for x in v]

    def config_hash(self) -> str:
        """As ``_Params.config_hash``; ``pretrained``, ``from_config`` and ``parts`` count only when
        set (older suites' hashes stay)."""
        d = self.model_dump(mode="json")
        for later in ("pretrained", "from_config", "parts"):
            if d.get(later) is None:
                d.pop(later, None)
        return config_hash(d)

    @model_validator(mode="after")
    def _check(self) -> SuiteParams:
        if self.rebuild_weights and self.force:
            raise ValueError("rebuild_weights: not with force (force trains afresh under the run's own budget)")
        return self


PARAMS_BY_KIND: dict[str, type[BaseModel]] = {
    "train": TrainParams,
    "probe": ProbeParams,
    "intervene": InterveneParams,
    "patch": PatchParams,
    "suite": SuiteParams,
    "rebuild": RebuildParams,
}


P = TypeVar("P", bound=BaseModel)


def params_of(kind: str, params: BaseModel, cls: type[P]) -> P:
    """``params`` as ``cls``, the params class of job ``kind`` (:data:`PARAMS_BY_KIND`).

    Raises:
        TypeError: ``params`` is another class's.
    """
    if not isinstance(params, cls):
        raise TypeError(f"a {kind} job's params must be {cls.__name__}, got {type(params).__name__}")
    return params
