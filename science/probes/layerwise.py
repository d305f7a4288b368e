"""A probe at every layer of one run at one length (docs/SCIENCE.md#probes): the split by
sequence, the probe and its control-task twin per layer, and what each is scored on."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

from science.probes.design import Design, check_finite, check_width
from science.probes.linear import LinearProbe, fit_design, standardised
from science.probes.splits import control_labels, sequence_strata, split_sequences


@dataclass
class ProbeReport:
    """One layer's probe result (a row of ``probe_results`` without run/length/hash).

    ``accuracy``, ``balanced_accuracy`` (mean per-class recall over the classes present in the
    test labels) and ``majority_baseline`` are fractions 0..1 on the held-out sequences;
    ``per_position`` has L entries (accuracy at position t, 0-based, None where no labelled
    token); ``n_train`` / ``n_test`` count sequences. ``best_guess``: the best constant guess's
    accuracy on the held-out positions (their largest class share, 0..1), ``n_test_tokens``: those
    positions (not columns: what ``science.stats.chance_line`` reads). ``control_accuracy`` is the same probe on
    the control task (:func:`science.probes.control_labels`) and ``selectivity = accuracy −
    control_accuracy`` (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control
    Tasks", EMNLP, §2–3); both None when no input tokens were given. ``type_accuracy``: accuracy
    per token type (``{name: acc}``), None when no token types were given.
    """

    layer: int
    accuracy: float
    majority_baseline: float
    per_position: list[float | None]
    n_train: int
    n_test: int
    converged: bool
    n_iter: int
    grad_max: float
    balanced_accuracy: float | None = None
    control_accuracy: float | None = None
    selectivity: float | None = None
    type_accuracy: dict[str, float | None] | None = None
    best_guess: float | None = None
    n_test_tokens: int | None = None
    probe: LinearProbe | None = field(default=None, repr=False)

    def to_row(self) -> dict[str, Any]:
        """Plain dict of every field but the fitted probe object (``per_position`` copied)."""
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "probe"}
        row["per_position"] = list(self.per_position)
        row["type_accuracy"] = None if self.type_accuracy is None else dict(self.type_accuracy)
        return row


def type_accuracies(correct: Tensor, mask: Tensor, types: Tensor, names: tuple[str, ...]) -> dict[str, float | None]:
    """Accuracy per token type: ``{name: share of correct labelled test positions of that type}``
    (None for a type absent from the test positions). ``correct``, ``mask``, ``types``: ``[n, L]``."""
    out: dict[str, float | None] = {}
    for i, name in enumerate(names):
        m = mask & (types == i)
        out[name] = float((correct & m).sum()) / int(m.sum()) if int(m.sum()) else None
    return out


def _score(probe: LinearProbe, H: Tensor, y: Tensor, n_classes: int) -> tuple[Tensor, Tensor, float, float | None]:
    """(correct [n, L] bool, mask [n, L], accuracy, balanced accuracy) on labelled positions."""
    pred = probe.predict(H)
    m = y >= 0
    correct = (pred == y) & m
    acc = float(correct.sum()) / max(int(m.sum()), 1)
    recalls = []
    for c in range(n_classes):
        mc = (y == c) & m
        if int(mc.sum()) > 0:
            recalls.append(float((correct & mc).sum()) / int(mc.sum()))
    return correct, m, acc, (sum(recalls) / len(recalls)) if recalls else None


def _design_on(H: Tensor, labels: Tensor, tr: Tensor) -> Design:
    """The standardised design of the labelled positions of the training sequences ``tr`` of
    ``H [n, L, D]``: shared by the probe and its control twin (the control task labels the same
    positions)."""
    return standardised(H[tr][labels[tr] >= 0])  # X: [N_train_tokens, D]


def _fit_on(d: Design, labels: Tensor, tr: Tensor, n_classes: int, fit_kwargs: dict[str, Any]) -> LinearProbe:
    """A probe fitted on ``d``, the labelled positions of the training sequences ``tr``."""
    ytr = labels[tr]  # [n_tr, L]
    return fit_design(d, ytr[ytr >= 0], n_classes, **fit_kwargs)


def _majority_rate(labels: Tensor, tr: Tensor, te: Tensor, n_classes: int) -> float:
    """The share of the labelled test positions that hold the most frequent training class."""
    ytr, yte = labels[tr], labels[te]
    majority = int(torch.bincount(ytr[ytr >= 0], minlength=n_classes).argmax())
    mte = yte >= 0
    return float(((yte == majority) & mte).sum()) / max(int(mte.sum()), 1)


def best_guess(y: Tensor, n_classes: int) -> tuple[float, int]:
    """(the best constant guess's accuracy on the labelled entries of ``y`` — their largest class
    share, 0..1, 0 without any —, their number); entries < 0 are unlabelled. What a chance line
    reads (``science.stats.chance_line``: INLP's stop, the removal line)."""
    y = y[y >= 0]
    n = int(y.numel())
    return (float(torch.bincount(y, minlength=n_classes).max()) / n if n else 0.0), n


def _best_guess(labels: Tensor, te: Tensor, n_classes: int) -> tuple[float, int]:
    """:func:`best_guess` of the test sequences ``te``'s labels."""
    return best_guess(labels[te].reshape(-1), n_classes)


def _per_position(correct: Tensor, mask: Tensor) -> list[float | None]:
    """Test accuracy at each position ``[L]`` (None where no labelled test token)."""
    pos_n = mask.sum(0)
    pos_acc = correct.sum(0).double() / pos_n.clamp_min(1)
    return [float(a) if int(c) > 0 else None for a, c in zip(pos_acc.tolist(), pos_n.tolist())]


def _probe_layer(
    layer: int,
    H: Tensor,
    labels: Tensor,
    split: tuple[Tensor, Tensor],
    n_classes: int,
    *,
    ctrl: Tensor | None,
    token_types: Tensor | None,
    type_names: tuple[str, ...],
    keep_probes: bool,
    fit_kwargs: dict[str, Any],
) -> ProbeReport:
    """:func:`probe_layers` for one layer's states ``H [n, L, D]``."""
    dev = H.device
    lab = labels.to(dev)
    tr, te = split[0].to(dev), split[1].to(dev)
    design = _design_on(H, lab, tr)
    probe = _fit_on(design, lab, tr, n_classes, fit_kwargs)
    correct, mte, acc, bal = _score(probe, H[te], lab[te], n_classes)
    by_type = None
    if token_types is not None:
        by_type = type_accuracies(correct, mte, token_types.to(dev)[te], type_names)
    control = None
    if ctrl is not None:
        c_lab = ctrl.to(dev)
        if not torch.equal(c_lab >= 0, lab >= 0):
            raise ValueError("control labels must label the positions the real labels do")
        control = _score(_fit_on(design, c_lab, tr, n_classes, fit_kwargs), H[te], c_lab[te], n_classes)[2]
    best_guess, n_test_tokens = _best_guess(lab, te, n_classes)
    return ProbeReport(
        layer=layer,
        accuracy=acc,
        majority_baseline=_majority_rate(lab, tr, te, n_classes),
        per_position=_per_position(correct, mte),
        n_train=int(tr.numel()),
        n_test=int(te.numel()),
        converged=probe.converged,
        n_iter=probe.n_iter,
        grad_max=probe.grad_max,
        balanced_accuracy=bal,
        control_accuracy=control,
        selectivity=None if control is None else acc - control,
        type_accuracy=by_type,
        best_guess=best_guess,
        n_test_tokens=n_test_tokens,
        probe=probe if keep_probes else None,
    )


def _checked(states: Any, labels: Any, n_classes: int, tokens: Any) -> tuple[dict[int, Tensor], Tensor, Tensor | None]:
    """:func:`probe_layers`'s inputs as tensors, or a ValueError that says what is wrong with them
    (a notebook's numpy arrays, float or out-of-range labels: not a library's own error later)."""
    if not isinstance(states, dict) or not states:
        raise ValueError("states must be a non-empty dict {layer: [n, L, D] states}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes must be a whole number ≥ 1, got {n_classes!r}")
    try:
        labels = torch.as_tensor(labels)
        tokens = None if tokens is None else torch.as_tensor(tokens)
        states = {int(k): torch.as_tensor(v) for k, v in states.items()}
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"states, labels and tokens must be tensors or arrays: {e}") from None
    if labels.dim() != 2:
        raise ValueError(f"labels must be [n, L], got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be integer class ids (0..{n_classes - 1}; negative: unlabelled), got {labels.dtype}"
        )
    if labels.numel() and int(labels.max()) >= n_classes:
        raise ValueError(
            f"labels must lie in 0..{n_classes - 1} (negative: unlabelled) for n_classes {n_classes}, "
            f"got {int(labels.max())}"
        )
    for layer, H in states.items():
        if H.dim() != 3 or not H.is_floating_point():
            raise ValueError(f"layer {layer}: states must be floating-point [n, L, D], got {H.dtype} {tuple(H.shape)}")
        check_width(int(H.shape[-1]), f"layer {layer}: the states")
        check_finite(H, f"layer {layer}: the states")
    return states, labels.long(), tokens


def probe_layers(
    states: dict[int, Tensor],
    labels: Tensor,
    n_classes: int,
    seed: int = 0,
    test_frac: float = 0.2,
    *,
    tokens: Tensor | None = None,
    token_types: Tensor | None = None,
    type_names: tuple[str, ...] = (),
    ctx: Any = None,
    keep_probes: bool = True,
    **fit_kwargs: Any,
) -> dict[int, ProbeReport]:
    """Probe every layer of one run at one length.

    Args:
        states: ``{layer: [n, L, D]}`` frozen states (layer −1 = emb); all on one device.
        labels: ``[n, L]`` labels in ``0..n_classes-1``; entries < 0 are ignored (unlabelled).
        n_classes: C.
        seed, test_frac: the split, 80/20 **by sequence**, stratified by each sequence's label mix
            (:func:`science.probes.sequence_strata`, :func:`science.probes.split_sequences`), the
            same sequences for every layer.
        tokens: ``[n, L]`` input tokens; when given, each layer also gets a probe on the control
            task (:func:`science.probes.control_labels`, same settings, same split) and its
            selectivity.
        token_types, type_names: ``[n, L]`` token type ids and their names; when given, each
            report carries the probe's test accuracy per token type (:func:`type_accuracies`).
        ctx: optional ``JobContext`` (progress per layer, cancel checks).
        keep_probes: attach the fitted :class:`LinearProbe` to each report.
        **fit_kwargs: passed to :func:`science.probes.fit_probe` (C, tol, max_iter, ...).

    Returns:
        ``{layer: ProbeReport}``: test accuracy and balanced accuracy on every labelled position
        of the held-out sequences, the majority baseline (most frequent training class, scored
        on the test positions), per-position test accuracy (L values), n_train/n_test
        sequences, convergence, and (with ``tokens``) control accuracy and selectivity. Layers
        are fitted one after another: each fit's cost is two ``[N, D] × [D, C]`` products per
        evaluation, so stacking layers into one block-diagonal problem would save only Python
        overhead while tying every layer to one line search and one iteration count.

    Raises:
        ValueError: ``states`` is empty, a layer's states are not floating-point ``[n, L, D]``
            matching ``labels`` ``[n, L]``, or the labels are not integers in ``0..n_classes-1``
            (negative: unlabelled). Tensors or arrays (numpy) are taken.
    """
    states, labels, tokens = _checked(states, labels, n_classes, tokens)
    n, L = labels.shape
    n_test = min(max(1, round(n * test_frac)), n - 1) if n >= 2 else 1
    strata = sequence_strata(labels, n_classes, max_strata=min(n_test, n - n_test))
    split = split_sequences(n, test_frac, seed, strata=strata)
    ctrl = control_labels(tokens, labels, n_classes, seed) if tokens is not None else None
    out: dict[int, ProbeReport] = {}
    layers = sorted(states)
    for i, layer in enumerate(layers):
        if ctx is not None:
            ctx.check_cancelled()
        H = states[layer]
        if H.shape[:2] != (n, L):
            raise ValueError(f"layer {layer}: states {tuple(H.shape)} do not match labels {(n, L)}")
        out[layer] = _probe_layer(
            layer,
            H,
            labels,
            split,
            n_classes,
            ctrl=ctrl,
            token_types=token_types,
            type_names=type_names,
            keep_probes=keep_probes,
            fit_kwargs=fit_kwargs,
        )
        if ctx is not None:
            ctx.progress((i + 1) / len(layers), f"probe layer {layer}: {out[layer].accuracy:.3f}")
    return out
