"""Activation patching (docs/SCIENCE.md#activation-patching; Meng et al. 2022 "Locating and
Editing Factual Associations in GPT", §2.1 causal tracing; Heimersheim & Nanda 2024 "How to use
and interpret activation patching").

Clean x and corrupted x' differ in one early token (at the grid's corruption position p*) so
that the final label differs. One activation at (site, layer ℓ, position t) is copied from the
clean run into the corrupted run, and

    recovery = (LD_patched − LD_corrupted) / (LD_clean − LD_corrupted)

with LD = logit[clean label] − logit[corrupted label] at the last position, as a ratio of means
over the usable pairs with a percentile bootstrap 95% CI over pairs.

Sites (every family; ``state`` only where a layer carries one):

- ``resid_pre``: the input of block ℓ [B, L, D] at position t (ℓ = 0..n-1). Nothing sits
  between blocks, so resid_pre ℓ equals resid_post ℓ−1 (and resid_pre 0 the embedding): the
  grid computes the pair once and stores it under both names.
- ``resid_post``: the output of block ℓ [B, L, D] at t (ℓ = -1 = emb .. n-1). The last
  block's output at t < L−1 reaches only the output at t, so that row is exactly 0 there.
- ``state``: the recurrent state block ℓ carries from t to t+1, injected after step t — (h, c)
  for the LSTM, h for the GRU, the SSM state and the Conv1D window for Mamba / Mamba-2
  (``state:ssm`` / ``state:conv`` inject one part). The output at t itself is not changed, so
  ``state`` at t = L−1 is exactly 0. The transformer has no such state: the site is skipped.

Pairs whose |LD_clean − LD_corrupted| is below ``REL_GAP`` × the median |LD_clean| of the run's
pairs are dropped (counted in ``n_dropped``): nothing to recover there, and tiny gaps make ratios
look precise when they are noise. With fewer than ``MIN_PAIRS`` usable pairs recovery is None
and ``note`` says why.

Cost: recurrent families re-run only blocks ℓ..n-1 on positions t..L-1 from the stored
corrupted states (``models_store.states``); nothing before the patched position is computed
again. The transformer re-runs blocks ℓ..n-1 and the head with a hook, several positions per
batch, from the corrupted run's output of the layer before (recorded once per layer): nothing
before the patched layer is computed again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import torch

from layerscope_core.registry import ALL_PATCH_SITES, PATCH_SITES, patch_sites_of
from models_store.base import LayerwiseModel
from models_store.capture import edit_layer, output_through, patch_positions, run_with_states, start_at_layer
from models_store.states import StatefulModel, stateful
from science.context import Context, SilentContext
from science.precision import check_precision, forward_precision, forwards
from science.records import PatchingRecord
from science.seeds import data_seed
from science.stats import bootstrap_ci
from science.tasks.base import Task, TaskData

N_BOOT = 1000
REL_GAP = 0.1  # a pair is usable when |LD_clean − LD_corr| ≥ REL_GAP · median |LD_clean|
ABS_GAP = 1e-6  # logits: floor of that threshold (a run whose LD_clean is ~0 everywhere)
MIN_PAIRS = 8  # fewer usable pairs → recovery None
SITES = PATCH_SITES
ALL_SITES = ALL_PATCH_SITES
MAX_DRAW_ROUNDS = 64


def logit_difference(logits: torch.Tensor, clean_label: torch.Tensor, corrupted_label: torch.Tensor) -> torch.Tensor:
    """LD per pair: logits [n, L, C] (last position used) or [n, C]; labels [n] → [n]."""
    last = logits[:, -1, :] if logits.dim() == 3 else logits  # (n, C)
    idx = torch.arange(last.shape[0], device=last.device)
    return last[idx, clean_label.to(last.device)] - last[idx, corrupted_label.to(last.device)]


@torch.no_grad()
def patch_recovery(
    model: LayerwiseModel,
    clean: torch.Tensor,
    corrupted: torch.Tensor,
    clean_label: torch.Tensor,
    corrupted_label: torch.Tensor,
    layer: int,
    positions: Sequence[int] | slice,
    device: torch.device | str = "cpu",
) -> float:
    """Recovery of the mean logit difference (1.0 = clean, 0.0 = corrupted) when the residual
    stream after ``layer`` (-1 = emb) at ``positions`` is patched from the clean run.
    tokens: [n, L]; labels: [n]. No pairs are dropped (see ``patching_grid`` for that)."""
    model.eval()
    clean, corrupted = clean.to(device), corrupted.to(device)
    clean_logits, states = run_with_states(model, clean, layers=[layer])
    ld_clean = logit_difference(clean_logits, clean_label, corrupted_label).mean()
    ld_corr = logit_difference(model(corrupted), clean_label, corrupted_label).mean()
    with edit_layer(model, layer, patch_positions(states[layer], positions)):  # shape-checked
        ld_p = logit_difference(model(corrupted), clean_label, corrupted_label).mean()
    return float((ld_p - ld_corr) / (ld_clean - ld_corr))


# --------------------------------------------------------------------------------------------
# Pairs with one corruption position per grid
# --------------------------------------------------------------------------------------------
def fixed_position_pairs(task: Task, length: int, n: int, run_seed: int) -> tuple[TaskData, TaskData, int]:
    """n clean / corrupted pairs that all differ at one position p* (so a grid has one
    corruption position to mark and "before / after the corruption" is the same for all pairs).

    Rule: draw pairs with the task's own rule (seed ``data_seed(run_seed, "patch", length)``);
    p* is the most frequent corruption position of that draw (ties: the earliest); keep the
    pairs corrupted at p*, drawing again with further seeds until there are n.

    Raises:
        ValueError: fewer than n pairs at p* after ``MAX_DRAW_ROUNDS`` draws.
    """
    draw = max(4 * n, 256)
    clean, corr, pos = task.corruption_pairs(length, draw, data_seed(run_seed, "patch", length))
    counts = Counter(pos.tolist())
    p_star = min(counts, key=lambda p: (-counts[p], p))
    parts = [(clean, corr, pos)]
    have = counts[p_star]
    for k in range(1, MAX_DRAW_ROUNDS):
        if have >= n:
            break
        c, x, p = task.corruption_pairs(length, draw, data_seed(run_seed, "patch", length + 100_000 * k))
        parts.append((c, x, p))
        have += int((p == p_star).sum())
    if have < n:
        raise ValueError(f"only {have} corruption pairs at position {p_star} after {MAX_DRAW_ROUNDS} draws; need {n}")

    def pick(which: Literal[0, 1]) -> TaskData:
        toks = torch.cat([part[which].tokens[part[2] == p_star] for part in parts])[:n]
        labs = torch.cat([part[which].labels[part[2] == p_star] for part in parts])[:n]
        return TaskData(toks, labs)

    return pick(0), pick(1), int(p_star)


# --------------------------------------------------------------------------------------------
# Recovery over pairs
# --------------------------------------------------------------------------------------------
def usable_pairs(ld_clean: np.ndarray, ld_corr: np.ndarray) -> tuple[np.ndarray, float]:
    """(mask [n] of pairs whose clean–corrupted gap is big enough, the threshold in logits)."""
    thr = max(REL_GAP * float(np.median(np.abs(ld_clean))), ABS_GAP) if len(ld_clean) else ABS_GAP
    return np.abs(ld_clean - ld_corr) >= thr, thr


def recovery_ci(
    ld_p: np.ndarray, ld_clean: np.ndarray, ld_corr: np.ndarray, seed: int, n_boot: int = N_BOOT
) -> tuple[float, float | None, float | None]:
    """Ratio-of-means recovery over pairs [n] and its percentile bootstrap 95% CI
    (``science.stats.bootstrap_ci``, a pair's three LDs resampled together). Resamples whose mean
    gap is 0 are skipped."""
    point = float((ld_p.mean() - ld_corr.mean()) / (ld_clean.mean() - ld_corr.mean()))
    lo, hi = bootstrap_ci(
        np.stack([ld_p, ld_clean, ld_corr], axis=1), n_boot=n_boot, seed=seed, statistic=_ratio_of_means
    )
    return point, lo, hi


def _ratio_of_means(resamples: np.ndarray) -> np.ndarray:
    """Recovery of each resample [n_boot, n, 3] (columns LD_patched, LD_clean, LD_corrupted) → [n_boot]."""
    m = resamples.mean(axis=1)  # (n_boot, 3)
    return (m[:, 0] - m[:, 2]) / (m[:, 1] - m[:, 2])


# --------------------------------------------------------------------------------------------
# Logit differences of every patched cell, for one batch of pairs
# --------------------------------------------------------------------------------------------
Cell = tuple[str, int, int]  # ("input", block j, t) | (state site, block ℓ, t); t a real position


@torch.no_grad()
def _cells_recurrent(
    sm: StatefulModel, clean: torch.Tensor, corr: torch.Tensor, labels: tuple, cells: list[Cell], ctx: Context
) -> tuple[np.ndarray, np.ndarray, dict[Cell, np.ndarray]]:
    """LD_clean, LD_corr and LD_patched per cell [b] from two traces and suffix re-runs."""
    P, L = sm.n_prefix, clean.shape[1]
    tc, tx = sm.trace(clean), sm.trace(corr)
    n = sm.n_layers
    ld = lambda logits: logit_difference(logits, *labels).double().cpu().numpy()  # noqa: E731
    ld_clean, ld_corr = ld(tc.last), ld(tx.last)
    out: dict[Cell, np.ndarray] = {}
    for kind, j, t in cells:
        ctx.check_cancelled()
        tau = t + P
        if kind == "input":
            if j == n:  # the head's input: only the last position reaches the answer
                out[(kind, j, t)] = ld(sm.head(tc.inputs[n][:, -1])) if t == L - 1 else ld_corr.copy()
                continue
            if torch.equal(tc.inputs[j][:, tau], tx.inputs[j][:, tau]):  # nothing to patch (e.g. before p*)
                out[(kind, j, t)] = ld_corr.copy()
                continue
            x = tx.inputs[j][:, tau:].clone()
            x[:, 0] = tc.inputs[j][:, tau]
            out[(kind, j, t)] = ld(sm.resume(tx, j, tau, x, sm.state_at(tx, j, tau - 1)))
            continue
        if t == L - 1:  # a state injected after the last step reaches nothing
            out[(kind, j, t)] = ld_corr.copy()
            continue
        parts = sm.parts if kind == "state" else (kind.split(":")[1],)
        clean_state, state = sm.state_after(tc, j, tau), sm.state_after(tx, j, tau)  # tau = t + P ≥ 0
        if all(torch.equal(clean_state[k], state[k]) for k in parts):  # the runs agree up to t: exactly 0
            out[(kind, j, t)] = ld_corr.copy()
            continue
        out[(kind, j, t)] = ld(sm.with_state(tc, tx, j, tau, parts))
    return ld_clean, ld_corr, out


@torch.no_grad()
def _cells_hooks(
    model: LayerwiseModel,
    clean: torch.Tensor,
    corr: torch.Tensor,
    labels: tuple,
    cells: list[Cell],
    ctx: Context,
    group: int = 8,
    reference: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[Cell, np.ndarray]]:
    """The same for models without a recurrent state (the transformer): input of block j at t
    = the output of layer j-1, patched by a hook; ``group`` positions per batch. Each patched
    forward starts at block j (``models_store.capture.start_at_layer``) from the corrupted run's
    output of layer j-1, recorded once per layer and batch size by a pass that stops there
    (``output_through``): a patch at block j cannot change what blocks before it compute, and the
    recorded output is that of the very batch the full forward would run, so every logit is the
    full forward's bit for bit, without computing blocks 0..j-1 again for every group of
    positions. ``reference``: the full forward for every group (the tests hold the two equal)."""
    b = clean.shape[0]
    clean_logits, states = run_with_states(model, clean)
    ld = lambda logits: logit_difference(logits, *labels).double().cpu().numpy()  # noqa: E731
    ld_clean, ld_corr = ld(clean_logits), ld(model(corr))
    out: dict[Cell, np.ndarray] = {}
    by_layer: dict[int, list[int]] = {}
    for _, j, t in cells:
        by_layer.setdefault(j, []).append(t)
    for j, ts in by_layer.items():
        src = states[j - 1]  # (b, L, D): the output of layer j-1 = the input of block j
        recorded: tuple[int, dict[int, object]] | None = None  # (group size, the corrupted batch's output of j-1)
        for i in range(0, len(ts), group):
            ctx.check_cancelled()
            chunk = ts[i : i + group]

            def fn(h: torch.Tensor, chunk=chunk, src=src) -> torch.Tensor:  # h: (g·b, L, D)
                if tuple(h.shape) != (len(chunk) * b, *src.shape[1:]):  # as patch_positions checks
                    raise ValueError(
                        f"patch source shape {tuple(src.shape)} (× {len(chunk)} positions) "
                        f"!= edited state shape {tuple(h.shape)}"
                    )
                h = h.clone()
                for g, t in enumerate(chunk):
                    h[g * b : (g + 1) * b, t] = src[:, t].to(h.dtype)
                return h

            batch = corr.repeat(len(chunk), 1)  # (g·b, L)
            if reference:
                with edit_layer(model, j - 1, fn):
                    logits = model(batch)[:, -1]  # (g·b, C)
            else:
                if recorded is None or recorded[0] != len(chunk):  # one size held at a time
                    recorded = (len(chunk), output_through(model, batch, j - 1))
                with start_at_layer(model, j - 1, recorded[1]), edit_layer(model, j - 1, fn):
                    logits = model(batch)[:, -1]  # (g·b, C): blocks j.. and the head only
            for g, t in enumerate(chunk):
                out[("input", j, t)] = ld(logits[g * b : (g + 1) * b])
    return ld_clean, ld_corr, out


@torch.no_grad()
def cell_logit_differences(
    model: LayerwiseModel,
    clean: torch.Tensor,
    corrupted: torch.Tensor,
    labels: tuple[torch.Tensor, torch.Tensor],
    cells: list[Cell],
    ctx: Context | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[Cell, np.ndarray]]:
    """LD_clean [b], LD_corrupted [b] and LD_patched [b] per cell for one batch of pairs.

    Args:
        clean, corrupted: tokens [b, L] on the model's device; labels: (clean, corrupted) [b].
        cells: ``("input", j, t)`` = the input of block j (j = n: the head's input, i.e. the
            last block's output) at real position t; ``("state" | "state:ssm" | "state:conv", ℓ, t)``
            = block ℓ's carried state injected after position t (recurrent families only).
    """
    ctx = ctx or SilentContext()
    sm = stateful(model)
    if sm is not None:
        return _cells_recurrent(sm, clean, corrupted, labels, cells, ctx)
    if any(c[0] != "input" for c in cells):
        raise ValueError(f"family {model.config.family!r} has no recurrent state to patch")
    return _cells_hooks(model, clean, corrupted, labels, cells, ctx)


# --------------------------------------------------------------------------------------------
# The grid
# --------------------------------------------------------------------------------------------
def grid_positions(eval_length: int, positions: Iterable[int] | None, stride: int = 1) -> list[int]:
    """The patched positions: ``positions`` if given, else every ``stride``-th of 0..L−1 plus L−1.

    Raises:
        ValueError: a position outside 0..L−1, or stride < 1.
    """
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if positions is None:
        return sorted({*range(0, eval_length, stride), eval_length - 1})
    out = sorted({int(p) for p in positions})
    bad = [p for p in out if not 0 <= p < eval_length]
    if bad:
        raise ValueError(f"patch positions {bad} outside 0..{eval_length - 1}")
    return out


def _site_layers(site: str, n_layers: int) -> list[tuple[int, Cell]]:
    """(row layer, the computed cell's (kind, block)) for one site; t filled in later."""
    if site == "resid_pre":
        return [(ly, ("input", ly, 0)) for ly in range(n_layers)]
    if site == "resid_post":
        return [(ly, ("input", ly + 1, 0)) for ly in range(-1, n_layers)]
    return [(ly, (site, ly, 0)) for ly in range(n_layers)]


def usable_sites(model: LayerwiseModel, sites: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(sites the model has, sites skipped): ``state*`` needs a recurrent family, ``state:ssm`` /
    ``state:conv`` a Mamba one.

    Raises:
        ValueError: an unknown site name.
    """
    sites = list(SITES) if sites is None else list(dict.fromkeys(sites))
    bad = [s for s in sites if s not in ALL_SITES]
    if bad:
        raise ValueError(f"unknown patching sites {bad}; expected some of {list(ALL_SITES)}")
    return patch_sites_of(model.config.family, sites)


@torch.no_grad()
def _batched_logit_differences(
    model: LayerwiseModel,
    clean: TaskData,
    corrupted: TaskData,
    cells: list[Cell],
    batch_size: int,
    device: torch.device | str,
    ctx: Context,
) -> tuple[np.ndarray, np.ndarray, dict[Cell, np.ndarray]]:
    """:func:`cell_logit_differences` over every pair, ``batch_size`` pairs per forward:
    LD_clean [n], LD_corrupted [n] and LD_patched [n] per cell."""
    n_pairs = clean.tokens.shape[0]
    ld_c, ld_x = [], []
    ld_p: dict[Cell, list[np.ndarray]] = {c: [] for c in cells}
    for i in range(0, n_pairs, batch_size):
        ctx.check_cancelled()
        c, x = clean.tokens[i : i + batch_size].to(device), corrupted.tokens[i : i + batch_size].to(device)
        labels = (clean.labels[i : i + batch_size, -1], corrupted.labels[i : i + batch_size, -1])
        sub = ctx.sub(i / n_pairs, min(1.0, (i + batch_size) / n_pairs))
        with forwards(c.device):  # bfloat16 autocast at precision bf16 (science.precision)
            a, b, res = cell_logit_differences(model, c, x, labels, cells, sub)
        ld_c.append(a)
        ld_x.append(b)
        for cell, v in res.items():
            ld_p[cell].append(v)
        sub.progress(1.0, f"patching pairs {i}..{min(n_pairs, i + batch_size) - 1}")
    return np.concatenate(ld_c), np.concatenate(ld_x), {cell: np.concatenate(v) for cell, v in ld_p.items()}


def _pairs_summary(ld_clean: np.ndarray, ld_corr: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """(mask [n] of the usable pairs, the fields every row of the grid shares: ``n_pairs``
    (usable), ``n_dropped``, the mean ``ld_clean`` / ``ld_corrupted`` and the ``note`` saying why
    recovery is None when fewer than ``MIN_PAIRS`` pairs are usable)."""
    keep, thr = usable_pairs(ld_clean, ld_corr)
    n_use = int(keep.sum())
    note = None
    if n_use < MIN_PAIRS:
        note = (
            f"only {n_use} of {len(keep)} pairs have |LD_clean − LD_corrupted| ≥ {thr:.3g} logits "
            f"({REL_GAP:.0%} of the median |LD_clean|); need {MIN_PAIRS}"
        )
    sel = keep if n_use else np.ones_like(keep)
    return keep, {
        "n_pairs": n_use,
        "n_dropped": int(len(keep) - n_use),
        "ld_clean": float(ld_clean[sel].mean()),
        "ld_corrupted": float(ld_corr[sel].mean()),
        "note": note,
    }


@torch.no_grad()
def patching_grid(
    model: LayerwiseModel,
    task: Task,
    *,
    run_seed: int,
    eval_length: int = 40,
    positions: Sequence[int] | None = None,
    sites: Sequence[str] | None = None,
    stride: int = 1,
    n_pairs: int = 128,
    batch_size: int = 128,
    config_hash: str = "",
    device: torch.device | str = "cpu",
    ctx: Context | None = None,
    layers: Sequence[int] | None = None,
    precision: str = "fp32",
) -> list[PatchingRecord]:
    """Recovery on a site × layer × position grid. Returns :class:`PatchingRecord` s (rows of
    ``patching_results``; dict-compatible).

    Args:
        model: a ``LayerwiseModel`` (eval mode is set).
        positions: real 0-based positions; None = every ``stride``-th of 0..L−1 (and L−1).
        sites: some of ``ALL_SITES``; None = ``SITES``. ``state*`` is skipped on the transformer.
        batch_size: pairs per forward (memory: Mamba states are [batch, L, E, N] per layer).
        layers: the blocks to patch (``science.causal_layers``); None = every block. The
            embedding output (``resid_post`` −1, block 0's input) is kept with block 0.
        precision: ``fp32`` | ``bf16``, the forward passes' (``science.precision``; the
            patches, logit differences and statistics in float32 / float64 either way).

    Returns:
        one record per (site, layer, position; 0-based) with ``recovery`` / ``recovery_lo`` / ``recovery_hi``
        (None + ``note`` when fewer than ``MIN_PAIRS`` pairs are usable), ``n_pairs`` (usable),
        ``n_dropped``, ``corrupt_position`` (the grid's p*), mean ``ld_clean`` / ``ld_corrupted``.

    Raises:
        ValueError: a position outside 0..L−1, an unknown site, no asked-for site that the
            model has, too few corruption pairs, or an unknown precision.
    """
    check_precision(precision)
    ctx = ctx or SilentContext()
    model.eval()
    pos = grid_positions(eval_length, positions, stride)
    site_list, skipped = usable_sites(model, sites)
    if not site_list:  # asked for state sites only, on a family without them: nothing would be measured
        raise ValueError(
            f"patching sites {skipped}: {model.config.family} has no such state; its sites are "
            f"{usable_sites(model, ALL_SITES)[0]}"
        )
    if skipped:
        ctx.log(f"patching: sites {skipped} skipped ({model.config.family} has no such state)")
    clean, corrupted, p_star = fixed_position_pairs(task, eval_length, n_pairs, run_seed)
    n = model.n_layers
    chosen = None if layers is None else {-1, *layers}

    def site_layers(site: str) -> list[tuple[int, Cell]]:
        return [c for c in _site_layers(site, n) if chosen is None or c[0] in chosen]

    wanted = {(k, j, t) for s in site_list for _, (k, j, _) in site_layers(s) for t in pos}
    cells = sorted(wanted, key=lambda c: (c[1], c[2], c[0]))
    with forward_precision(precision):
        ld_clean, ld_corr, ld_p = _batched_logit_differences(model, clean, corrupted, cells, batch_size, device, ctx)
    keep, shared = _pairs_summary(ld_clean, ld_corr)
    base = {"eval_length": eval_length, "corrupt_position": p_star, **shared, "config_hash": config_hash}
    rows: list[PatchingRecord] = []
    for site in site_list:
        for layer, (k, j, _) in site_layers(site):
            for t in pos:
                rec = lo = hi = None
                if shared["note"] is None:
                    rec, lo, hi = recovery_ci(ld_p[(k, j, t)][keep], ld_clean[keep], ld_corr[keep], seed=run_seed)
                rows.append(
                    PatchingRecord(
                        **base, site=site, layer=layer, position=t, recovery=rec, recovery_lo=lo, recovery_hi=hi
                    )
                )
    return rows
