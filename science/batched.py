"""The seeds of one cell trained together as one batched model (docs/SCIENCE.md#batched-seeds).

S models of one ``ModelConfig`` (``build_model(cfg, seed=s)``, each its own initialisation) are
stacked parameter by parameter (``torch.func.stack_module_state``: every tensor gains a leading
seed axis of size S) and run in one ``torch.func.vmap`` of ``torch.func.functional_call`` over
that axis: one forward and one backward for all seeds per step. Each seed keeps what a separate
:func:`science.training.train_model` run has: its own training stream (the same
``data_seed(seed, "train", block)`` blocks), its own gradient clipping (global L2 norm over *its*
parameters, as ``clip_grad_norm_``), its own AdamW moments (AdamW is elementwise, so one
optimizer over the stacked tensors is S independent ones) and the same lr schedule
(:func:`science.training.make_scheduler`). The per-step losses equal S separate runs to float
tolerance (tests/test_batched_seeds.py compares them with ``train_model``'s loss curves).

Kept minimal (the measured alternative, not the study's path; BENCHMARKS.md#batched-seeds):
fixed length (no curriculum), a fixed step count, no evaluation, no early stop or plateau.

What vmap needs from each family (measured, torch 2.13 / transformers 5.24):

- ``transformer`` (GPT-NeoX): vmaps as built. The SDPA attention kernel has no batching rule,
  so vmap runs it once per seed (a performance warning, same numbers).
- ``lstm`` / ``gru`` (and the stacked variants): ``aten::lstm`` / ``aten::gru`` have no batching
  rule and no fallback ("Batching rule not implemented for aten::lstm.input. We could not
  generate a fallback"). The batched model swaps each ``nn.LSTM`` / ``nn.GRU`` for
  :class:`PlainLSTM` / :class:`PlainGRU`: the same parameters under the same names, computing
  PyTorch's documented equations with plain ops (which vmap batches), one time step at a time.
- ``mamba`` / ``mamba2``: the fast CPU mixers (``models_store.fast_scan``) are
  ``autograd.Function``\\ s calling compiled kernels on raw pointers, which vmap cannot enter
  ("it must override the setup_context staticmethod"); the batched model uses transformers'
  own torch path instead (``fast_scan.uninstall``), which vmaps: same function, but on the CPU
  that path is the slow one (BENCHMARKS.md, training step per family). The CUDA kernels of
  ``mamba_ssm`` are ``autograd.Function``\\ s too, so a GPU batched Mamba also runs the torch path.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import TypedDict

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from models_store import ModelConfig, build_model, fast_scan
from science.seeds import data_seed
from science.tasks.base import Task, TaskData
from science.training import make_scheduler

# --------------------------------------------------------------------------------------------
# RNN layers vmap can batch
# --------------------------------------------------------------------------------------------
_Cell = torch.Tensor | None  # the LSTM's cell state [B, H]; None for the GRU


class _Recipe(TypedDict):
    """The optimiser and schedule keywords :class:`BatchedSeeds` and :class:`SeedTrainer` share."""

    lr: float
    weight_decay: float
    max_steps: int
    warmup_steps: int
    lr_schedule: str
    min_lr_ratio: float
    grad_clip: float | None


class _PlainRNN(nn.Module):
    """A single-layer, unidirectional, batch-first RNN with ``nn.LSTM`` / ``nn.GRU``'s parameter
    names and shapes (``weight_ih_l0`` [G·H, D], ``weight_hh_l0`` [G·H, H], ``bias_ih_l0``,
    ``bias_hh_l0`` [G·H]; G = 4 gates for the LSTM, 3 for the GRU), so ``functional_call`` with a
    stacked ``nn.LSTM`` / ``nn.GRU`` state fills it. ``forward(x [B, L, D]) -> (y [B, L, H], None)``
    from a zero state (the only use in the families)."""

    gates = 0
    # copied from the wrapped RNN under its names (set with setattr in __init__)
    weight_ih_l0: nn.Parameter
    weight_hh_l0: nn.Parameter
    bias_ih_l0: nn.Parameter
    bias_hh_l0: nn.Parameter

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        if rnn.num_layers != 1 or rnn.bidirectional or not rnn.batch_first or not rnn.bias or rnn.proj_size:
            raise ValueError("PlainLSTM/PlainGRU cover single-layer, unidirectional, batch-first RNNs with biases")
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            setattr(self, name, nn.Parameter(getattr(rnn, name).detach().clone()))
        self.hidden_size = rnn.hidden_size

    def cell(self, gi: torch.Tensor, h: torch.Tensor, c: _Cell) -> tuple[torch.Tensor, _Cell]:
        """One time step: the input part ``gi`` [B, G·H], state ``h`` [B, H] (and the LSTM's cell
        ``c`` [B, H]) → the next (h, c)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        gi = F.linear(x, self.weight_ih_l0, self.bias_ih_l0)  # (B, L, G·H): the input part of every step at once
        h = x.new_zeros(x.shape[0], self.hidden_size)  # (B, H)
        c = h if self.gates == 4 else None
        ys = []
        for t in range(x.shape[1]):
            h, c = self.cell(gi[:, t], h, c)
            ys.append(h)
        return torch.stack(ys, dim=1), None  # (B, L, H)


