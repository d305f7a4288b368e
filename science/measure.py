"""Per-layer measurements of a trained run: probes and interventions (docs/SCIENCE.md#measurements).

Every function returns typed records (``science.records``: :class:`ProbeRecord`,
:class:`InterventionRecord`, fields = the columns of ``probe_results`` /
``intervention_results``; dict-compatible) so they are usable from a notebook without a database.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from layerscope_core.registry import TRAIN_LENGTH, family_names, get_family
from models_store.base import LayerwiseModel
from models_store.capture import edit_layer
from models_store.conv1d import remove_conv1d
from science.bounded import FIT_COPIES, MemoryBound, Streamed, refuse_over, state_bytes
from science.captured import CAPTURE_BATCH, Captured, capture, majority_rate, per_sequence_accuracy, predictions
from science.context import Context, SilentContext
from science.fit_memory import fit_need
from science.interventions import Edit, fit_edit, n_fit_sequences, random_removal
from science.methods import (
    accumulates,
    fit_copies,
    get_method,
    method_settings,
    more_data_helps,
    record_fields,
    refits_until_removed,
)
from science.precision import at_precision
from science.probes import ProbeReport, probe_layers
from science.records import InterventionRecord, ProbeRecord
from science.resume_folder import ResumeFolder
from science.seeds import data_seed
from science.spilled_capture import SpilledCapture
from science.stats import chance_line, holm, paired_permutation_test
from science.streamed_fit import SpilledFit, feed_layers, spill_layer
from science.tasks.base import Task, TaskData

ALL_LAYERS = -2  # conv1d_removal in every layer
ALPHA = 0.05
# Removal that removes (docs/SCIENCE.md#fit-size): a method whose class sets
# ``refit_until_removed`` (LEACE, INLP) is refitted on twice as many sequences, at most
# MAX_FIT_DOUBLINGS times, while a probe refit on its edited held-out states at the fit length
# reads the variable above its removal line: the best constant guess on its test tokens plus the
# larger of REMOVAL_TOL and the one-sided 1 % binomial margin (science.stats.chance_line;
# docs/SCIENCE.md#removal-line).
REMOVAL_TOL = 0.02
MAX_FIT_DOUBLINGS = 2
# Rank-matched random removal (docs/SCIENCE.md#random-removal): draws per (layer, rank).
N_RANDOM_DRAWS = 5
FIT_SHARE = 0.5  # share of an intervention job's progress bar given to fitting the edits
# One edited layer's output an eval set keeps for start_at_layer, at most (float32 bytes; the
# memory bound, science.bounded, limits how many layers' are held at once): above it every edited
# forward runs every block again instead (the same rows, more time).
KEEP_OUTPUTS_MAX_BYTES = 2 * 1024**3


def _probe_rows(
    captured: Captured, run_seed: int, task: Task, eval_length: int, config_hash: str, ctx: Context | None = None
) -> list[ProbeRecord]:
    tokens = captured.data.tokens
    reports = probe_layers(
        captured.states,
        captured.data.labels,
        task.n_classes,
        seed=data_seed(run_seed, "split", eval_length),
        tokens=tokens,
        token_types=task.token_types(tokens),
        type_names=task.token_type_names,
        ctx=ctx,  # progress and a cancel check per layer
    )
    return [
        ProbeRecord.from_report(r, eval_length=eval_length, config_hash=config_hash) for _, r in sorted(reports.items())
    ]


@at_precision
def measure_probes(
    model: LayerwiseModel,
    task: Task,
    *,
    run_seed: int,
    eval_lengths: list[int],
    n_sequences: int,
    config_hash: str,
    device: torch.device | str = "cpu",
    ctx: Context | None = None,
    memory: MemoryBound | None = None,
    precision: str = "fp32",
) -> list[ProbeRecord]:
    """A probe at every layer (emb included) and every eval length on held-out sequences.

    ``memory``: the bound on the states held at once (:class:`science.bounded.MemoryBound`;
    None: unbounded): where every layer does not fit it, one forward pass writes every layer's
    states to disk (:class:`science.spilled_capture.SpilledCapture`) and the layers are probed in
    groups that fit it, read back; the rows are the same bit for bit. Raises :class:`science.bounded.MeasureMemoryError` before
    anything is computed when one layer's states at the longest length do not fit.

    Returns :class:`ProbeRecord` s for ``probe_results``: accuracy, balanced accuracy and majority
    baseline in 0..1, per-position accuracy (L entries, entry t = 0-based position t), convergence flag and iterations,
    the control-task accuracy and selectivity (a random label per token type × position bucket,
    after Hewitt & Liang 2019; docs/SCIENCE.md#selectivity), and the accuracy per token type where
    the task defines token types (docs/SCIENCE.md#token-types).

    ``precision``: ``fp32`` | ``bf16``, the forward passes' (``science.precision``); the states
    are kept and probed in float32 either way. Raises ValueError for another value.
    """
    ctx = ctx or SilentContext()
    bound, layers = memory or MemoryBound(), list(model.layers)
    width = _width(model, task, device) if bound.limit is not None else 0

    def groups(n: int, length: int) -> list[list[int]]:  # a probe's fit copies one layer's states (FIT_COPIES)
        per_layer = state_bytes(n, length, width)
        return bound.groups(layers, per_layer, f"probes at L={length}", working=(FIT_COPIES - 1) * per_layer)

    for length in eval_lengths:  # refused before any work: one layer at each length must fit
        groups(n_sequences, length)
    rows: list[ProbeRecord] = []
    for i, length in enumerate(eval_lengths):
        ctx.check_cancelled()
        data = task.generate(length, n_sequences, data_seed(run_seed, "probe", length), split="test")
        if data.n < n_sequences:  # a file task's held-out rows are all there are: say so, once a length
            ctx.log(
                f"probes at L={length}: task {task.name!r} has {data.n} held-out sequences; measured on {data.n}, not {n_sequences}"
            )
        cut = groups(data.n, length)
        # more than one group: one forward pass writes every layer to disk, each group is read back
        spilled = SpilledCapture(model, data, device, layers) if len(cut) > 1 else None
        try:
            for j, group in enumerate(cut):  # one group's states held at a time, dropped after
                lo = (i + j / len(cut)) / len(eval_lengths)
                span = ctx.sub(lo, (i + (j + 1) / len(cut)) / len(eval_lengths))
                if spilled is not None:
                    captured = spilled.group(group)
                else:
                    captured = capture(model, data, device, layers=None if bound.limit is None else group)
                rows += _probe_rows(captured, run_seed, task, length, config_hash, span)
                del captured
        finally:
            if spilled is not None:
                spilled.close()
        ctx.progress((i + 1) / len(eval_lengths), f"probes at L={length}")
    return rows


def _effect_row(
    method: str,
    layer: int,
    length: int,
    base: torch.Tensor,
    edited: torch.Tensor,
    chance: float,
    refit: tuple[float, float, float] | None,
    rank: int | None,
    k: int | None,
    n_perm: int,
    seed: int,
    config_hash: str,
    method_fields: dict[str, Any] | None = None,
    n_fit: int | None = None,
    random: dict[str, Any] | None = None,
) -> InterventionRecord:
    """One intervention row; ``method_fields``: the columns the method fills from its edit
    (``science.methods.record_fields``: INLP's convergence and rounds)."""
    base_acc, edited_acc = float(base.mean()), float(edited.mean())
    gap = base_acc - chance
    return InterventionRecord(
        **(method_fields or {}),
        n_fit_sequences=n_fit,
        method=method,
        layer=layer,
        eval_length=length,
        k=k,
        base_acc=base_acc,
        edited_acc=edited_acc,
        delta_pp=(edited_acc - base_acc) * 100.0,
        drop_rel_chance=(base_acc - edited_acc) / gap if gap > 1e-9 else None,
        refit_acc=refit[0] if refit else None,
        refit_majority=refit[1] if refit else None,
        refit_line=refit[2] if refit else None,
        rank_removed=rank,
        p_value=paired_permutation_test(base.numpy(), edited.numpy(), n_perm=n_perm, seed=seed),
        p_holm=None,
        significant=None,
        n_sequences=int(base.shape[0]),
        seed=seed,
        config_hash=config_hash,
        **(random or {}),
    )


def removal_line(report: ProbeReport) -> float:
    """The refit accuracy at or under which an edit removed the variable (measurement version 2;
    docs/SCIENCE.md#removal-line): the best constant guess on the refit's held-out tokens plus the
    larger of :data:`REMOVAL_TOL` and their one-sided 1 % binomial margin
    (``science.stats.chance_line``). ``report``: the refit's ``science.probes.ProbeReport``.
    Raises ValueError when it scored no token or does not say its best guess."""
    if report.best_guess is None or not report.n_test_tokens:
        raise ValueError(f"the refit at layer {report.layer} scored no held-out token: no removal line")
    return chance_line(report.best_guess, report.n_test_tokens, REMOVAL_TOL)


def random_removal_effect(
    model: LayerwiseModel,
    layer: int,
    center: torch.Tensor,
    rank: int,
    data: TaskData,
    base_acc: torch.Tensor,
    run_seed: int,
    draws: int = N_RANDOM_DRAWS,
    device: torch.device | str = "cpu",
    ctx: Context | None = None,
    start: list[dict[int, object]] | None = None,
    full_rank: torch.Tensor | None = None,
) -> dict[str, Any]:
    """Behavioural change when ``rank`` random orthonormal directions are removed at ``layer``
    (:func:`science.interventions.random_removal`, around ``center`` [D]), over ``draws`` draws
    (one when ``rank`` = D: every draw then removes the whole space, i.e. mean ablation).

    ``base_acc``: per-sequence token accuracy [n] of the unedited model on ``data``; ``ctx``: a
    cancel is checked before each draw (each is a forward pass over ``data``); ``start``: the
    ``Captured.outputs`` of ``data.tokens``, from which each draw's forward starts at ``layer``
    (the same predictions, without running the blocks before it again); ``full_rank``: the
    per-sequence accuracy [n] under mean ablation around ``center``, when already measured — the
    rank-D draw is that edit (:func:`science.interventions.random_removal`), so it is not run again.

    Returns:
        ``{random_delta_pp, random_delta_lo, random_delta_hi, random_draws}``: the mean, min and
        max over the draws of the mean per-sequence ``delta_pp`` (pp).
    """
    n_draws = 1 if rank >= center.shape[-1] else draws
    g = torch.Generator().manual_seed(data_seed(run_seed, "random_removal", 100_003 * (layer + 1) + rank))
    deltas = []
    for _ in range(n_draws):
        if ctx is not None:
            ctx.check_cancelled()
        edit = random_removal(center, rank, g)
        if edit.left is None and full_rank is not None:
            deltas.append(float((full_rank - base_acc).mean()) * 100.0)
            continue
        with edit_layer(model, layer, edit.apply):
            edited = per_sequence_accuracy(
                predictions(model, data.tokens, device, None if start is None else (layer, start)), data.labels
            )
        deltas.append(float((edited - base_acc).mean()) * 100.0)
    return {
        "random_delta_pp": sum(deltas) / len(deltas),
        "random_delta_lo": min(deltas),
        "random_delta_hi": max(deltas),
        "random_draws": n_draws,
    }


def _removes_whole_space(edit: Edit, center: torch.Tensor) -> bool:
    """Whether ``edit`` is mean ablation around ``center`` [D]: the constant edit the rank-D random
    draw also is (bit for bit the same edit, so the same predictions)."""
    return (
        edit.left is None
        and edit.rank_removed >= center.shape[-1]
        and torch.equal(edit.center.double().to(center.device), center)
    )


def _mean_ablation_accuracy(
    model: LayerwiseModel, layer: int, center: torch.Tensor, data: TaskData, device: torch.device | str, start: Any
) -> torch.Tensor:
    """Per-sequence accuracy [n] with every state at ``layer`` replaced by ``center`` [D]."""
    edit = random_removal(center, int(center.shape[-1]), torch.Generator())  # rank D: no draw made
    with edit_layer(model, layer, edit.apply):
        return per_sequence_accuracy(predictions(model, data.tokens, device, start), data.labels)


def _apply_holm(rows: list[InterventionRecord]) -> None:
    """Holm-correct p-values across a run's layers, per (method, eval length); in place."""
    groups: dict[tuple[str, int], list[InterventionRecord]] = {}
    for row in rows:
        key = (row.method, row.eval_length) if row.layer != ALL_LAYERS else ("all", id(row))
        groups.setdefault(key, []).append(row)
    for group in groups.values():
        adjusted = holm([r.p_value for r in group])
        for r, p in zip(group, adjusted):  # p None: the row's own p-value is None (not a number)
            r.p_holm = None if p is None else float(p)
            r.significant = None if p is None else bool(p < ALPHA)


@dataclass
class _Fitted:
    """The edits of every (method, layer), the sequences each was fitted on, the refit probes
    (accuracy, majority, removal line) already measured at the fit length, and the eval set at the fit length
    that the removal check captured (None when no method needed it)."""

    edits: dict[tuple[str, int], Edit]
    fit_sizes: dict[tuple[str, int], int]
    refits: dict[tuple[str, int], tuple[float, float, float]]
    check: tuple[TaskData, Streamed] | None


class _Progress:
    """The measuring half of an intervention job's progress bar (the fits take :data:`FIT_SHARE`)."""

    def __init__(self, ctx: Context, n_units: int) -> None:
        self.ctx, self.n_units, self.done = ctx, n_units, 0

    def step(self, message: str) -> None:
        self.done += 1
        self.ctx.progress(FIT_SHARE + (1 - FIT_SHARE) * self.done / self.n_units, message)


@dataclass
class _Interventions:
    """What one :func:`measure_interventions` call shares: the model and task, the seeded fit and
    eval data (each fit set captured once), the edits' fits and the probes refit on edited states."""

    model: LayerwiseModel
    task: Task
    run_seed: int
    layers: list[int]
    fit_length: int
    n_sequences: int
    settings: dict[str, dict[str, Any]]  # per method, its parameters (science.methods.method_settings)
    device: torch.device | str
    ctx: Context
    resume: ResumeFolder | None = None
    memory: MemoryBound = MemoryBound()
    doubling: bool = True  # some method may refit on doubled fit sets (refits_until_removed)
    methods: tuple[str, ...] = ()  # the methods fitted (whether every one can stream its fit)

    def __post_init__(self) -> None:
        self.width = _width(self.model, self.task, self.device)
        self.n_fit = n_fit_sequences(self.width, self.fit_length, self.n_sequences)
        self._fits: dict[int, Streamed] = {}
        self._centers: dict[int, torch.Tensor] = {}
        self._spilled: dict[tuple[int, int], SpilledFit] = {}  # (layer, n): one layer's fit rows on disk
        self._fit_layers: dict[int, list[int]] = {}  # fit size n: the layers fitted on it (fit_edits)
        # (method, layer): the running statistics of an accumulating method's last fit, kept while
        # its refit may ask for the doubled set (EditMethod.accumulates)
        self._stats: dict[tuple[str, int], Any] = {}

    # --- what is held at once (science.bounded): an eval set's layer, and one fit set's layers
    def _eval_layer_bytes(self, length: int) -> int:
        """One layer of an eval set at ``length``: its states and, kept, its hook output (P+L)."""
        states = state_bytes(self.n_sequences, length, self.width)
        return states + (state_bytes(self.n_sequences, length + 1, self.width) if self._keeps(length) else 0)

    def _largest_fit(self) -> int:
        return self.n_fit * (2**MAX_FIT_DOUBLINGS if self.doubling and self._rereading() else 1)

    def _rereading(self) -> list[str]:
        """The methods fitted on a doubled set's every row: those refitted until removed that do
        not accumulate (an accumulating one reads only the new sequences, a batch at a time)."""
        return [m for m in self.methods if refits_until_removed(m) and not accumulates(m)]

    def _kept_bytes(self) -> int:
        """The most the kept statistics hold at once: one set per accumulating method and layer
        (LEACE's float64 moments, ``8·(D² + D·C + D + C)`` bytes each); nothing without doubling."""
        kept = [m for m in self.methods if accumulates(m) and refits_until_removed(m)] if self.doubling else []
        D, C = self.width, self.task.n_classes
        return len(kept) * len(self.layers) * 8 * (D * D + D * C + D + C)

    def _fit_need(self, n: int, methods: tuple[str, ...] | list[str]) -> tuple[int, bool]:
        """(bytes, streamed) of fitting ``methods`` on n sequences beside the removal check's eval
        layer (science.streamed_fit.fit_need: in memory where it fits, else from disk)."""
        beside = self._eval_layer_bytes(self.fit_length)
        return fit_need(self.memory, n, self.fit_length, self.width, methods, beside)

    def check_memory(self, eval_lengths: list[int]) -> None:
        """Refuse (``MeasureMemoryError``, one line) before any work what cannot fit the bound:
        the first fit and the largest doubled one that is read in full (its states and the fit's
        copies, FIT_COPIES; or, where that is over the bound and every method streams, its rows on
        disk and one chunk of them in memory) beside one layer of the removal check's eval set and
        the statistics an accumulating method keeps, and one eval layer with its refit at every length."""
        sizes = [(self.n_fit, list(self.methods))]
        if self._largest_fit() > self.n_fit:  # a doubled set read in full by the methods that re-read it
            sizes.append((self._largest_fit(), self._rereading()))
        for n, methods in sizes:
            need, streamed = self._fit_need(n, methods)
            how = " from rows on disk" if streamed else ""
            self.memory.require(
                need + self._kept_bytes(),
                f"fitting an edit on {n:,} sequences at L={self.fit_length} (d_model {self.width}){how} "
                f"beside one layer's eval states",
            )
        for length in eval_lengths:
            self.eval_groups(length)

    def _fit_groups(self, n: int) -> list[list[int]]:
        """The layers that read the fit set of n sequences (every layer for the first size, those
        whose refit still read the variable for a doubled one: ``fit_edits``) in groups that fit
        the bound beside the removal check's layer and one fit's copies of its rows."""
        layers = self._fit_layers.get(n, list(self.layers))
        if self.memory.limit is None:
            return [layers]
        reserve = self._eval_layer_bytes(self.fit_length) + self._kept_bytes()  # the removal check's layer
        fitting = int((self._copies(n) - 1) * state_bytes(n, self.fit_length, self.width))
        room = MemoryBound(max(self.memory.limit - reserve - fitting, 1))
        per_layer = state_bytes(n, self.fit_length, self.width)
        return (
            room.groups(layers, per_layer, "the fit set") if per_layer <= (room.limit or 0) else [[x] for x in layers]
        )

    def _copies(self, n: int) -> float:
        """What a fit on the n-sequence set holds, in multiples of one layer's states: the most of
        the methods fitted on it (every method on the first set, the refitted ones on a doubled
        set; ``EditMethod.fit_copies``)."""
        fitted = self.methods if n == self.n_fit else self._rereading()
        return fit_copies(fitted or self.methods)

    def _one_each(self) -> list[list[int]]:
        return [[layer] for layer in self.layers]

    def _check_groups(self) -> list[list[int]]:
        """The removal check's eval set while fitting: one layer at a time under a bound."""
        return [list(self.layers)] if self.memory.limit is None else self._one_each()

    def _check_set(self) -> tuple[TaskData, Streamed]:
        """The removal check's eval set at the fit length. Where its groups are the eval set's own
        (unbounded, or one intervention layer a group either way) it is captured as the eval set
        (outputs kept, predictions read) and measured on afterwards without a second capture;
        otherwise states only, each pass stopping after its layer."""
        same = self._check_groups() == self.eval_groups(self.fit_length)
        return self.eval_set(self.fit_length, self._check_groups(), states_only=not same)

    def _keeps(self, length: int) -> bool:
        """Whether an eval set keeps its edited layers' outputs (each edited forward then starts
        at its layer, predictions(start=…))."""
        kept = state_bytes(self.n_sequences, length + 1, self.width)
        return hasattr(self.model, "hook_module") and kept <= KEEP_OUTPUTS_MAX_BYTES

    def eval_groups(self, length: int) -> list[list[int]]:
        """The intervention layers of an eval set at ``length`` in groups that fit the bound beside
        one refit (the edited states and the probe's copies of them, FIT_COPIES)."""
        if self.memory.limit is None:
            return [list(self.layers)]
        refit = FIT_COPIES * state_bytes(self.n_sequences, length, self.width)
        return self.memory.groups(
            self.layers, self._eval_layer_bytes(length), f"the eval set at L={length}", working=refit
        )

    def fit_set(self, n: int) -> Streamed:
        """The fit data of n sequences at the fit length (its states captured a group at a time;
        the other sizes' held states are dropped first)."""
        others = [streamed for other, streamed in self._fits.items() if other != n]
        need = int(self._copies(n) * state_bytes(n, self.fit_length, self.width)) + self._eval_layer_bytes(
            self.fit_length
        )
        if self.memory.limit is not None and sum(o.held_bytes() for o in others) + need > self.memory.limit:
            for streamed in others:  # no room beside them: dropped, captured again when read again
                streamed.release()
        if n not in self._fits:  # states only: each pass stops after its group's deepest layer
            self._fits[n] = Streamed(self.model, self._fit_data(n), self.device, self._fit_groups(n), preds=False)
        return self._fits[n]

    def _release_size(self, n: int) -> None:
        """Drop the n-sequence fit set's held states and spilled rows (its fits are done)."""
        if n in self._fits:
            self._fits[n].release()
        for key in [k for k in self._spilled if k[1] == n]:
            self._spilled.pop(key).close()

    def _fit_data(self, n: int) -> TaskData:
        """The n-sequence fit set's data: the first fit size's with the seed it always had; a
        doubled set is the set it doubles followed by :meth:`_new_sequences` (a superset, so that
        an accumulating fit only adds the new sequences' statistics)."""
        if n == self.n_fit:
            return self.task.generate(self.fit_length, n, data_seed(self.run_seed, "intervene_fit", 0), split="test")
        half, new = self._fit_data(n // 2), self._new_sequences(n)
        return TaskData(torch.cat([half.tokens, new.tokens]), torch.cat([half.labels, new.labels]))

    def _new_sequences(self, n: int) -> TaskData:
        """The sequences the n-sequence fit set adds to the set it doubles (n / 2 of them)."""
        seed = data_seed(self.run_seed, "intervene_fit", n)
        return self.task.generate(self.fit_length, n - n // 2, seed, split="test")

    def release_fits(self) -> None:
        """Drop every fit set's held states (the fits and centres are done)."""
        for streamed in self._fits.values():
            streamed.release()

    def eval_set(
        self, length: int, groups: list[list[int]] | None = None, *, states_only: bool = False
    ) -> tuple[TaskData, Streamed]:
        """The held-out eval data at ``length`` and its states (``groups``: how they are captured,
        default :meth:`eval_groups`), each edited layer's output kept where it fits;
        ``states_only``: neither outputs nor predictions (the removal check's refits read states
        only, so each pass stops after its group's deepest layer)."""
        seed = data_seed(self.run_seed, "intervene_eval", length)
        data = self.task.generate(length, self.n_sequences, seed, split="test")
        groups = self.eval_groups(length) if groups is None else groups
        if states_only:
            return data, Streamed(self.model, data, self.device, groups, preds=False)
        return data, Streamed(self.model, data, self.device, groups, keep_outputs=self._keeps(length))

    def refit(self, edit: Edit, layer: int, states: Captured | Streamed, length: int) -> tuple[float, float, float]:
        """(accuracy, majority baseline, removal line) of a probe refit on ``states`` at ``layer``
        edited by ``edit``: the edit removed the variable when the accuracy is ≤ the line
        (:func:`removal_line`)."""
        edited_states = edit.apply(states.states[layer])  # (n, L, D): what the next block sees
        report = probe_layers(
            {layer: edited_states},
            states.data.labels,
            self.task.n_classes,
            seed=data_seed(self.run_seed, "split", length),
        )[layer]
        return report.accuracy, report.majority_baseline, removal_line(report)

    def spilled(self, layer: int, n: int) -> SpilledFit:
        """``layer``'s rows of the n-sequence fit set on disk (science.streamed_fit.spill_layer),
        spilled once; another layer's are deleted first."""
        for key in [k for k in self._spilled if k[0] != layer]:
            self._spilled.pop(key).close()
        if (layer, n) not in self._spilled:
            for streamed in self._fits.values():  # nothing of the in-memory fit sets is needed meanwhile
                streamed.release()
            self._spilled[(layer, n)] = spill_layer(
                self.model, self._fit_data(n), self.device, layer, self.task.n_classes
            )
        return self._spilled[(layer, n)]

    def release_spilled(self) -> None:
        """Delete every spilled fit set's file."""
        for fit in self._spilled.values():
            fit.close()
        self._spilled.clear()

    def fitted(self, method: str, layer: int, n: int) -> Edit:
        """``method``'s edit of ``layer`` fitted on the labelled tokens of the n-sequence fit set
        (from its rows on disk where they do not fit the bound: science.streamed_fit)."""
        if accumulates(method) and self.doubling:  # its statistics kept for a doubled set
            return self._fit_statistics(method, layer, n)
        if self._fit_need(n, [method])[1]:
            fit_streamed = get_method(method).fit_streamed
            params = self.settings.get(method, {})
            return fit_streamed(self.spilled(layer, n), self.task.n_classes, seed=self.run_seed, ctx=self.ctx, **params)
        x, y = self._labelled_rows(layer, n)
        return fit_edit(
            method,
            x,
            y,
            self.task.n_classes,
            seed=self.run_seed,
            ctx=self.ctx,  # INLP checks a cancel before each of its rounds
            **self.settings.get(method, {}),
        )

    def _labelled_rows(self, layer: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``layer``'s labelled rows ``[m, D]`` of the n-sequence fit set held in memory, and their
        labels ``[m]`` (a file task's null labels are not fitted)."""
        x = self.fit_set(n).states[layer]
        x = x.reshape(-1, x.shape[-1])  # (n·L, D)
        y = self.fit_set(n).data.labels.reshape(-1)
        return x[y >= 0], y[y >= 0]

    def _fit_statistics(self, method: str, layer: int, n: int) -> Edit:
        """An accumulating method's edit of ``layer``: on the first fit set its statistics of
        every row (from the rows on disk where they do not fit the bound, else in memory), on a
        doubled set the kept statistics with the new sequences' added (:meth:`_accumulate`)."""
        m = get_method(method)
        if (method, layer) not in self._stats:
            if n != self.n_fit:
                raise RuntimeError(f"{method} at layer {layer}: no statistics of the {n // 2}-sequence set to add to")
            if self._fit_need(n, [method])[1]:
                stats = copy.deepcopy(self.spilled(layer, n).stats)  # the rows' own, as they were spilled
            else:
                x, y = self._labelled_rows(layer, n)
                stats = m.new_statistics(self.width, self.task.n_classes, x.device)
                m.update_statistics(stats, x, y, self.task.n_classes)
            self._stats[(method, layer)] = stats
        return m.edit_from_statistics(self._stats[(method, layer)])

    def _accumulate(self, n: int, pairs: list[tuple[int, str]]) -> None:
        """Add the statistics of the n-sequence set's new sequences to each (layer, method)'s kept
        ones: one pass over them a batch at a time (``feed_layers``), layers in groups whose one
        batch fits the bound, each pass stopping after its group's deepest layer."""
        layers = sorted({layer for layer, _ in pairs})
        if not layers:
            return
        data = self._new_sequences(n)
        per_layer = state_bytes(min(CAPTURE_BATCH, data.n), self.fit_length, self.width)

        def feed(layer: int, rows: torch.Tensor, y: torch.Tensor) -> None:
            for lay, method in pairs:
                if lay == layer:
                    get_method(method).update_statistics(self._stats[(method, layer)], rows, y, self.task.n_classes)

        groups = self.memory.groups(layers, per_layer, "the new fit sequences", working=self._kept_bytes())
        for group in groups:
            feed_layers(self.model, data, self.device, group, feed)

    def fit_edits(self, methods: list[str]) -> _Fitted:
        """Every (method, layer)'s edit; a method that refits until removed (LEACE, INLP:
        ``refit_until_removed``) refitted on twice as many sequences, at most
        :data:`MAX_FIT_DOUBLINGS` times, while their refit probe at the fit length reads more than
        their removal line (:func:`removal_line`; docs/SCIENCE.md#fit-size).

        The fits go a fit size at a time: every (method, layer) on the first fit set, then every
        one whose refit still read the variable on the doubled set, and so on, so that each fit
        set is captured once for all the layers that read it (in groups that fit the bound, each
        pass stopping after its group's deepest layer), not once per layer. Each fit and refit is
        the same as fitting the layers one after another: the same rows, seeds and order of work
        within a (method, layer).
        """
        ctx = self.ctx
        out = _Fitted(edits={}, fit_sizes={}, refits={}, check=None)
        # Fitting the edits (INLP most of all) can take minutes: it reports progress per layer ×
        # method as its share of the job, so a job never sits at 0% while it works.
        n_fits = max(1, len(self.layers) * len(methods))
        ctx.progress(0.0, f"capturing {self.n_fit} fit sequences at L={self.fit_length}")
        todo: list[tuple[int, str]] = []  # (layer, method) still to fit, in layer order
        for layer in self.layers:
            for method in methods:
                done = self.resume.load(f"fit-{method}-{layer}") if self.resume else None
                if done is None:
                    todo.append((layer, method))
                    continue
                out.edits[(method, layer)], out.fit_sizes[(method, layer)] = Edit(**done["edit"]), done["n"]
                # fitted before a kill; a refit saved without its removal line (by code before
                # the line was stored) is measured again with the rows
                if done["refit"] is not None and len(done["refit"]) == 3:
                    out.refits[(method, layer)] = tuple(done["refit"])
        n = self.n_fit
        for doubling in range(MAX_FIT_DOUBLINGS + 1):
            if not todo:
                break
            if n != self.n_fit:  # the first fit set serves every layer (centres included)
                self._fit_layers[n] = sorted({layer for layer, m in todo if (m, layer) not in self._stats})
                self._accumulate(n, [(layer, m) for layer, m in todo if (m, layer) in self._stats])
            again: list[tuple[int, str]] = []
            for layer, method in todo:
                ctx.check_cancelled()
                ctx.progress(FIT_SHARE * len(out.edits) / n_fits, f"fitting {method} at layer {layer}")
                if n == self.n_fit:
                    self.center(layer)  # while its fit group is held
                edit = self.fitted(method, layer, n)
                if refits_until_removed(method) and doubling < MAX_FIT_DOUBLINGS:
                    # its check set one layer at a time, beside the fit set
                    out.check = out.check or self._check_set()
                    acc, maj, line = out.refits[(method, layer)] = self.refit(
                        edit, layer, out.check[1], self.fit_length
                    )
                    if acc > line:
                        if more_data_helps(method, edit):
                            ctx.log(
                                f"{method} at layer {layer}: refit {acc:.3f} above its removal line {line:.3f} "
                                f"(majority {maj:.3f}); fitting on {2 * n} sequences"
                            )
                            out.refits.pop((method, layer))
                            again.append((layer, method))
                            continue
                        ctx.log(  # INLP with its round budget spent
                            f"{method} at layer {layer}: refit {acc:.3f} above its removal line {line:.3f}; its budget is "
                            "spent, so it is not fitted on more sequences"
                        )
                out.edits[(method, layer)], out.fit_sizes[(method, layer)] = edit, n
                self._stats.pop((method, layer), None)  # fitted for good
                if self.resume:
                    refit = out.refits.get((method, layer))
                    self.resume.save(
                        f"fit-{method}-{layer}",
                        {"edit": asdict(edit), "n": n, "refit": None if refit is None else list(refit)},
                    )
            self._release_size(n)
            todo, n = again, 2 * n
        return out

    def center(self, layer: int) -> torch.Tensor:
        """The fitted mean ``[D]`` of ``layer``: the centre every random removal projects around
        (once, not per length; float64 over the labelled tokens, as fit_edit's own mean: at rank D
        the random removal is mean ablation)."""
        if layer not in self._centers and self._fit_need(self.n_fit, self.methods)[1]:
            self._centers[layer] = self.spilled(layer, self.n_fit).mean  # the streamed fits' own mean
        if layer not in self._centers:
            fit = self.fit_set(self.n_fit)
            labelled = fit.data.labels.reshape(-1) >= 0
            self._centers[layer] = fit.states[layer].flatten(0, -2)[labelled].mean(0, dtype=torch.float64)
        return self._centers[layer]

    def centers(self) -> dict[int, torch.Tensor]:
        """:meth:`center` of every intervention layer."""
        return {layer: self.center(layer) for layer in self.layers}

    def edit_rows(
        self,
        fitted: _Fitted,
        methods: list[str],
        data: TaskData,
        base: Streamed,
        length: int,
        *,
        centers: dict[int, torch.Tensor],
        n_permutations: int,
        config_hash: str,
        progress: _Progress,
    ) -> list[InterventionRecord]:
        """One row per (layer, method) of the fitted edits applied to the eval set ``data`` at
        ``length`` (``base``: its unedited capture), each with its rank-matched random removal."""
        model, ctx = self.model, self.ctx
        base_acc = per_sequence_accuracy(base.preds, data.labels)
        chance = majority_rate(data.labels)
        rows: list[InterventionRecord] = []
        for layer in self.layers:
            # the blocks before the edit are not run again: the edited layer's output is kept in the base capture
            kept = base.start(layer)
            start = None if kept is None else (layer, kept)
            random_by_rank: dict[int, dict[str, Any]] = {}
            full_rank: torch.Tensor | None = None  # per-sequence accuracy under mean ablation
            for method in methods:
                ctx.check_cancelled()
                edit = fitted.edits[(method, layer)]
                whole = _removes_whole_space(edit, centers[layer])
                if whole and full_rank is not None:  # mean ablation, already measured as the rank-D draw
                    edited = full_rank
                else:
                    with edit_layer(model, layer, edit.apply):
                        edited = per_sequence_accuracy(predictions(model, data.tokens, self.device, start), data.labels)
                    full_rank = edited if whole else full_rank
                known = fitted.refits.get((method, layer)) if length == self.fit_length else None
                rank = edit.rank_removed
                if rank >= centers[layer].shape[-1] and rank not in random_by_rank and full_rank is None:
                    # the rank-D draw is mean ablation: measured once, shared with the `mean` row
                    full_rank = _mean_ablation_accuracy(model, layer, centers[layer], data, self.device, start)
                if rank and rank not in random_by_rank:
                    random_by_rank[rank] = random_removal_effect(
                        model,
                        layer,
                        centers[layer],
                        rank,
                        data,
                        base_acc,
                        self.run_seed,
                        device=self.device,
                        ctx=ctx,
                        start=None if start is None else start[1],
                        full_rank=full_rank,
                    )
                rows.append(
                    _effect_row(
                        method,
                        layer,
                        length,
                        base_acc,
                        edited,
                        chance,
                        known or self.refit(edit, layer, base, length),
                        rank,
                        self.settings.get(method, {}).get("k"),  # the k column: a declared parameter k
                        n_permutations,
                        self.run_seed,
                        config_hash,
                        record_fields(method, edit),
                        fitted.fit_sizes[(method, layer)],
                        random_by_rank.get(rank),
                    )
                )
                rows[-1].edit = edit  # not a column: the fitted edit, its directions kept by the worker
                progress.step(f"{method} at layer {layer}, L={length}")
        return rows

    def conv1d_rows(
        self, data: TaskData, base: Streamed, length: int, *, n_permutations: int, config_hash: str, progress: _Progress
    ) -> list[InterventionRecord]:
        """``conv1d_removal`` of every layer (stored as layer −2; its refit probe reads the last
        layer) and of each layer alone, on the eval set ``data`` at ``length``."""
        model, n_layers = self.model, self.model.n_layers
        base_acc = per_sequence_accuracy(base.preds, data.labels)
        chance = majority_rate(data.labels)
        split_seed = data_seed(self.run_seed, "split", length)
        rows: list[InterventionRecord] = []
        for layer in [ALL_LAYERS, *range(n_layers)]:
            self.ctx.check_cancelled()
            read = n_layers - 1 if layer == ALL_LAYERS else layer
            with remove_conv1d(model, layer=None if layer == ALL_LAYERS else layer):
                edited_cap = capture(model, data, self.device, layers=[read])
            edited = per_sequence_accuracy(edited_cap.predicted(), data.labels)
            report = probe_layers({read: edited_cap.states[read]}, data.labels, self.task.n_classes, seed=split_seed)[
                read
            ]
            rows.append(
                _effect_row(
                    "conv1d_removal",
                    layer,
                    length,
                    base_acc,
                    edited,
                    chance,
                    (report.accuracy, report.majority_baseline, removal_line(report)),
                    None,
                    None,
                    n_permutations,
                    self.run_seed,
                    config_hash,
                )
            )
            progress.step(f"conv1d removal at layer {layer}, L={length}")
        return rows


def check_memory(
    model: LayerwiseModel,
    task: Task,
    memory: MemoryBound,
    *,
    eval_lengths: list[int],
    n_sequences: int,
    probes: bool = True,
    methods: list[str] | None = None,
    layers: list[int] | None = None,
    fit_length: int = TRAIN_LENGTH,
) -> None:
    """Refuse before any work a measurement that cannot fit ``memory``: the probes' one layer
    at each eval length and, with ``methods``, the interventions' largest fit beside an eval
    layer (what :func:`measure_probes` and :func:`measure_interventions` check again on entry).

    Raises:
        science.bounded.MeasureMemoryError: one line naming ``LAYERSCOPE_MEASURE_MEMORY_GB``, the
            first part over it and the least bound at which every part fits.
    """
    if memory.limit is None:
        return
    width = _width(model, task, "cpu")

    def check(bound: MemoryBound) -> None:
        if probes:
            for length in eval_lengths:
                per_layer = state_bytes(n_sequences, length, width)
                bound.groups([0], per_layer, f"probes at L={length}", working=(FIT_COPIES - 1) * per_layer)
        if methods:
            run = _Interventions(
                model,
                task,
                run_seed=0,
                layers=list(range(model.n_layers)) if layers is None else layers,
                fit_length=fit_length,
                n_sequences=n_sequences,
                settings={},
                device="cpu",
                ctx=SilentContext(),
                memory=bound,
                doubling=any(refits_until_removed(m) for m in methods),
                methods=tuple(methods),
            )
            run.check_memory(eval_lengths)

    refuse_over(check, memory)  # the first piece over the bound, and the bound every piece fits


@at_precision
def measure_interventions(
    model: LayerwiseModel,
    task: Task,
    *,
    run_seed: int,
    eval_lengths: list[int],
    n_sequences: int,
    methods: list[str],
    layers: list[int] | None = None,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    conv1d: bool = True,
    fit_length: int = TRAIN_LENGTH,
    n_permutations: int = 2000,
    config_hash: str = "",
    device: torch.device | str = "cpu",
    ctx: Context | None = None,
    resume: ResumeFolder | None = None,
    memory: MemoryBound | None = None,
    precision: str = "fp32",
    **fields: Any,
) -> list[InterventionRecord]:
    """Edit the output of each layer, fit at ``fit_length`` and applied at every eval length.

    ``method_params``: ``{method: {parameter: value}}``, the values of the parameters the
    methods declare (``EditMethod.params``); ``fields``: the built-ins' parameters by their job
    field (``pca_k=4``, ``inlp_max_rounds=3``: ``science.methods.job_fields``). Every declared
    parameter of each method is passed to its fit, given or by its default, checked against its
    declaration and the model's width first (:func:`science.methods.method_settings`); a row's
    ``k`` is its method's parameter ``k`` (None for a method without one).

    ``memory``: the bound on the states held at once (:class:`science.bounded.MemoryBound`; None:
    unbounded). Fit and eval sets are captured a group of layers at a time (recomputed, not
    kept), a doubled fit set one layer at a time, each edited forward starts from the edited
    layer's stored output only; the rows are the same bit for bit.

    ``resume``: a folder for this call's finished pieces (each edit's fit, each eval length's
    rows; :class:`science.resume_folder.ResumeFolder`): a call with the same model, settings and
    folder after a killed one reads them back instead of computing them again, and returns the
    rows an unbroken call returns. The caller names a folder per weights and settings and clears it.

    ``fit_length``: sequence length of the fit data. The pipeline always passes the run's
    ``train_length`` (``worker.run_measurement.measure_run``, both the suite and the job path); the
    default 40 is only for notebook calls.

    For each (method, layer, eval length): base and edited behavioural token accuracy (0..1),
    delta in pp, the drop relative to chance (chance = majority-class rate of the eval labels;
    1.0 = edited down to chance), a probe refit on the edited states with its majority
    baseline, the rank removed, and a sequence-level paired permutation p-value,
    Holm-corrected across layers, and the rank-matched random control: the same layer and length
    with ``rank_removed`` random orthonormal directions removed, :data:`N_RANDOM_DRAWS` draws
    (:func:`random_removal_effect`; ``random_delta_pp`` mean, ``_lo``/``_hi`` range). Edits are
    fitted on ``n_fit_sequences(d_model, fit_length, n_sequences)`` sequences (≥ 64 tokens per
    dimension); a method whose class sets ``refit_until_removed`` (LEACE, INLP) on twice as
    many, up to :data:`MAX_FIT_DOUBLINGS` times, while its refit probe at the fit length reads more than :data:`REMOVAL_TOL` above majority (the
    size used stored per row, docs/SCIENCE.md#fit-size); INLP's budget is its ``max_rounds``
    (``inlp_max_rounds``) or, when None, enough rounds to remove the whole width, and each INLP
    row stores whether it reached its tolerance and the rounds used. Mamba families also get ``conv1d_removal`` (every layer,
    stored as layer -2, and each layer alone); its refit probe reads the edited layer
    (the last layer for "every layer").

    ``precision``: ``fp32`` | ``bf16``, the forward passes' (``science.precision``); edits run
    inside their hooks in float32 (autocast off), and the states, edit fits, refit probes and
    statistics stay float32 / float64 either way.

    Raises:
        ValueError: a layer outside ``-1..n_layers-1``; a method parameter its declaration
            refuses, or one not declared (the message names it); an unknown precision.
        science.bounded.MeasureMemoryError: before any work, when one layer's eval states beside
            the largest fit (the fit-size rule's doubled set) cannot fit ``memory``.
    """
    ctx = ctx or SilentContext()
    n_layers = model.n_layers
    layers = list(range(n_layers)) if layers is None else layers
    bad = [lay for lay in layers if not -1 <= lay < n_layers]
    if bad:
        raise ValueError(f"layers {bad} out of range for a {n_layers}-layer model (-1..{n_layers - 1})")
    run = _Interventions(
        model,
        task,
        run_seed=run_seed,
        layers=layers,
        fit_length=fit_length,
        n_sequences=n_sequences,
        settings={},
        device=device,
        ctx=ctx,
        resume=resume,
        memory=memory or MemoryBound(),
        doubling=any(refits_until_removed(m) for m in methods),
        methods=tuple(methods),
    )
    run.settings = method_settings(methods, method_params, fields, width=run.width)
    run.check_memory(list(eval_lengths))
    fitted = run.fit_edits(methods)
    has_conv = conv1d and _has_conv1d(model)
    progress = _Progress(ctx, len(eval_lengths) * (len(layers) * len(methods) + (n_layers + 1 if has_conv else 0)))
    centers = run.centers()
    run.release_fits()  # the fit sets' states are done with: the eval sets get the bound
    run.release_spilled()
    rows: list[InterventionRecord] = []
    for length in eval_lengths:
        done = resume.load(f"rows-L{length}") if resume else None
        if done is not None:  # measured before a kill: its rows, before Holm (applied over all below)
            for plain in done:
                row = InterventionRecord(**plain)
                if (row.method, row.layer) in fitted.edits:  # the fitted edit, as edit_rows attaches it
                    row.edit = fitted.edits[(row.method, row.layer)]
                rows.append(row)
            continue
        if fitted.check is not None and length == fit_length:  # the check set's data
            data, base = fitted.check
            if not base.with_preds:  # captured for the refits only: again with outputs and predictions
                base.release()
                base = Streamed(model, data, device, run.eval_groups(length), keep_outputs=run._keeps(length))
        else:
            data, base = run.eval_set(length)
        part = run.edit_rows(
            fitted,
            methods,
            data,
            base,
            length,
            centers=centers,
            n_permutations=n_permutations,
            config_hash=config_hash,
            progress=progress,
        )
        if has_conv:
            part += run.conv1d_rows(
                data, base, length, n_permutations=n_permutations, config_hash=config_hash, progress=progress
            )
        base.release()
        if resume:
            resume.save(f"rows-L{length}", [r.to_row() for r in part])
        rows += part
    _apply_holm(rows)
    return rows


def _width(model: LayerwiseModel, task: Task, device: torch.device | str) -> int:
    """The residual-stream width D: the model's ``d_model``, else read off one captured sequence."""
    try:
        return int(model.d_model)
    except (AttributeError, TypeError, ValueError):
        one = capture(model, task.generate(4, 1, 0, split="test"), device, layers=[-1])
        return int(one.states[-1].shape[-1])


def _has_conv1d(model: LayerwiseModel) -> bool:
    """Whether ``model``'s family spec says its blocks hold a Conv1D (False for a model without
    a registered family)."""
    family = getattr(getattr(model, "config", None), "family", None)
    return family in family_names() and get_family(family).has_conv1d
