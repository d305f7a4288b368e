"""Conv1D removal for Mamba and Mamba-2 (docs/SCIENCE.md#conv1d-removal).

Each Mamba(-2) mixer runs a depthwise causal conv (kernel k) over its inner channels before the
SiLU and the selective scan. "Removing" it means the conv passes the current token through:
``conv(x)_t = x_t``. We do that by swapping the conv's weights in place for a delta on the last
tap (the tap that reads position t under causal left-padding of k-1) and a zero bias; the SiLU
that follows the conv stays. Because every transformers code path (the pure-PyTorch
``causal_conv1d_fn``, the ``causal_conv1d`` CUDA kernel, the fused ``mamba_inner_fn`` /
``mamba_split_conv1d_scan_combined`` training kernels) reads ``mixer.conv1d.weight`` and
``.bias``, the removal is backend independent. The original weights are restored on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from models_store.base import LayerwiseModel


def conv_modules(model: LayerwiseModel) -> list[nn.Conv1d]:
    """The depthwise causal conv of each block, in layer order; [] for families without one.

    Found as ``block.mixer.conv1d`` (transformers' Mamba / Mamba-2 blocks).
    """
    convs = []
    for block in model.block_modules():
        conv = getattr(getattr(block, "mixer", None), "conv1d", None)
        if isinstance(conv, nn.Conv1d):
            convs.append(conv)
    return convs


def identity_conv_weight(conv: nn.Conv1d) -> torch.Tensor:
    """The depthwise weight [C, 1, k] that makes a causal conv pass position t through."""
    w = torch.zeros_like(conv.weight)  # (C, 1, k)
    w[:, :, -1] = 1.0
    return w


@contextmanager
def remove_conv1d(model: LayerwiseModel, layer: int | None = None) -> Iterator[int]:
    """Replace the causal Conv1D of one layer (``layer``) or every layer (``None``) by identity.

    Yields:
        The number of convs edited: n_layers or 1 for Mamba / Mamba-2, 0 for the other
        families (then a no-op).

    Raises:
        ValueError: ``layer`` is not None and not in 0..n_layers-1, or the family has convs
            but layer ``layer`` has none.
    """
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < model.n_layers):
        raise ValueError(f"layer must be None or an int in 0..{model.n_layers - 1}, got {layer!r}")
    all_convs = conv_modules(model)
    if not all_convs:
        yield 0
        return
    if layer is None:
        targets = all_convs
    else:
        conv = getattr(getattr(model.block_modules()[layer], "mixer", None), "conv1d", None)
        if not isinstance(conv, nn.Conv1d):
            raise ValueError(f"layer {layer} has no Conv1D")
        targets = [conv]
    saved: list[tuple[nn.Conv1d, torch.Tensor, torch.Tensor | None]] = []
    try:
        with torch.no_grad():
            for conv in targets:
                bias = None if conv.bias is None else conv.bias.detach().clone()
                saved.append((conv, conv.weight.detach().clone(), bias))
                conv.weight.copy_(identity_conv_weight(conv))
                if conv.bias is not None:
                    conv.bias.zero_()
        yield len(targets)
    finally:
        with torch.no_grad():
            for conv, weight, bias in saved:
                conv.weight.copy_(weight)
                if bias is not None and conv.bias is not None:  # the bias was saved from conv.bias
                    conv.bias.copy_(bias)
