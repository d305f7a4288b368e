"""A model run once over a data set: its predictions and every layer's states, and the two
behavioural numbers the measurements read off them (per-sequence token accuracy, the majority
rate). Batched by :data:`CAPTURE_BATCH` sequences; one forward pass per batch."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from models_store.base import LayerwiseModel
from models_store.capture import hidden_state, module_outputs, run_with_states, start_at_layer, states_through
from science.precision import forwards
from science.tasks.base import TaskData

__all__ = [
    "CAPTURE_BATCH",
    "STATES_ON",
    "Captured",
    "capture",
    "states_device",
    "predictions",
    "per_sequence_accuracy",
    "majority_rate",
]

CAPTURE_BATCH = 256
# Where a capture on a CUDA device holds the states: "model" (there, so that probes, edit fits,
# refits and INLP run on the GPU without copying the rows back and forth) or "cpu" (host memory,
# as on a CPU). A capture on the CPU holds them there either way.
STATES_ON = "LAYERSCOPE_STATES_ON"


def states_device(device: torch.device | str) -> torch.device:
    """Where :func:`capture` holds the states of a forward pass on ``device``: ``device`` itself
    when it is a CUDA device (unless :data:`STATES_ON` is ``cpu``), the CPU otherwise.

    Raises:
        ValueError: :data:`STATES_ON` set to something other than ``model`` or ``cpu``.
    """
    where = os.environ.get(STATES_ON, "model")
    if where not in ("model", "cpu"):
        raise ValueError(f"{STATES_ON}={where!r}: expected 'model' or 'cpu'")
    device = torch.device(device)
    return device if device.type == "cuda" and where == "model" else torch.device("cpu")


@dataclass
class Captured:
    """Logits-derived predictions and the residual stream of every layer for a data set.

    preds: [n, L] (CPU; None for a capture made without predictions, ``capture(preds=False)``); states: {layer: [n, L, D]} (float32; on the CPU, or on the model's CUDA
    device: :func:`states_device`), layer -1 = emb; ``outputs``: with
    ``capture(keep_outputs=True)``, per batch of :data:`CAPTURE_BATCH` sequences the output of
    the captured layers' hook modules as they returned it (on the model's device), what
    ``predictions(start=…)`` replays.
    """

    data: TaskData
    preds: torch.Tensor | None
    states: dict[int, torch.Tensor]
    outputs: list[dict[int, object]] | None = None

    def predicted(self) -> torch.Tensor:
        """``preds`` [n, L].

        Raises:
            ValueError: a capture made without predictions (``capture(preds=False)``).
        """
        if self.preds is None:
            raise ValueError("this capture was made without predictions (preds=False)")
        return self.preds


@torch.no_grad()
def capture(
    model: LayerwiseModel,
    data: TaskData,
    device: torch.device | str = "cpu",
    layers: list[int] | None = None,
    keep_outputs: bool = False,
    preds: bool = True,
) -> Captured:
    """Run ``model`` once over ``data`` (batched) and keep every layer's states (``layers``;
    None = all), and with ``keep_outputs`` those layers' hook modules' whole outputs too.

    ONE forward pass per batch: states come from forward hooks (``run_with_states``, or
    ``module_outputs`` with ``keep_outputs``: the same hooks, the same states), at the current
    precision (``science.precision.forwards``; the states kept as float32 either way). With
    ``preds=False`` (states for fits, no predictions read) each pass stops after the deepest of
    ``layers`` (``models_store.capture.states_through``: the same states bit for bit, without the
    blocks after it) and ``Captured.preds`` is None.

    Raises:
        ValueError: ``preds=False`` with ``keep_outputs`` (an edited forward replays the
            outputs and reads its predictions) or without ``layers``.
    """
    if not preds and (keep_outputs or layers is None):
        raise ValueError("capture(preds=False) needs explicit layers and no keep_outputs")
    model.eval()
    n = data.tokens.shape[0]
    hold = states_device(device)
    argmax: list[torch.Tensor] = []
    logits: torch.Tensor | None
    kept = []
    held: dict[int, torch.Tensor] = {}  # {layer: [n, L, D]}, filled batch by batch (no second copy to concatenate)
    for i in range(0, n, CAPTURE_BATCH):
        tokens = data.tokens[i : i + CAPTURE_BATCH].to(device)
        with forwards(tokens.device):  # bfloat16 autocast at precision bf16 (science.precision)
            if keep_outputs:
                wanted = model.layers if layers is None else sorted(set(layers))
                logits, outputs = module_outputs(model, tokens, wanted)
                kept.append(outputs)
                states = {k: hidden_state(outputs[k])[:, model.n_prefix :] for k in wanted}  # (B, L, D)
            elif not preds:
                logits, states = None, states_through(model, tokens, layers or [])
            else:
                logits, states = run_with_states(model, tokens, layers=layers)
        if logits is not None:
            argmax.append(logits.argmax(-1).cpu())  # (B, L)
        for layer, h in states.items():
            h = h.detach().float().to(hold)  # (B, L, D)
            if layer not in held:
                held[layer] = torch.empty((n, *h.shape[1:]), dtype=h.dtype, device=hold)
            held[layer][i : i + h.shape[0]].copy_(h)
    return Captured(data, torch.cat(argmax) if preds else None, held, kept if keep_outputs else None)


@torch.no_grad()
def predictions(
    model: LayerwiseModel,
    tokens: torch.Tensor,
    device: torch.device | str = "cpu",
    start: tuple[int, list[dict[int, object]]] | None = None,
) -> torch.Tensor:
    """Argmax predictions [n, L] for tokens [n, L], batched. ``start = (layer, outputs)``: each
    batch's forward pass starts after ``layer`` from ``outputs`` (a ``Captured.outputs`` of these
    tokens; ``models_store.capture.start_at_layer``): the same predictions when the only edit is at
    ``layer`` or later, without computing the blocks before it."""
    model.eval()
    preds = []
    for n, i in enumerate(range(0, tokens.shape[0], CAPTURE_BATCH)):
        batch = tokens[i : i + CAPTURE_BATCH].to(device)
        with forwards(batch.device):  # bfloat16 autocast at precision bf16 (science.precision)
            if start is None:
                preds.append(model(batch).argmax(-1).cpu())
            else:
                with start_at_layer(model, start[0], start[1][n]):
                    preds.append(model(batch).argmax(-1).cpu())
    return torch.cat(preds)


def per_sequence_accuracy(preds: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Token accuracy of each sequence: [n, L] × [n, L] → [n] in 0..1 (labels < 0, a file task's
    null labels, are not scored; a sequence without any scored label counts 0)."""
    seen = labels >= 0
    return ((preds == labels) & seen).float().sum(dim=1) / seen.sum(dim=1).clamp(min=1)


def majority_rate(labels: torch.Tensor) -> float:
    """Share of the most frequent class among all positions (the chance level we report against)."""
    lab = labels.reshape(-1)
    lab = lab[lab >= 0]  # a file task's null labels are not scored
    return float(torch.bincount(lab).max()) / lab.numel()
