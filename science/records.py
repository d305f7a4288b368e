"""Typed result records: what the science functions return and ``worker.persist`` stores.

One dataclass per result table (:class:`ProbeRecord` → ``probe_results``,
:class:`InterventionRecord` → ``intervention_results``, :class:`PatchingRecord` →
``patching_results``), :class:`BehaviourRecord` (one eval length of ``runs.behaviour``) and
:class:`MeasureSettingsRecord` (a ``measure_settings`` row). Field names are the column names;
``to_row()`` gives the plain dict a table insert takes.

These three records are the one definition of their rows: ``store.models`` stores exactly their
fields (plus the storage keys ``id``, ``run_id``, ``settings_id``), ``backend.api.schemas``
derives ``ProbeOut`` / ``InterventionOut`` / ``PatchingOut`` from them (a field's
``metadata["description"]`` is its API description) and the results bundle carries the table's
columns; tests/test_record_schemas.py fails when one of them gains a field the others lack.

Records stay dict-compatible (``r["layer"]``, ``r.get("note")``, ``dict(r)``, ``{**r}``,
``r == {...}``) so notebooks and older callers that treat rows as dicts keep working.

Conventions: accuracies and recoveries are fractions (0..1 for accuracies; recovery 1.0 = full
recovery, may leave 0..1); ``delta_pp`` is in percentage points; positions are 0-based
(``position``, ``corrupt_position``, and the index t of ``per_position[t]``, 0..L-1); layers
are ints, -1 = ``emb``, -2 = every layer (conv1d removal only).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from layerscope_core.hashing import config_hash
from science.measurement_version import MEASUREMENT_VERSION

ACC = (0.0, 1.0)
"""The range of an accuracy, a rate or a p-value."""
PP = (-100.0, 100.0)
"""The range of a difference of two accuracies in percentage points."""
COUNT = (0, None)
"""A count: at least 0, no upper bound."""
LENGTH = (1, None)
"""A sequence length: at least 1."""


def described(description: str, default: Any = MISSING, *, bounds: tuple[Any, Any] | None = None) -> Any:
    """A dataclass field with its description (what the API schema documents it with) and, where
    its meaning has one, its range ``bounds = (lo, hi)`` (either None: open; for a list or a dict,
    of each number in it), which an imported results bundle is checked against
    (``backend.bundle_checks``)."""
    return field(default=default, metadata={"description": description, "bounds": bounds})


class _Record:
    """Mapping access over a dataclass's fields (read, and write of existing fields)."""

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self))  # type: ignore[arg-type]  # mixed into dataclasses only

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._names():
            raise KeyError(f"{type(self).__name__} has no field {key!r}")
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return key in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def keys(self) -> tuple[str, ...]:
        return self._names()

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self._names()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self._names()]

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._names() else default

    def to_row(self) -> dict[str, Any]:
        """The record as a plain dict (column name → value), nested lists copied."""
        return asdict(self)  # type: ignore[call-overload]  # mixed into dataclasses only

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_Record, Mapping)):
            return self.to_row() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable (Holm fills p_holm in place)


@dataclass(eq=False)
class ProbeRecord(_Record):
    """A linear probe on one layer's states at one eval length (a ``probe_results`` row).

    ``accuracy``, ``balanced_accuracy``, ``majority_baseline``, ``control_accuracy`` in 0..1;
    ``selectivity = accuracy − control_accuracy`` (None without the control task);
    ``per_position``: L entries, entry t = accuracy at 0-based position t (None: no labelled
    token there); ``n_train`` / ``n_test`` count sequences; ``n_iter`` optimiser iterations.
    """

    layer: int = described("-1 = emb, 0..n-1 = after block ℓ")
    eval_length: int = described("sequence length L the probe was evaluated at", bounds=LENGTH)
    accuracy: float = described("held-out token accuracy, 0..1", bounds=ACC)
    majority_baseline: float = described("the majority-class rate on the held-out tokens, 0..1", bounds=ACC)
    per_position: list[float | None] = described(
        "L entries: accuracy at the 0-based position t, None: no labelled token", bounds=ACC
    )
    n_train: int = described("training sequences", bounds=COUNT)
    n_test: int = described("held-out sequences", bounds=COUNT)
    converged: bool = described("the optimiser reached its tolerance")
    n_iter: int = described("optimiser iterations", bounds=COUNT)
    balanced_accuracy: float | None = described(
        "mean per-class recall on the held-out sequences, 0..1", None, bounds=ACC
    )
    control_accuracy: float | None = described(
        "the same probe on the control task (Hewitt & Liang 2019: a fixed random label per input-token type), 0..1",
        None,
        bounds=ACC,
    )
    selectivity: float | None = described("accuracy − control_accuracy, 0..1 scale", None, bounds=(-1.0, 1.0))
    type_accuracy: dict[str, float | None] | None = described(
        "accuracy per token type where the task's token identity carries the label (dyck: open, close; "
        "code_depth: bracket, other), 0..1 (docs/SCIENCE.md#token-types)",
        None,
        bounds=ACC,
    )
    config_hash: str = described("SHA-256 of the params that requested the row", "")
    measurement_version: int = described(
        "the measurement code's version the row was made with (1: before versions were recorded; "
        "docs/SCIENCE.md#measurement-versions)",
        MEASUREMENT_VERSION,
        bounds=(1, None),
    )
    # Not a column: the fitted probe, kept by the worker (``worker.learned``). Declared by a type
    # comment, which the dataclass machinery (at run time and in mypy) does not make a field.
    probe = None  # type: Any

    @classmethod
    def from_report(cls, report: Any, *, eval_length: int, config_hash: str) -> ProbeRecord:
        """The stored row of one layer's ``science.probes.ProbeReport`` (its fields that are columns)
        at ``eval_length``, under the measure settings' ``config_hash``."""
        row = report.to_row()
        rec = cls(
            **{f.name: row[f.name] for f in fields(cls) if f.name in row},
            eval_length=eval_length,
            config_hash=config_hash,
        )
        rec.probe = getattr(report, "probe", None)  # not a column: the fitted probe, kept by the worker
        return rec


