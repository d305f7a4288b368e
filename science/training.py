"""Training loop (docs/SCIENCE.md#training): AdamW, fresh sequences every step, cross-entropy on every
position, early stop at a held-out token accuracy, and behavioural accuracy per eval length."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import torch
import torch.nn.functional as F
from torch import nn

from models_store.compiled_ops import seconds_building
from science import plateau, train_checkpoint
from science.context import Context, SilentContext
from science.records import BehaviourRecord
from science.seeds import data_seed
from science.tasks.base import Task, TaskData
from science.train_checkpoint import LoopState

EVAL_BATCH = 256


# Why a run stopped (``TrainResult.stop_reason``, stored as ``runs.stop_reason``):
# the criterion, a plateau, the step budget, the wall-clock safety cap, or a rebuild's step.
STOP_REASONS = ("trained", "plateau", "budget", "time_limit", "rebuild_step")


@dataclass
class TrainResult:
    """What a training run did. ``stop_reason``: one of :data:`STOP_REASONS`;
    ``best_heldout_acc`` (0..1) and ``best_step``: the best held-out token accuracy evaluated at
    the full training length and the step it was reached at; ``stop_length``: the training
    length when it stopped (below ``train_length`` when a curriculum stage plateaued);
    ``resumed_at``: the steps it was resumed at; ``devices``: ``[step, where]`` per attempt."""

    steps: int
    seconds: float
    stopped_early: bool
    loss_curve: list[dict[str, Any]] = field(default_factory=list)
    final_heldout_acc: float | None = None
    stop_reason: str | None = "budget"
    best_heldout_acc: float | None = None
    best_step: int | None = None
    stop_length: int | None = None
    resumed_at: list[int] = field(default_factory=list)
    devices: list[list[Any]] = field(default_factory=list)

    def run_fields(self) -> dict[str, Any]:
        """The run row's fields this result sets (``store.models.Run``'s names): one mapping for every
        writer of a trained run (the pipeline, a rebuild)."""
        return {
            "steps": self.steps,
            "train_seconds": self.seconds,
            "stopped_early": self.stopped_early,
            "loss_curve": self.loss_curve,
            "heldout_acc": self.final_heldout_acc,
            "stop_reason": self.stop_reason,
            "best_heldout_acc": self.best_heldout_acc,
            "best_step": self.best_step,
        }


def plateaued(
    accs: list[float],
    window: int,
    min_gain: float,
    *,
    target: float | None = None,
    gap_share: float | None = None,
) -> bool:
    """Whether a run has plateaued at one training length (docs/SCIENCE.md#plateau).

    ``accs``: the held-out token accuracies (0..1) evaluated at the current length since the run
    reached it, oldest first. Plateau: at least ``window + 1`` evaluations, and the best of the
    last ``window`` beats the best before them by less than the least gain: ``min_gain`` (a
    fraction: 0.01 = 1 pp), or with ``gap_share`` and ``target`` (the accuracy that ends the stage:
    the criterion at the full length, the curriculum threshold before it) the smaller of
    ``min_gain`` and ``gap_share`` × (``target`` − best before them): a run close to its target
    has less left to gain, so it must close a share of the gap, not a fixed step.
    """
    if window < 1 or len(accs) <= window:
        return False
    before = max(accs[:-window])
    need = min_gain
    if gap_share is not None and target is not None:
        need = min(min_gain, gap_share * max(target - before, 0.0))
    return max(accs[-window:]) - before < need


@torch.no_grad()
def predict(model: nn.Module, tokens: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """Argmax predictions, batched. tokens: [n, L] → [n, L] (on CPU)."""
    model.eval()
    out = []
    for i in range(0, tokens.shape[0], EVAL_BATCH):
        logits = model(tokens[i : i + EVAL_BATCH].to(device))  # (B, L, C)
        out.append(logits.argmax(-1).cpu())
    return torch.cat(out)


class Accuracy(TypedDict):
    """:func:`token_accuracy`'s answer: the fields of a ``BehaviourRecord``."""

    token_acc: float
    last_acc: float
    n: int


def token_accuracy(model: nn.Module, data: TaskData, device: torch.device | str = "cpu") -> Accuracy:
    """Behavioural accuracy on ``data``: every token (``token_acc``) and the last position
    (``last_acc``), both in 0..1, plus ``n`` sequences."""
    pred = predict(model, data.tokens, device)
    correct = (pred == data.labels).float()  # (n, L)
    seen = data.labels >= 0  # a file task's null labels (< 0) are not scored; "last" = a row's last scored one
    if not bool(seen.all()):
        has = seen.any(dim=1)
        last = (seen.long() * torch.arange(seen.shape[1])).argmax(dim=1)  # (n,)
        last_correct = correct[torch.arange(seen.shape[0]), last][has]
        return {
            "token_acc": float(correct[seen].mean()) if has.any() else 0.0,
            "last_acc": float(last_correct.mean()) if has.any() else 0.0,
            "n": int(data.tokens.shape[0]),
        }
    return {
        "token_acc": float(correct.mean()),
        "last_acc": float(correct[:, -1].mean()),
        "n": int(data.tokens.shape[0]),
    }


def make_scheduler(
    opt: torch.optim.Optimizer,
    *,
    max_steps: int,
    warmup_steps: int = 0,
    lr_schedule: str = "constant",
    min_lr_ratio: float = 0.1,
):
    """torch's own schedulers for the recipe: ``LinearLR`` warm-up from lr/``warmup_steps`` to the
    peak over ``warmup_steps`` steps, then constant or ``CosineAnnealingLR`` down to
    ``min_lr_ratio`` × peak at ``max_steps`` (Loshchilov & Hutter 2017, SGDR, without restarts).
    Returns None when the lr never changes (constant, no warm-up: the optimizer alone).

    Raises:
        ValueError: unknown ``lr_schedule``.
    """
    from torch.optim import lr_scheduler as S

    if lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule: expected 'constant' or 'cosine', got {lr_schedule!r}")
    warmup = min(warmup_steps, max(max_steps - 1, 0))
    peak = opt.param_groups[0]["lr"]  # before LinearLR scales it down for the warm-up
    phases: list[S.LRScheduler] = []
    if warmup > 0:
        phases.append(S.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup))
    if lr_schedule == "cosine":
        phases.append(S.CosineAnnealingLR(opt, T_max=max(max_steps - warmup, 1), eta_min=peak * min_lr_ratio))
    elif phases:
        phases.append(S.ConstantLR(opt, factor=1.0, total_iters=0))
    if not phases:
        return None
    if len(phases) == 1:
        return phases[0]
    return S.SequentialLR(opt, phases, milestones=[warmup])