class PlainLSTM(_PlainRNN):
    """``nn.LSTM``'s equations (gate order i, f, g, o): c' = f⊙c + i⊙g, h' = o⊙tanh(c')."""

    gates = 4

    def cell(self, gi: torch.Tensor, h: torch.Tensor, c: _Cell) -> tuple[torch.Tensor, _Cell]:
        if c is None:
            raise ValueError("an LSTM step needs its cell state c [B, H]")
        i, f, g, o = (gi + F.linear(h, self.weight_hh_l0, self.bias_hh_l0)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class PlainGRU(_PlainRNN):
    """``nn.GRU``'s equations (gate order r, z, n): n = tanh(W_in x + b_in + r⊙(W_hn h + b_hn)),
    h' = (1 − z)⊙n + z⊙h."""

    gates = 3

    def cell(self, gi: torch.Tensor, h: torch.Tensor, c: _Cell) -> tuple[torch.Tensor, _Cell]:
        gh = F.linear(h, self.weight_hh_l0, self.bias_hh_l0)
        ir, iz, i_n = gi.chunk(3, dim=-1)
        hr, hz, hn = gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(i_n + r * hn)
        return (1 - z) * n + z * h, None


def vmappable(model: nn.Module) -> nn.Module:
    """A copy of ``model`` that ``vmap`` can run: ``nn.LSTM`` / ``nn.GRU`` → :class:`PlainLSTM` /
    :class:`PlainGRU`, the fast Mamba / Mamba-2 mixers → transformers' own. Parameter names are
    unchanged, so ``functional_call`` with ``model``'s (stacked) state fills it.

    Raises:
        ValueError: an RNN that :class:`PlainLSTM` / :class:`PlainGRU` do not cover.
    """
    model = copy.deepcopy(model)
    fast_scan.uninstall(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.LSTM):
                setattr(parent, name, PlainLSTM(child))
            elif isinstance(child, nn.GRU):
                setattr(parent, name, PlainGRU(child))
    return model


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
@dataclass
class BatchedResult:
    """``losses``: [steps, S] training loss of each seed at each step (cross-entropy, nats);
    ``models``: the S trained models (seed order), in eval mode; ``seconds``: wall time of the loop."""

    losses: torch.Tensor
    models: list[nn.Module] = field(default_factory=list)
    seconds: float = 0.0


def seed_batch(
    task: Task, seed: int, step: int, *, length: int, batch_size: int, block: int, cache: dict[int, TaskData]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seed ``seed``'s batch at ``step`` (1-based): ``train_model``'s stream without a curriculum,
    one ``task.generate`` of ``block`` batches per ``data_seed(seed, "train", block index)``.
    Returns tokens, labels [B, L]."""
    index, j = divmod(step - 1, block)
    if index not in cache:
        cache.clear()
        cache[index] = task.generate(length, batch_size * block, data_seed(seed, "train", index), split="train")
    data = cache[index]
    rows = slice(j * batch_size, (j + 1) * batch_size)
    return data.tokens[rows], data.labels[rows]


def _clip_per_seed(grads: list[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` for each seed separately, in place: grads [S, ...]; seed s's gradients
    are scaled by min(1, max_norm / (‖g_s‖₂ + 1e-6)), ‖g_s‖₂ over all of seed s's parameters."""
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads])  # (P, S): each parameter's norm per seed
    total = norms.norm(dim=0)  # (S,)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)  # (S,)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))


