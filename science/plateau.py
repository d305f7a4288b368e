"""Plateau rule, revision 3 (docs/SCIENCE.md#plateau): a run stops as ``plateau`` only when its
held-out accuracy is flat with confidence **and** its training loss has stopped falling, over a
window of at least 2,000 steps or 10% of its budget.

Over the window (the last ``window_steps`` steps, all at the current training length):
- the held-out token accuracy's least-squares slope against the step (``scipy.stats.linregress``
  over the window's evaluations) has the upper end of its 95% Student-t interval
  (slope + t₀.₉₇₅,ₙ₋₂ × stderr) below ``MAX_SLOPE_PP`` = 0.2 pp per 1,000 steps, and
- the training loss fell by less than ``MAX_LOSS_FALL`` = 1%: the least-squares line through the
  window's per-step losses, read at the window's first and last step, (first − last) / first.

The same window read at a run's stop (:func:`stop_slope`) is what the claims and the report print
beside a stopped run, whichever rule stopped it. Revisions 1 and 2 are
:func:`science.training.plateaued`; :func:`plateau_revision` says which a stored run trained under.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st

REVISION = 3
MIN_WINDOW_STEPS = 2_000
WINDOW_BUDGET_SHARE = 0.10
MAX_SLOPE_PP = 0.2  # pp per 1,000 steps, the upper end of the 95% interval
MAX_LOSS_FALL = 0.01  # fraction of the window's first fitted loss
PP_PER_1000 = 1e5  # accuracy fraction per step → pp per 1,000 steps


@dataclass(frozen=True)
class WindowSlope:
    """The window read at one step. ``slope_pp``, ``lo_pp``, ``hi_pp``: the held-out accuracy's
    least-squares slope and its 95% t-interval, pp per 1,000 steps (``lo``/``hi`` NaN with fewer
    than 3 evaluations); ``loss_fall``: the fitted training loss's fall over the window as a
    fraction of its start (negative: it rose; NaN without stored losses); ``window_steps``: the steps the window spans
    (below :func:`window_steps` when the stage was shorter: ``full`` False); ``n_evals``: the
    evaluations in it; ``length``: the training length it was read at."""

    slope_pp: float
    lo_pp: float
    hi_pp: float
    loss_fall: float
    window_steps: int
    n_evals: int
    length: int
    full: bool

    def flat(self) -> bool:
        """Revision 3's stop: a full window, the slope's upper 95% end below ``MAX_SLOPE_PP`` and
        the loss falling by less than ``MAX_LOSS_FALL``."""
        return self.full and self.hi_pp < MAX_SLOPE_PP and self.loss_fall < MAX_LOSS_FALL


def window_steps(max_steps: int) -> int:
    """The window (steps) for a run with a budget of ``max_steps``: the larger of 2,000 and 10% of it."""
    return max(MIN_WINDOW_STEPS, math.ceil(WINDOW_BUDGET_SHARE * max_steps))


def read_window(curve: Sequence[Mapping[str, Any]], *, max_steps: int, train_length: int) -> WindowSlope | None:
    """The window ending at the curve's last point, at that point's training length.

    ``curve``: the run's loss curve, one dict per step, oldest first (``step``, ``loss``,
    ``heldout_token_acc`` or None, ``length`` where a curriculum ran; without it every point is at
    ``train_length``). Only the steps at the last point's length count, so a window never spans two
    curriculum stages. Returns None when the curve is empty or has fewer than 2 evaluations there.
    """
    if not curve:
        return None
    length = int(curve[-1].get("length") or train_length)
    end = int(curve[-1]["step"])
    want = window_steps(max_steps)
    steps, loss_steps, losses, e_steps, e_accs = [], [], [], [], []
    for point in reversed(curve):
        if int(point.get("length") or train_length) != length or int(point["step"]) <= end - want:
            break
        steps.append(int(point["step"]))
        if point.get("loss") is not None:
            loss_steps.append(int(point["step"]))
            losses.append(float(point["loss"]))
        if point.get("heldout_token_acc") is not None:
            e_steps.append(int(point["step"]))
            e_accs.append(float(point["heldout_token_acc"]))
    if len(e_steps) < 2:
        return None
    span = end - min(steps) + 1
    y = np.array(e_accs, float)
    acc = _st.linregress(np.array(e_steps, float), y)
    if len(e_steps) < 3:
        half = math.nan
    elif np.ptp(y) == 0:  # every evaluation equal (linregress gives no stderr): the slope is exactly 0
        half = 0.0
    else:
        half = float(_st.t.ppf(0.975, len(e_steps) - 2)) * float(acc.stderr)
    fall = math.nan  # no losses stored: never flat
    if len(losses) >= 2:
        fit = _st.linregress(np.array(loss_steps, float), np.array(losses, float))
        first = fit.intercept + fit.slope * min(steps)
        last = fit.intercept + fit.slope * end
        fall = (first - last) / first if first > 0 else 0.0
    slope = float(acc.slope) * PP_PER_1000
    return WindowSlope(
        slope_pp=slope,
        lo_pp=slope - half * PP_PER_1000,
        hi_pp=slope + half * PP_PER_1000,
        loss_fall=float(fall),
        window_steps=span,
        n_evals=len(e_steps),
        length=length,
        full=span >= want,
    )


def plateaued_v3(curve: Sequence[Mapping[str, Any]], *, max_steps: int, train_length: int) -> WindowSlope | None:
    """Revision 3's verdict at the curve's last point: the window when the run has plateaued
    (:meth:`WindowSlope.flat`), else None."""
    w = read_window(curve, max_steps=max_steps, train_length=train_length)
    return w if w is not None and w.flat() else None


def plateau_revision(train_config: Mapping[str, Any] | None) -> int | None:
    """The plateau rule a run trained under, from its stored ``train_config``: 3 (``plateau_revision``),
    2 (``plateau_gap_share`` set), 1 (``plateau_evals`` alone) or None (no plateau rule)."""
    tc = train_config or {}
    if tc.get("plateau_revision") is not None:
        return int(tc["plateau_revision"])
    if tc.get("plateau_evals"):
        return 2 if tc.get("plateau_gap_share") is not None else 1
    return None


def stop_slope(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a stored run's curve said where it stopped (docs/SCIENCE.md#plateau): the revision-3
    window ending at its last step, ``{slope_pp, lo_pp, hi_pp, loss_fall, window_steps, n_evals,
    length, full, budget_share, revision}`` (``lo_pp``/``hi_pp``/``loss_fall`` None where
    :class:`WindowSlope` has NaN); ``budget_share`` = steps / ``max_steps``. None without
    a loss curve with 2 evaluations at its last length."""
    tc = run.get("train_config") or {}
    max_steps = int(tc.get("max_steps") or run.get("steps") or 0)
    w = read_window(run.get("loss_curve") or [], max_steps=max_steps, train_length=int(tc.get("train_length") or 40))
    if w is None:
        return None
    return {  # NaN (fewer than 3 evaluations, no losses) as None: these rows travel as JSON
        "slope_pp": w.slope_pp,
        "lo_pp": None if math.isnan(w.lo_pp) else w.lo_pp,
        "hi_pp": None if math.isnan(w.hi_pp) else w.hi_pp,
        "loss_fall": None if math.isnan(w.loss_fall) else w.loss_fall,
        "window_steps": w.window_steps,
        "n_evals": w.n_evals,
        "length": w.length,
        "full": w.full,
        "budget_share": (int(run.get("steps") or 0) / max_steps) if max_steps else None,
        "revision": plateau_revision(tc),
    }
