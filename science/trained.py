"""What "trained" means, one definition for verdicts, pages and the API (docs/SCIENCE.md#trained).

A run is trained for its task when its held-out token accuracy at the training length, measured
when training ended, reaches the early-stop criterion it was trained for (0.99 by default,
stored with the run). Runs that never learned the task are kept and shown, but marked, and no
verdict reads them.
"""

from __future__ import annotations

DEFAULT_CRITERION = 0.99


def is_trained(heldout_acc: float | None, early_stop_acc: float | None) -> bool:
    """True when ``heldout_acc`` (0..1) reaches ``early_stop_acc`` (0..1; None → 0.99).

    A run with no held-out accuracy stored (None) is not trained.
    """
    if heldout_acc is None:
        return False
    criterion = DEFAULT_CRITERION if early_stop_acc is None else early_stop_acc
    return heldout_acc >= criterion - 1e-9


def untrained_reason(heldout_acc: float | None, early_stop_acc: float | None) -> str | None:
    """None for a trained run, else a short reason naming the accuracy ("held-out token
    accuracy 0.540 < 0.99")."""
    if is_trained(heldout_acc, early_stop_acc):
        return None
    criterion = DEFAULT_CRITERION if early_stop_acc is None else early_stop_acc
    if heldout_acc is None:
        return "no held-out accuracy stored"
    return f"held-out token accuracy {heldout_acc:.3f} < {criterion:g}"