class BatchedSeeds:
    """One training step for S models at once (module docstring): the models' parameters
    stacked (``stack_module_state``), one vmapped forward/backward, per-seed clipping, one AdamW
    over the stacked tensors, ``make_scheduler``'s schedule. ``models``: S models of one
    architecture (e.g. ``build_model(cfg, seed=s)``), left untouched until :meth:`write_back`.
    Recipe arguments as in :func:`science.training.train_model`.

    Raises:
        ValueError: from :func:`vmappable`.
    """

    def __init__(
        self,
        models: list[nn.Module],
        *,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        max_steps: int = 100,
        warmup_steps: int = 0,
        lr_schedule: str = "constant",
        min_lr_ratio: float = 0.1,
        grad_clip: float | None = None,
    ) -> None:
        self.models = models
        self.grad_clip = grad_clip
        self.base = vmappable(models[0]).to("meta").train()
        self.params, self.buffers = stack_module_state(models)  # name → [S, ...]; params are new leaves
        self.opt = torch.optim.AdamW(list(self.params.values()), lr=lr, weight_decay=weight_decay)
        self.sched = make_scheduler(
            self.opt, max_steps=max_steps, warmup_steps=warmup_steps, lr_schedule=lr_schedule, min_lr_ratio=min_lr_ratio
        )
        base = self.base

        def loss_of(p: dict, b: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            logits = functional_call(base, (p, b), (x,))  # (B, L, C)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        self._loss = vmap(loss_of)  # (stacked p, b, x [S, B, L], y [S, B, L]) → [S]

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One step on tokens ``x`` and labels ``y`` [S, B, L] (seed s's batch in row s);
        returns the S losses [S] before the update (detached, on the CPU)."""
        loss = self._loss(self.params, self.buffers, x, y)  # (S,)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each slice's gradient is its own loss's
        if self.grad_clip is not None:
            _clip_per_seed([p.grad for p in self.params.values() if p.grad is not None], self.grad_clip)
        self.opt.step()
        if self.sched is not None:
            self.sched.step()
        return loss.detach().cpu()

    def write_back(self) -> list[nn.Module]:
        """Copy each seed's trained parameters into its model; returns the models, in eval mode."""
        with torch.no_grad():
            for i, model in enumerate(self.models):
                for name, p in model.named_parameters():
                    p.copy_(self.params[name][i])
                model.eval()
        return self.models


class SeedTrainer:
    """``train_model``'s training step for one model (the simple path): AdamW, the schedule,
    ``clip_grad_norm_``; the model as built (fast Mamba mixers included)."""

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        max_steps: int = 100,
        warmup_steps: int = 0,
        lr_schedule: str = "constant",
        min_lr_ratio: float = 0.1,
        grad_clip: float | None = None,
    ) -> None:
        self.model = model.train()
        self.grad_clip = grad_clip
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.sched = make_scheduler(
            self.opt, max_steps=max_steps, warmup_steps=warmup_steps, lr_schedule=lr_schedule, min_lr_ratio=min_lr_ratio
        )

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One step on tokens ``x`` and labels ``y`` [B, L]; returns the loss before the update."""
        logits = self.model(x)  # (B, L, C)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.opt.step()
        if self.sched is not None:
            self.sched.step()
        return float(loss.detach())


def train_seeds_batched(
    cfg: ModelConfig,
    task: Task,
    seeds: list[int],
    *,
    train_length: int = 40,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    max_steps: int = 100,
    warmup_steps: int = 0,
    lr_schedule: str = "constant",
    min_lr_ratio: float = 0.1,
    grad_clip: float | None = None,
    eval_every: int = 50,
    device: torch.device | str = "cpu",
) -> BatchedResult:
    """Train one model per seed in ``seeds`` (S of them, ``build_model(cfg, seed=s)``; the
    pipeline's ``torch.manual_seed(seed)`` + ``build_model(cfg)`` is the same initialisation)
    together with :class:`BatchedSeeds`, for ``max_steps`` steps at length ``train_length``. The
    arguments mean what they mean for :func:`science.training.train_model` (``eval_every`` only
    sets the data blocks, as there: ``min(eval_every, 50)`` batches per generator call); each
    seed's losses match a ``train_model`` run with ``curriculum_start=None`` and no early stop.

    Raises:
        ValueError: no seeds, or repeated seeds.
        FloatingPointError: a seed's loss became NaN/inf (the message names the seed).
        RuntimeError: from vmap, for a model with random ops (dropout): ``randomness="error"``.
    """
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds: expected distinct seeds, got {seeds!r}")
    recipe: _Recipe = {
        "lr": lr,
        "weight_decay": weight_decay,
        "max_steps": max_steps,
        "warmup_steps": warmup_steps,
        "lr_schedule": lr_schedule,
        "min_lr_ratio": min_lr_ratio,
        "grad_clip": grad_clip,
    }
    trainer = BatchedSeeds([build_model(cfg, seed=s).to(device) for s in seeds], **recipe)
    block = max(1, min(eval_every, 50))
    caches: list[dict[int, TaskData]] = [{} for _ in seeds]
    losses = torch.empty(max_steps, len(seeds))
    start = time.perf_counter()
    for step in range(1, max_steps + 1):
        pairs = [
            seed_batch(task, s, step, length=train_length, batch_size=batch_size, block=block, cache=c)
            for s, c in zip(seeds, caches, strict=True)
        ]
        x = torch.stack([p[0] for p in pairs]).to(device)  # (S, B, L)
        y = torch.stack([p[1] for p in pairs]).to(device)  # (S, B, L)
        losses[step - 1] = trainer.step(x, y)
        bad = [s for s, v in zip(seeds, losses[step - 1].tolist(), strict=True) if not math.isfinite(v)]
        if bad:
            raise FloatingPointError(f"training loss became non-finite at step {step} for seeds {bad}")
    seconds = time.perf_counter() - start
    return BatchedResult(losses=losses, models=trainer.write_back(), seconds=seconds)


def train_seeds_sequential(
    cfg: ModelConfig,
    task: Task,
    seeds: list[int],
    *,
    train_length: int = 40,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    max_steps: int = 100,
    warmup_steps: int = 0,
    lr_schedule: str = "constant",
    min_lr_ratio: float = 0.1,
    grad_clip: float | None = None,
    eval_every: int = 50,
    device: torch.device | str = "cpu",
) -> BatchedResult:
    """The simple path: the same S trainings one after another with :class:`SeedTrainer`
    (exactly ``train_model``'s step, without its evaluations). The reference of
    :func:`train_seeds_batched` in tests and benchmarks; same arguments and result."""
    recipe: _Recipe = {
        "lr": lr,
        "weight_decay": weight_decay,
        "max_steps": max_steps,
        "warmup_steps": warmup_steps,
        "lr_schedule": lr_schedule,
        "min_lr_ratio": min_lr_ratio,
        "grad_clip": grad_clip,
    }
    losses = torch.empty(max_steps, len(seeds))
    models = []
    block = max(1, min(eval_every, 50))
    start = time.perf_counter()
    for i, seed in enumerate(seeds):
        trainer = SeedTrainer(build_model(cfg, seed=seed).to(device), **recipe)
        cache: dict[int, TaskData] = {}
        for step in range(1, max_steps + 1):
            x, y = seed_batch(task, seed, step, length=train_length, batch_size=batch_size, block=block, cache=cache)
            losses[step - 1, i] = trainer.step(x.to(device), y.to(device))
        models.append(trainer.model.eval())
    return BatchedResult(losses=losses, models=models, seconds=time.perf_counter() - start)