@dataclass(eq=False)
class InterventionRecord(_Record):
    """One edit (method × layer) applied at one eval length (an ``intervention_results`` row).

    ``base_acc`` / ``edited_acc``: token accuracy 0..1; ``delta_pp = (edited − base) × 100``;
    ``drop_rel_chance = (base − edited) / (base − chance)`` (None when base ≈ chance);
    ``refit_acc`` / ``refit_majority``: a probe refit on the edited states and its baseline;
    ``refit_line``: the refit accuracy at or under which the edit removed the variable;
    ``p_value``: paired permutation over sequences, ``p_holm`` Holm-corrected across layers
    (filled after all rows exist), ``significant = p_holm < 0.05``; ``n_fit_sequences``:
    sequences the edit was fitted on (at the fit length of the measure settings);
    ``random_delta_pp`` (lo, hi): the mean (min, max) ``delta_pp`` over ``random_draws`` removals
    of ``rank_removed`` random orthonormal directions at the same layer and length
    (docs/SCIENCE.md#random-removal); None where the row removes no rank.
    """

    method: str = described("project_out | inlp | leace | pca_top_k | mean | conv1d_removal")
    layer: int = described("-1 = emb, 0..n-1 = block; -2 = every layer (conv1d_removal)")
    eval_length: int = described("sequence length L the edit was applied at", bounds=LENGTH)
    base_acc: float = described("token accuracy without the edit, 0..1", bounds=ACC)
    edited_acc: float = described("token accuracy with the edit, 0..1", bounds=ACC)
    delta_pp: float = described("(edited_acc − base_acc) × 100, percentage points", bounds=PP)
    n_sequences: int = described("sequences evaluated", bounds=COUNT)
    seed: int = described("seed of the evaluation sequences and the permutation test", bounds=COUNT)
    k: int | None = described(
        "the method's declared parameter k (pca_top_k's); None for a method without one", None, bounds=(1, None)
    )
    drop_rel_chance: float | None = described(
        "(base_acc − edited_acc) / (base_acc − chance); None when base ≈ chance", None
    )
    refit_acc: float | None = described("a probe refit on the edited states, 0..1", None, bounds=ACC)
    refit_majority: float | None = described("the refit probe's majority baseline, 0..1", None, bounds=ACC)
    refit_line: float | None = described(
        "the refit accuracy at or under which the edit removed the variable: the best constant guess on the "
        "refit's test tokens + max(2 pp, their one-sided 1 % binomial margin), 0..1 + margin "
        "(docs/SCIENCE.md#removal-line); None on measurement version 1 rows (their line: refit_majority + 2 pp)",
        None,
        bounds=(0.0, 2.0),
    )
    rank_removed: int | None = described("directions the edit removed", None, bounds=COUNT)
    inlp_converged: bool | None = described("INLP only: the refit probe reached majority + tolerance", None)
    inlp_rounds: int | None = described("INLP only: rounds used", None, bounds=COUNT)
    n_fit_sequences: int | None = described("sequences the edit was fitted on", None, bounds=COUNT)
    p_value: float | None = described("paired permutation test over sequences", None, bounds=ACC)
    p_holm: float | None = described("p_value Holm-adjusted across the run's layers", None, bounds=ACC)
    significant: bool | None = described("p_holm < 0.05; False = n.s.", None)
    random_delta_pp: float | None = described(
        "rank-matched random removal: mean delta_pp when rank_removed random orthonormal directions are "
        "removed at this layer (docs/SCIENCE.md#random-removal)",
        None,
        bounds=PP,
    )
    random_delta_lo: float | None = described("the smallest delta_pp over the random draws", None, bounds=PP)
    random_delta_hi: float | None = described("the largest delta_pp over the random draws", None, bounds=PP)
    random_draws: int | None = described("random draws behind random_delta_pp", None, bounds=COUNT)
    config_hash: str = described("SHA-256 of the params that requested the row", "")
    measurement_version: int = described(
        "the measurement code's version the row was made with (1: before versions were recorded; "
        "docs/SCIENCE.md#measurement-versions)",
        MEASUREMENT_VERSION,
        bounds=(1, None),
    )
    # Not a column: the fitted edit, its directions kept by the worker (``worker.learned``); a type
    # comment, so not a dataclass field (see ``ProbeRecord.probe``).
    edit = None  # type: Any


