"""The one entry path for measurements: :func:`measure_run` (probes, interventions, patching).

Both the suite pipeline (``worker.pipeline.train`` → ``run_measurements``) and the follow-up
``probe`` / ``intervene`` / ``patch`` jobs call :func:`measure_run` with the run
(:class:`MeasuredRun`) and a :class:`~worker.job_params.MeasureParams`; the job params are mapped
onto ``MeasureParams`` by :func:`probe_settings`, :func:`intervene_settings` and
:func:`patch_settings` (``PatchParams.eval_length`` → ``MeasureParams.patch_eval_length``,
``positions`` → ``patch_positions``, ``sites`` → ``patch_sites``, ``stride`` → ``patch_stride``,
``n_pairs`` → ``n_patch_pairs``).

Interventions are fitted at ONE documented length on both paths: the run's ``train_length``
(the fit length, recorded in ``measure_settings.fit_length``). Every call writes its settings
once (``measure_settings``, get-or-create by the settings hash) and points its result rows at
it; result rows keep ``config_hash`` = the hash of the params that requested them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from layerscope_core.registry import MEASURE_PARTS
from models_store.base import LayerwiseModel
from science.bounded import MemoryBound
from science.causal_layers import causal_layers
from science.context import Context, SilentContext
from science.measure import check_memory, measure_interventions, measure_probes
from science.patching import patching_grid
from science.records import MeasureSettingsRecord
from science.resume_folder import ResumeFolder, weights_digest
from science.tasks.base import Task
from science.tasks.file_task import NoCorruptionPairs
from store.models import Run
from store.session import session_scope
from store.settings import get_settings
from worker import in_flight_measuring, persist
from worker.job_params import InterveneParams, MeasureParams, PatchParams, ProbeParams
from worker.learned import keep_weights
from worker.method_fields import field_values

if TYPE_CHECKING:
    from worker.env import WorkerEnv

PARTS = MEASURE_PARTS  # probes, interventions, patching: in the order measured
# share of the progress bar per part (the suite's split: probes 0–0.3, interventions –0.85, patching –1)
_WEIGHT = {"probes": 0.3, "interventions": 0.55, "patching": 0.15}


def share_measured(parts: Iterable[str], done: Iterable[str]) -> float:
    """The share (0..1) of measuring ``parts`` that the stored ``done`` ones make, by their weight
    in the progress bar: where a job that measures the rest starts its bar (a re-queued job's bar
    goes on from there, not back to 0)."""
    parts = list(parts)
    total = sum(_WEIGHT[p] for p in parts)
    return sum(_WEIGHT[p] for p in parts if p in set(done)) / total if total else 0.0


@dataclass
class MeasuredRun:
    """A trained run to measure: its DB id, training seed and length, task, and model (on the
    worker's device). ``train_length`` is the fit length of every intervention."""

    run_id: int
    seed: int
    train_length: int
    task: Task
    model: LayerwiseModel


class _Row(Protocol):
    """A result row: a science record (``science.records``) or a mapping."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


class _Common(TypedDict):
    """The arguments every part's science function takes alike."""

    model: LayerwiseModel
    task: Task
    run_seed: int
    config_hash: str
    device: str


def clean(rows: Iterable[_Row]) -> list[dict[str, Any]]:
    """Records or dicts → plain rows with NaN/inf → None (rows store and serialise as JSON)."""

    def fix(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{k: fix(v) for k, v in r.items()} for r in rows]


def settings_record(run: MeasuredRun, measure: MeasureParams, layers: list[int] | None = None) -> MeasureSettingsRecord:
    """The ``measure_settings`` record of measuring ``run`` with ``measure`` (fit length = the
    run's ``train_length``; ``layers``: the intervention layers, None = every block)."""
    return MeasureSettingsRecord(
        params=measure.model_dump(mode="json"),
        eval_lengths=list(measure.eval_lengths),
        patch_eval_length=measure.patch_eval_length,
        fit_length=run.train_length,
        intervention_layers=None if layers is None else sorted(set(layers)),
    )


def check_measure_memory(
    model: Any, task: Any, measure: MeasureParams, parts: Iterable[str], layers: list[int] | None, train_length: int
) -> None:
    """Refuse (``science.bounded.MeasureMemoryError``, one line) a measurement of ``parts`` that
    cannot fit ``LAYERSCOPE_MEASURE_MEMORY_GB`` (``science.measure.check_memory``): before the
    measurement starts, and for a suite job before its training (``worker.pipeline.train``).
    ``layers``: the intervention layers (None: the preset's stride, ``causal_layers``)."""
    parts = list(parts)
    if layers is None:
        layers = causal_layers(model.n_layers, measure.max_causal_layers)
    check_memory(
        model,
        task,
        MemoryBound.of_gib(get_settings().measure_memory_gb),
        eval_lengths=list(measure.eval_lengths),
        n_sequences=measure.n_probe_sequences,
        probes="probes" in parts,
        methods=list(measure.methods) if "interventions" in parts else None,
        layers=layers,
        fit_length=train_length,
    )


def measure_run(
    run: MeasuredRun,
    measure: MeasureParams,
    env: WorkerEnv,
    ctx: Context | None = None,
    *,
    parts: Iterable[str] = PARTS,
    layers: list[int] | None = None,
    result_hash: str | None = None,
    complete: bool = False,
) -> int:
    """Measure ``run`` with ``measure``: the selected ``parts`` (some of :data:`PARTS`), each
    stored as soon as it finishes, pointing at the settings row. Returns the settings row's id.

    ``layers``: intervention layers (None = every block); ``result_hash``: the ``config_hash``
    stored on the result rows (default ``measure.config_hash()``); ``complete``: set the run's
    status to ``complete`` with the last write. Interventions run only when ``measure.methods``
    or ``measure.conv1d`` asks for some.

    Raises:
        ValueError: an unknown part (and what the science functions raise: bad layers, positions).
    """
    ctx = ctx or SilentContext()
    parts = _ordered_parts(parts)
    if layers is None:  # a deep model: the preset's stride of blocks (docs/SCIENCE.md#causal-layers)
        layers = causal_layers(run.model.n_layers, measure.max_causal_layers)
    m = _Measurement(run, measure, env, ctx, parts, layers, result_hash or measure.config_hash())
    # a measurement that cannot fit its bound is refused before any part starts
    check_measure_memory(run.model, run.task, measure, parts, layers, run.train_length)
    if "probes" in parts:
        m.probes()
    if "interventions" in parts:
        m.interventions()
    if "patching" in parts:
        m.patching(complete)
    elif complete:
        m.mark_complete()
    ctx.progress(1.0, "measured")
    return m.settings_id()


def _ordered_parts(parts: Iterable[str]) -> list[str]:
    """``parts`` checked against :data:`PARTS` and put in their order. Raises ValueError on an unknown one."""
    wanted = set(parts)
    unknown = wanted - set(PARTS)
    if unknown:
        raise ValueError(f"unknown measurement parts {sorted(unknown)}; expected some of {list(PARTS)}")
    return [p for p in PARTS if p in wanted]


class _Measurement:
    """One :func:`measure_run` call: each part measured and stored, the settings row written with
    the first results (a measurement that fails first leaves no row), and the progress bar split
    between the parts by :data:`_WEIGHT`."""

    def __init__(
        self,
        run: MeasuredRun,
        measure: MeasureParams,
        env: WorkerEnv,
        ctx: Context,
        parts: list[str],
        layers: list[int] | None,
        result_hash: str,
    ) -> None:
        self.run, self.measure, self.env, self.ctx, self.layers = run, measure, env, ctx, layers
        self.common: _Common = {
            "model": run.model,
            "task": run.task,
            "run_seed": run.seed,
            "config_hash": result_hash,
            "device": env.device,
        }
        # what the measurement holds beyond the weights (LAYERSCOPE_MEASURE_MEMORY_GB, science.bounded)
        self.memory = MemoryBound.of_gib(get_settings().measure_memory_gb)
        self._sid: int | None = None
        self._total = sum(_WEIGHT[p] for p in parts) or 1.0
        self._start = 0.0

    def settings_id(self) -> int:
        if self._sid is None:
            with session_scope(self.env.session_factory) as s:
                self._sid = persist.get_or_create_settings(s, settings_record(self.run, self.measure, self.layers))
        return self._sid

    def span(self, part: str) -> Context:
        """The progress context of ``part``, the next slice of the bar."""
        lo, self._start = self._start, self._start + _WEIGHT[part] / self._total
        return self.ctx.sub(lo, min(1.0, self._start))

    def probes(self) -> None:
        measure = self.measure
        rows = measure_probes(
            **self.common,
            eval_lengths=measure.eval_lengths,
            n_sequences=measure.n_probe_sequences,
            ctx=self.span("probes"),
            memory=self.memory,
            precision=measure.precision,
        )
        with self.ctx.storing():
            sid_now = self.settings_id()
            with session_scope(self.env.session_factory) as s:
                persist.replace_probe_results(s, self.run.run_id, clean(rows), settings_id=sid_now, commit=False)
                keep_weights(self.env, s, self.run.run_id, rows, "probe")  # and what each probe learned

    def interventions(self) -> None:
        """The interventions, when ``measure.methods`` or ``measure.conv1d`` asks for some (else only
        their share of the progress bar passes)."""
        measure = self.measure
        if not (measure.methods or measure.conv1d):
            self.span("interventions")
            return
        rows = measure_interventions(
            **self.common,
            eval_lengths=measure.eval_lengths,
            n_sequences=measure.n_probe_sequences,
            methods=measure.methods,
            layers=self.layers,
            method_params=measure.method_settings(),  # each method's declared parameters
            conv1d=measure.conv1d,
            fit_length=self.run.train_length,
            n_permutations=measure.n_permutations,
            ctx=self.span("interventions"),
            resume=(resume := self.resume_folder("interventions")),
            memory=self.memory,
            precision=measure.precision,
        )
        with self.ctx.storing():
            sid_now = self.settings_id()
            with session_scope(self.env.session_factory) as s:
                persist.replace_intervention_results(s, self.run.run_id, clean(rows), settings_id=sid_now, commit=False)
                keep_weights(self.env, s, self.run.run_id, rows, "edit")  # and the directions each edit removed
        resume.clear()  # stored: its pieces are done with

    def resume_folder(self, part: str) -> ResumeFolder:
        """``<store>/measuring/<part>-<hash>``: the finished pieces of ``part`` on these weights
        with these settings (a killed process resumes from them; docs/SCIENCE.md#staged-measurement).
        The hash is of the weights, the settings, the layers, the fit length, the task and the seed,
        not of the DB's run id: a folder carried in a bundle (``export --in-flight``, with the run's
        weights) is found again where the run was imported under another id. Its note names the run
        (:func:`worker.in_flight_measuring.note_of`) so that an export finds the folders of a suite."""
        key = json.dumps(
            [
                weights_digest(self.run.model),
                self.common["config_hash"],
                self.layers,
                self.run.train_length,
                self.run.task.name,
                self.run.seed,
            ]
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        with session_scope(self.env.session_factory) as s:
            note = in_flight_measuring.note_of(s.get(Run, self.run.run_id), part, self.common["config_hash"])
        return ResumeFolder(Path(self.env.store_dir) / in_flight_measuring.FOLDER / f"{part}-{digest}", note)

    def patching(self, complete: bool) -> None:
        """The patching grid (none for a file task without one-token pairs); ``complete``: mark the
        run complete in the same write."""
        measure = self.measure
        try:
            rows = patching_grid(
                **self.common,
                eval_length=measure.patch_eval_length,
                positions=measure.patch_positions,
                sites=measure.patch_sites,
                stride=measure.patch_stride,
                n_pairs=measure.n_patch_pairs,
                layers=self.layers,
                ctx=self.span("patching"),
                precision=measure.precision,
            )
        except NoCorruptionPairs as exc:  # a file task without one-token pairs: nothing to patch
            self.ctx.log(f"patching skipped: {exc}")
            rows = []
        with self.ctx.storing():
            sid_now = self.settings_id()
            with session_scope(self.env.session_factory) as s:
                persist.replace_patching_results(
                    s, self.run.run_id, clean(rows), settings_id=sid_now, commit=not complete
                )
                if complete:
                    persist.set_run_status(s, self.run.run_id, "complete")

    def mark_complete(self) -> None:
        with self.ctx.storing(), session_scope(self.env.session_factory) as s:
            persist.set_run_status(s, self.run.run_id, "complete")


# --- job params → MeasureParams -------------------------------------------------------------


def stored_eval_lengths(run_id: int, env: WorkerEnv, fallback: int) -> list[int]:
    """The eval lengths a stored run was measured at (:func:`eval_lengths_in`), ``[fallback]`` when
    none is recorded."""
    from store.measured import eval_lengths_in

    with session_scope(env.session_factory) as s:
        return eval_lengths_in(s, run_id) or [fallback]


def probe_settings(params: ProbeParams, lengths: list[int]) -> MeasureParams:
    """A probe job's settings (``lengths``: its eval lengths, resolved)."""
    return MeasureParams(eval_lengths=lengths, n_probe_sequences=params.n_probe_sequences, precision=params.precision)


def intervene_settings(params: InterveneParams, lengths: list[int]) -> MeasureParams:
    """An intervene job's settings (its ``layers`` go to :func:`measure_run` separately)."""
    return MeasureParams(
        eval_lengths=lengths,
        n_probe_sequences=params.n_probe_sequences,
        methods=params.methods,
        **field_values(params),  # the built-ins' parameters with a field of their own (pca_k, ...)
        method_params=params.method_params,
        conv1d=params.conv1d,
        n_permutations=params.n_permutations,
        precision=params.precision,
    )


def patch_settings(params: PatchParams, lengths: list[int]) -> MeasureParams:
    """A patch job's settings (``lengths``: the run's measured eval lengths, for the record)."""
    return MeasureParams(
        eval_lengths=lengths,
        patch_eval_length=params.eval_length,
        patch_positions=params.positions,
        patch_sites=params.sites,
        patch_stride=params.stride,
        n_patch_pairs=params.n_pairs,
        precision=params.precision,
    )