def curriculum_lengths(train_length: int, start: int | None, step: int) -> list[int]:
    """The lengths a length curriculum goes through: ``start, start+step, …, train_length``
    (``[train_length]`` without a curriculum)."""
    if start is None or start >= train_length:
        return [train_length]
    return [*range(start, train_length, step), train_length]


@dataclass(frozen=True)
class TrainConfig:
    """How a run is trained: the training recipe (docs/SCIENCE.md#training-recipe). Every default
    is the documented recipe; ``worker.job_params.TrainParams.train_config()`` builds one from a job.

    Attributes:
        train_length: sequence length (tokens) the run trains and is judged at.
        batch_size: sequences per step, fresh every step.
        lr, weight_decay: AdamW's peak learning rate and weight decay.
        max_steps: the step budget; the cosine horizon.
        max_seconds: a wall-clock safety limit (s), None = none; recorded as ``time_limit``.
        early_stop_acc: held-out token accuracy (0..1) at ``train_length`` that ends training.
        eval_every, n_eval_sequences: evaluate every this many steps on this many held-out sequences.
        warmup_steps: linear warm-up from lr / warmup_steps to lr.
        lr_schedule, min_lr_ratio: ``"cosine"`` to ``min_lr_ratio`` × lr at ``max_steps``, or ``"constant"``.
        grad_clip: global gradient L2 norm clip, None = off.
        curriculum_start, curriculum_step, curriculum_threshold: the length curriculum (None = off).
        plateau_evals, plateau_min_gain: the plateau stop (:func:`plateaued`; None = off).
        plateau_gap_share: the least gain as a share of the gap left to the stage's target
            (:func:`plateaued`; None = ``plateau_min_gain`` alone).
        plateau_revision: 3 = the slope rule of :mod:`science.plateau` (a flat held-out slope with
            confidence and a training loss no longer falling, over 2,000 steps or 10% of the
            budget), which replaces ``plateau_evals``' rule; None = revisions 1–2 above.
    """

    train_length: int = 40
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    max_steps: int = 2000
    max_seconds: float | None = None
    early_stop_acc: float = 0.99
    eval_every: int = 50
    n_eval_sequences: int = 500
    warmup_steps: int = 100
    lr_schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 1.0
    curriculum_start: int | None = 8
    curriculum_step: int = 4
    curriculum_threshold: float = 0.95
    plateau_evals: int | None = None
    plateau_min_gain: float = 0.01
    plateau_gap_share: float | None = None
    plateau_revision: int | None = None


