"""Activation patching (SPEC "Activation patching"; Meng et al. 2022 "Locating and Editing
Factual Associations in GPT", §2.1 causal tracing; Heimersheim & Nanda 2024 "How to use and
interpret activation patching").

Clean x and corrupted x' differ in one early token so that the final label differs. Layer ℓ
at position p is patched from the clean run into the corrupted run, and

    recovery = (LD_patched − LD_corrupted) / (LD_clean − LD_corrupted)

with LD = logit[clean label] − logit[corrupted label] at the last position. We report the
ratio of mean logit differences over pairs (robust to pairs with a tiny gap) with a
bootstrap 95% CI over pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from models_store.capture import edit_layer, run_with_states
from worker.context import JobContext, SilentContext
from worker.seeds import data_seed
from worker.tasks.base import Task

N_BOOT = 1000
MIN_GAP = 1e-6  # logit units: below this the clean and corrupted runs do not differ


def logit_difference(logits: torch.Tensor, clean_label: torch.Tensor, corrupted_label: torch.Tensor) -> torch.Tensor:
    """LD per pair at the last position. logits: [n, L, C]; labels: [n] → [n]."""
    last = logits[:, -1, :]  # (n, C)
    idx = torch.arange(last.shape[0])
    return last[idx, clean_label] - last[idx, corrupted_label]


def _positions_fn(clean_h: torch.Tensor, positions: Sequence[int] | slice):
    def fn(h: torch.Tensor) -> torch.Tensor:  # h: (n, L, D)
        h = h.clone()
        h[:, positions] = clean_h[:, positions].to(h.dtype)
        return h

    return fn


def _recovery(ld_p: np.ndarray, ld_clean: np.ndarray, ld_corr: np.ndarray, seed: int) -> tuple[float, float, float]:
    def ratio(idx: np.ndarray) -> float:
        # Undefined (NaN → stored as None) when the corruption does not move the logit
        # difference: nothing to recover (e.g. an untrained model).
        gap = ld_clean[idx].mean() - ld_corr[idx].mean()
        return float((ld_p[idx].mean() - ld_corr[idx].mean()) / gap) if abs(gap) > MIN_GAP else float("nan")

    n = len(ld_p)
    point = ratio(np.arange(n))
    if not np.isfinite(point):
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = np.array([ratio(rng.integers(0, n, n)) for _ in range(N_BOOT)])
    boots = boots[np.isfinite(boots)]
    if len(boots) == 0:
        return point, float("nan"), float("nan")
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return point, float(lo), float(hi)


class _Pairs:
    """Clean and corrupted runs of a batch of pairs, computed once: the clean states of every
    requested layer and both logit differences, then one edited forward per patch."""

    def __init__(self, model: nn.Module, clean: torch.Tensor, corrupted: torch.Tensor, clean_label: torch.Tensor,
                 corrupted_label: torch.Tensor, layers: list[int] | None, device: torch.device | str) -> None:
        model.eval()
        self.model, self.labels = model, (clean_label, corrupted_label)
        self.corrupted = corrupted.to(device)
        clean_logits, self.states = run_with_states(model, clean.to(device), layers=layers)
        self.ld_clean = logit_difference(clean_logits.cpu(), *self.labels).numpy()
        self.ld_corr = logit_difference(model(self.corrupted).cpu(), *self.labels).numpy()

    def patched(self, layer: int, positions: Sequence[int] | slice) -> np.ndarray:
        """LD per pair with ``layer`` at ``positions`` patched from the clean run: [n]."""
        with edit_layer(self.model, layer, _positions_fn(self.states[layer], positions)):
            return logit_difference(self.model(self.corrupted).cpu(), *self.labels).numpy()


@torch.no_grad()
def patch_recovery(model: nn.Module, clean: torch.Tensor, corrupted: torch.Tensor, clean_label: torch.Tensor,
                   corrupted_label: torch.Tensor, layer: int, positions: Sequence[int] | slice,
                   device: torch.device | str = "cpu") -> float:
    """Recovery (1.0 = the clean logit difference, 0.0 = the corrupted one) when ``layer`` at
    ``positions`` is patched from the clean run. tokens: [n, L]; labels: [n]."""
    pairs = _Pairs(model, clean, corrupted, clean_label, corrupted_label, [layer], device)
    gap = pairs.ld_clean.mean() - pairs.ld_corr.mean()
    return float((pairs.patched(layer, positions).mean() - pairs.ld_corr.mean()) / gap)


@torch.no_grad()
def patching_grid(model: nn.Module, task: Task, *, run_seed: int, eval_length: int = 40,
                  positions: Sequence[int] | None = None, n_pairs: int = 128, config_hash: str = "",
                  device: torch.device | str = "cpu", ctx: JobContext | None = None) -> list[dict[str, Any]]:
    """Recovery on a layer × position grid (every layer, emb included; positions default to
    the middle one, ``eval_length // 2``). Returns rows for ``patching_results``.

    Raises:
        ValueError: a position outside ``0..eval_length-1``.
    """
    ctx = ctx or SilentContext()
    positions = [eval_length // 2] if positions is None else list(positions)
    bad = [p for p in positions if not 0 <= p < eval_length]
    if bad:
        raise ValueError(f"patch positions {bad} outside 0..{eval_length - 1}")
    clean, corrupted, _ = task.corruption_pairs(eval_length, n_pairs, data_seed(run_seed, "patch", eval_length))
    layers = [-1, *range(model.n_layers)]
    pairs = _Pairs(model, clean.tokens, corrupted.tokens, clean.labels[:, -1], corrupted.labels[:, -1], None, device)
    rows = []
    for i, layer in enumerate(layers):
        ctx.check_cancelled()
        for pos in positions:
            ld_p = pairs.patched(layer, [pos])
            rec, lo, hi = _recovery(ld_p, pairs.ld_clean, pairs.ld_corr, seed=run_seed)
            rows.append({
                "layer": layer, "position": pos, "eval_length": eval_length, "recovery": rec,
                "recovery_lo": lo, "recovery_hi": hi, "ld_clean": float(pairs.ld_clean.mean()),
                "ld_corrupted": float(pairs.ld_corr.mean()), "n_pairs": int(len(ld_p)), "config_hash": config_hash,
            })
        ctx.progress((i + 1) / len(layers), f"patching layer {layer}")
    return rows