@dataclass(eq=False)
class PatchingRecord(_Record):
    """Activation patching at one (site, layer, position) of one grid (a ``patching_results`` row).

    ``position`` and ``corrupt_position`` are 0-based; ``recovery`` (1.0 = full recovery) with
    its bootstrap 95% CI, None with a ``note`` when too few pairs are usable; ``ld_clean`` /
    ``ld_corrupted``: mean logit differences (logits) over the usable pairs.
    """

    site: str = described("resid_pre | resid_post | state, or state:<part> (docs/SCIENCE.md#activation-patching)")
    layer: int = described("-1 = emb, 0..n-1 = block ℓ")
    position: int = described("0-based position of the patch", bounds=COUNT)
    eval_length: int = described("sequence length L of the grid", bounds=LENGTH)
    ld_clean: float = described("mean logit difference on the clean inputs over the usable pairs")
    ld_corrupted: float = described("mean logit difference on the corrupted inputs over the usable pairs")
    n_pairs: int = described("usable pairs (after dropping tiny-gap pairs)", bounds=COUNT)
    recovery: float | None = described("mean over pairs, 1.0 = full recovery; None (with note) when unusable", None)
    recovery_lo: float | None = described("bootstrap 95% CI over pairs, low end", None)
    recovery_hi: float | None = described("bootstrap 95% CI over pairs, high end", None)
    corrupt_position: int | None = described("0-based position of the changed token", None, bounds=COUNT)
    n_dropped: int | None = described("pairs dropped: clean–corrupted gap too small", None, bounds=COUNT)
    note: str | None = described("why recovery is None, when it is", None)
    config_hash: str = described("SHA-256 of the params that requested the row", "")
    measurement_version: int = described(
        "the measurement code's version the row was made with (1: before versions were recorded; "
        "docs/SCIENCE.md#measurement-versions)",
        MEASUREMENT_VERSION,
        bounds=(1, None),
    )


@dataclass(eq=False)
class BehaviourRecord(_Record):
    """Behavioural accuracy at one eval length (a value of ``runs.behaviour``, keyed by str(L)):
    ``token_acc`` over every token and ``last_acc`` at the last position (0..1), ``n`` sequences."""

    token_acc: float = described("token accuracy over every token, 0..1", bounds=ACC)
    last_acc: float = described("accuracy at the last position, 0..1", bounds=ACC)
    n: int = described("sequences", bounds=COUNT)


@dataclass(eq=False)
class MeasureSettingsRecord(_Record):
    """The effective settings of one measurement (a ``measure_settings`` row, schema 0003).

    ``params``: the ``MeasureParams`` JSON; ``eval_lengths``: probe and intervention lengths
    (ascending); ``patch_eval_length``: the patching grid's L; ``fit_length``: the length
    interventions are fitted at (the run's ``train_length``); ``intervention_layers``: None =
    every block. ``config_hash`` is derived (:meth:`settings_hash`), never passed.
    """

    params: dict[str, Any]
    eval_lengths: list[int]
    patch_eval_length: int | None
    fit_length: int | None
    intervention_layers: list[int] | None = None
    config_hash: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.eval_lengths = sorted({int(x) for x in self.eval_lengths})
        self.config_hash = self.settings_hash()

    def settings_hash(self) -> str:
        """SHA-256 over the canonical JSON of every field but ``config_hash``."""
        return config_hash({k: v for k, v in asdict(self).items() if k != "config_hash"})


def behaviour_json(behaviour: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"40": BehaviourRecord, ...}`` → the plain JSON stored in ``runs.behaviour``."""
    return {str(k): dict(v.items()) if isinstance(v, (Mapping, _Record)) else v for k, v in behaviour.items()}


def as_row(record: Any) -> dict[str, Any]:
    """A record or a plain mapping as a new plain dict (what ``worker.persist`` inserts)."""
    if isinstance(record, _Record):
        return record.to_row()
    return dict(record)