def train_model(
    model: nn.Module,
    task: Task,
    config: TrainConfig | None = None,
    *,
    seed: int,
    stop_at_step: int | None = None,
    device: torch.device | str = "cpu",
    ctx: Context | None = None,
    checkpoint: Path | None = None,
    checkpoint_key: str = "",
    checkpoint_every: int = 100,
    where: str | None = None,
) -> TrainResult:
    """Train ``model`` in place on fresh ``task`` sequences every step with ``config`` (the
    recipe, :class:`TrainConfig`: AdamW, warm-up then cosine, clipping, a length curriculum;
    docs/SCIENCE.md#training).

    Stops at ``max_steps`` (``stop_reason`` "budget"), after ``max_seconds`` of wall time
    ("time_limit", a safety cap), when the held-out token accuracy at ``train_length`` (never
    during the curriculum) reaches ``early_stop_acc`` ("trained"), or, with ``plateau_evals``
    set, on a plateau at the current length (:func:`plateaued`, "plateau"; with
    ``plateau_revision`` 3, :func:`science.plateau.plateaued_v3` instead).
    ``final_heldout_acc`` is always at ``train_length``; ``best_heldout_acc`` / ``best_step`` are
    the best evaluation there (the final one included).

    ``stop_at_step`` (None = off) also stops after that step: the rebuild of a stored run's
    weights within its step budget (docs/SCIENCE.md#rebuilding-weights).

    ``checkpoint`` (a path, None = off): the training state is written there every
    ``checkpoint_every`` steps (rounded up to a data block), and a call finding the same run's
    checkpoint (``checkpoint_key``, seed, config, ``stop_at_step``) resumes it to the weights of an
    unbroken run; the file is removed at the end (docs/SCIENCE.md#resuming-training).
    ``where`` (default ``str(device)``) names this attempt's machine in ``TrainResult.devices``:
    a run resumed elsewhere (a GPU lease, then a CPU) records each part.

    Raises:
        science.context.JobCancelled: a cancel was requested (checked every step; the last
            checkpoint stays, so the run resumes from it).
        FloatingPointError: the loss became NaN/inf.
        science.train_checkpoint.CheckpointMismatch: ``checkpoint`` holds another run's state.
        science.train_checkpoint.CheckpointUnreadable: ``checkpoint`` cannot be read (truncated).
    """
    c = config or TrainConfig()
    ctx = ctx or SilentContext()
    torch.manual_seed(data_seed(seed, "train", -1))  # init-independent randomness (dropout etc.)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
    sched = make_scheduler(
        opt, max_steps=c.max_steps, warmup_steps=c.warmup_steps, lr_schedule=c.lr_schedule, min_lr_ratio=c.min_lr_ratio
    )
    stream = _DataStream(task, c, seed)  # before a checkpoint restores the RNG, as in an unbroken run
    ident = train_checkpoint.identity(checkpoint_key, seed, c, stop_at_step)
    loop = train_checkpoint.load(checkpoint, ident, model, opt, sched) if checkpoint else None
    if loop is None:
        loop = LoopState()
    else:
        loop.resumed_at.append(loop.step)
        ctx.log(f"resumed from the checkpoint at step {loop.step} ({loop.seconds:.0f} s trained before)")
    loop.devices.append([loop.step, where or str(device)])
    block = stream.block
    every = max(block, -(-checkpoint_every // block) * block)  # a multiple of the data block
    start = time.perf_counter() - loop.seconds
    built_before = seconds_building()

    def trained_for() -> float:  # wall seconds trained, without a first kernel build on the way
        return time.perf_counter() - start - (seconds_building() - built_before)

    stop_reason = "budget"
    for step in range(loop.step + 1, c.max_steps + 1):
        ctx.check_cancelled()
        length = stream.lengths[loop.stage]
        loss_value = _train_step(model, opt, sched, c, stream.batch(step, length), device)
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"training loss became {loss_value} at step {step}")
        elapsed = trained_for()
        timed_out = c.max_seconds is not None and elapsed >= c.max_seconds
        at_limit = timed_out or step == stop_at_step
        if at_limit:
            stop_reason = "time_limit" if timed_out else "rebuild_step"
        point: dict[str, Any] = {"step": step, "loss": loss_value, "heldout_token_acc": None}
        if len(stream.lengths) > 1:
            point["length"] = length
            point["lr"] = opt.param_groups[0]["lr"]
        loop.step = step
        if step % c.eval_every == 0 or step == c.max_steps or at_limit:
            stop_reason = _evaluate(model, stream, loop, point, c, device, ctx, elapsed, stop_at_step) or stop_reason
        loop.curve.append(point)
        if stop_reason in ("trained", "plateau") or at_limit:
            break
        if checkpoint is not None and step % every == 0 and step < c.max_steps:
            loop.seconds = trained_for()
            train_checkpoint.save(checkpoint, ident, model, opt, sched, loop)
    return _finish(model, stream, loop, c, device, stop_reason, trained_for(), checkpoint)


class _DataStream:
    """The seed's training sequences and held-out sets. Sequences come in blocks of batches (one
    generator call per block, not per step); without a curriculum the stream is one seed per block."""

    def __init__(self, task: Task, c: TrainConfig, seed: int) -> None:
        self.task, self.c, self.seed = task, c, seed
        self.lengths = curriculum_lengths(c.train_length, c.curriculum_start, c.curriculum_step)
        self.block = max(1, min(c.eval_every, 50))
        self._buffer: TaskData | None = None
        self._buffer_length = -1
        self._heldouts: dict[int, TaskData] = {}
        self.heldout(c.train_length)

    def heldout(self, length: int) -> TaskData:
        """The held-out set at ``length`` (``n_eval_sequences`` sequences, the test split)."""
        if length not in self._heldouts:  # the full length keeps the seed it always had
            index = 0 if length == self.c.train_length else length
            self._heldouts[length] = self.task.generate(
                length, self.c.n_eval_sequences, data_seed(self.seed, "heldout", index), split="test"
            )
        return self._heldouts[length]

    def batch(self, step: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``step``'s (tokens, labels), each [batch, length]."""
        bs = self.c.batch_size
        j = (step - 1) % self.block
        if j == 0 or self._buffer_length != length:
            index = (step - 1) // self.block if length == self.c.train_length else 1_000_000 * length + step
            self._buffer = self.task.generate(
                length, bs * self.block, data_seed(self.seed, "train", index), split="train"
            )
            self._buffer_length = length
        assert self._buffer is not None
        return self._buffer.tokens[j * bs : (j + 1) * bs], self._buffer.labels[j * bs : (j + 1) * bs]


def _train_step(model: nn.Module, opt, sched, c: TrainConfig, batch, device) -> float:
    """One AdamW step on ``batch`` = (tokens, labels), each [batch, L]; the loss (float)."""
    x, y = (t.to(device) for t in batch)  # (B, L)
    model.train()
    logits = model(x)  # (B, L, C)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if c.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
    opt.step()
    if sched is not None:
        sched.step()
    return float(loss.detach())


def _evaluate(
    model: nn.Module,
    stream: _DataStream,
    loop: LoopState,
    point: dict[str, Any],
    c: TrainConfig,
    device,
    ctx: Context,
    elapsed: float,
    stop_at_step: int | None,
) -> str | None:
    """Evaluate at the current length, move the curriculum on, and say whether to stop:
    "trained", "plateau" or None. Updates ``loop`` and ``point`` in place."""
    step, length = loop.step, stream.lengths[loop.stage]
    acc = token_accuracy(model, stream.heldout(length), device)["token_acc"]
    loop.acc, loop.acc_length = acc, length
    point["heldout_token_acc"] = acc
    horizon = min(c.max_steps, stop_at_step or c.max_steps)
    ctx.progress(
        min(1.0, max(step / horizon, elapsed / c.max_seconds if c.max_seconds else 0.0)),
        f"step {step} length {length} loss {point['loss']:.3f} held-out acc {acc:.3f}",
    )
    loop.at_length.append(acc)
    reason = None
    moved = False  # an evaluation that moves the curriculum on starts the next stage: no plateau
    if length == c.train_length:
        if loop.best is None or acc > loop.best[0]:
            loop.best = (acc, step)
        if acc >= c.early_stop_acc:
            reason = "trained"
    elif acc >= c.curriculum_threshold:
        moved = True
        loop.stage += 1
        loop.at_length = []
        ctx.log(f"step {step}: held-out acc {acc:.3f} at length {length} → length {stream.lengths[loop.stage]}")
    if c.plateau_revision == plateau.REVISION:  # revision 3 replaces the rule below
        window = None
        if reason is None and not moved:
            window = plateau.plateaued_v3([*loop.curve, point], max_steps=c.max_steps, train_length=c.train_length)
        if window is not None:
            reason = "plateau"
            ctx.log(
                f"step {step}: plateau (revision 3) at length {length}: over the last {window.window_steps} steps "
                f"held-out slope {window.slope_pp:+.2f} pp per 1,000 steps (95% upper {window.hi_pp:+.2f} "
                f"< {plateau.MAX_SLOPE_PP}), training loss fell {100 * window.loss_fall:.2f}% (< 1%)"
            )
        return reason
    target = c.early_stop_acc if length == c.train_length else c.curriculum_threshold
    if (
        reason is None
        and c.plateau_evals
        and plateaued(loop.at_length, c.plateau_evals, c.plateau_min_gain, target=target, gap_share=c.plateau_gap_share)
    ):
        reason = "plateau"
        rule = f"{c.plateau_min_gain:.3f}" + (
            f" or {c.plateau_gap_share:g} of the gap to {target:g}" if c.plateau_gap_share is not None else ""
        )
        ctx.log(
            f"step {step}: plateau at length {length} (best of the last {c.plateau_evals} evaluations "
            f"gained less than {rule} over the best before them)"
        )
    return reason


def _finish(
    model: nn.Module,
    stream: _DataStream,
    loop: LoopState,
    c: TrainConfig,
    device,
    stop_reason: str,
    seconds: float,
    checkpoint: Path | None,
) -> TrainResult:
    """The :class:`TrainResult`, judged at the full length; the checkpoint file removed."""
    acc, best = loop.acc, loop.best
    if loop.acc_length != c.train_length:  # ended inside the curriculum: judge at the full length
        acc = token_accuracy(model, stream.heldout(c.train_length), device)["token_acc"]
        if best is None or acc > best[0]:
            best = (acc, loop.step)
    model.eval()
    if checkpoint is not None:
        checkpoint.unlink(missing_ok=True)
    return TrainResult(
        steps=loop.step,
        seconds=seconds,
        stopped_early=stop_reason == "trained",
        loss_curve=loop.curve,
        final_heldout_acc=acc,
        stop_reason=stop_reason,
        best_heldout_acc=None if best is None else best[0],
        best_step=None if best is None else best[1],
        stop_length=stream.lengths[loop.stage],
        resumed_at=list(loop.resumed_at),
        devices=[list(d) for d in loop.devices],
    )


def untrained_result(
    model: nn.Module,
    task: Task,
    *,
    seed: int,
    train_length: int = 40,
    n_eval_sequences: int = 500,
    device: torch.device | str = "cpu",
) -> TrainResult:
    """The :class:`TrainResult` of a model left at its initialisation (a random-init control,
    docs/SCIENCE.md#controls): 0 steps, held-out token accuracy on the held-out set a trained run
    of ``seed`` is judged on, no stop reason."""
    data = task.generate(train_length, n_eval_sequences, data_seed(seed, "heldout", 0), split="test")
    acc = token_accuracy(model, data, device)["token_acc"]
    model.eval()
    return TrainResult(
        steps=0,
        seconds=0.0,
        stopped_early=False,
        final_heldout_acc=acc,
        stop_reason=None,
        best_heldout_acc=acc,
        best_step=0,
        stop_length=train_length,
    )


def behaviour(
    model: nn.Module,
    task: Task,
    *,
    seed: int,
    eval_lengths: list[int],
    n_sequences: int,
    device: torch.device | str = "cpu",
) -> dict[str, BehaviourRecord]:
    """Behavioural accuracy per eval length: ``{"40": BehaviourRecord(token_acc, last_acc, n), ...}``
    (keys: str(L); store with ``science.records.behaviour_json``)."""
    return {
        str(length): BehaviourRecord(
            **token_accuracy(
                model, task.generate(length, n_sequences, data_seed(seed, "behaviour", length), split="test"), device
            )
        )
        for length in eval_lengths
    }
