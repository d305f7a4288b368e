"""Read and edit the residual stream of any ``LayerwiseModel`` with forward hooks.

Layer ids follow docs/SCIENCE.md#layers: -1 = ``emb`` (the embedding module's output),
0..n-1 = the output of block ℓ. Hooks sit on ``model.hook_module(layer)``, so one forward pass
gives every layer's state (no per-layer re-runs), on every backend (CPU torch paths, CUDA
kernels) and for every family alike.

A hooked module's output may be a tensor or a tuple whose first element is the hidden state
(older transformers blocks return tuples; in transformers 5.24 GPT-NeoX, Mamba and Mamba-2
blocks return tensors). Both are handled: only the first element is read or replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from models_store.base import LayerwiseModel

EditFn = Callable[[torch.Tensor], torch.Tensor]


def hidden_state(output: object) -> torch.Tensor:
    """The hidden-state tensor of a hooked module's output (tensor or tuple/list head)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"cannot find the hidden state in a module output of type {type(output).__name__}")


def _replace_hidden(output: object, new: torch.Tensor) -> object:
    if isinstance(output, torch.Tensor):
        return new
    if isinstance(output, list):
        return type(output)([new, *output[1:]])
    if isinstance(output, tuple):
        return (new, *output[1:])
    raise TypeError(f"cannot replace the hidden state in a module output of type {type(output).__name__}")


def _resolve_layers(model: LayerwiseModel, layers: Iterable[int] | None) -> list[int]:
    if layers is None:
        return model.layers
    out = sorted(set(layers))
    for layer in out:
        model.hook_module(layer)  # validates the id
    return out


def run_with_states(
    model: LayerwiseModel,
    tokens: torch.Tensor,
    layers: Iterable[int] | None = None,
    detach: bool = True,
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """Logits and residual-stream states from ONE forward pass.

    Args:
        model: any ``LayerwiseModel``.
        tokens: LongTensor [B, L].
        layers: layer ids to keep (-1 = emb); ``None`` → all of -1..n_layers-1.
        detach: detach the stored states from the autograd graph (default).

    Returns:
        (logits [B, L, C], {layer: state [B, L, D]}) with the dict ordered by layer. States
        include any edits active on earlier layers (``edit_layer``) and, for a layer that is
        itself edited, the edited output.

    Raises:
        ValueError: a layer id outside -1..n_layers-1.
    """
    wanted = _resolve_layers(model, layers)
    logits, outputs = module_outputs(model, tokens, wanted)
    states = {}
    for layer, output in outputs.items():
        h = hidden_state(output)[:, model.n_prefix :]  # h: (B, L, D), real positions only
        states[layer] = h.detach() if detach else h
    missing = [layer for layer in wanted if layer not in states]
    if missing:
        raise RuntimeError(f"layers {missing} produced no output during the forward pass")
    return logits, {layer: states[layer] for layer in wanted}


class _StopForward(Exception):
    """Raised by the hook of the deepest wanted layer to end a forward pass there (never escapes)."""


def states_through(
    model: LayerwiseModel,
    tokens: torch.Tensor,
    layers: Iterable[int],
    sink: Callable[[int, torch.Tensor], None] | None = None,
) -> dict[int, torch.Tensor]:
    """Residual-stream states ``{layer: [B, L, D]}`` (detached) from a forward pass that stops
    after the deepest of ``layers``: the blocks after it and the head are not run (nnsight's
    ``stop()``, TransformerLens's ``stop_at_layer``). The states are those of the full pass, bit
    for bit (a block never reads a later one); the work saved is the blocks after the deepest
    layer, what a capture for fits needs no predictions from.

    Args:
        tokens: LongTensor [B, L].
        layers: layer ids (-1 = emb), at least one.
        sink: called as ``sink(layer, state [B, L, D])`` the moment each layer is computed, which
            then is not kept (the result is empty): a pass over every layer holds one layer's
            states at a time (``science.spilled_capture`` writes them to disk).

    Raises:
        ValueError: no layer, or a layer id outside -1..n_layers-1.
        RuntimeError: a layer's module produced no output before the pass stopped.
    """
    wanted = _resolve_layers(model, layers)
    if not wanted:
        raise ValueError("states_through needs at least one layer")
    outputs: dict[int, object] = {}
    seen: list[int] = []
    last = wanted[-1]

    def after(layer: int, output: object) -> None:
        seen.append(layer)
        if sink is not None:
            sink(layer, hidden_state(output)[:, model.n_prefix :].detach())  # (B, L, D)
            del outputs[layer]
        if layer == last:
            raise _StopForward

    _stopped_forward(model, tokens, wanted, outputs, after, seen)
    return {layer: hidden_state(outputs[layer])[:, model.n_prefix :].detach() for layer in outputs}  # (B, L, D)


def output_through(model: LayerwiseModel, tokens: torch.Tensor, layer: int) -> dict[int, object]:
    """``{layer: output}``: the hook module's output of ``layer`` exactly as it returned it (tensor
    or tuple, START prefix included) from a forward pass that stops there — what
    :func:`start_at_layer` replays for a forward on the same tokens, without the blocks after it.

    Raises:
        ValueError: a layer id outside -1..n_layers-1.
        RuntimeError: the layer's module produced no output before the pass stopped.
    """
    (wanted,) = _resolve_layers(model, [layer])
    outputs: dict[int, object] = {}
    seen: list[int] = []

    def after(k: int, output: object) -> None:
        seen.append(k)
        raise _StopForward

    _stopped_forward(model, tokens, [wanted], outputs, after, seen)
    return outputs


def _stopped_forward(
    model: LayerwiseModel,
    tokens: torch.Tensor,
    wanted: list[int],
    outputs: dict[int, object],
    after: Callable[[int, object], None],
    seen: list[int],
) -> None:
    """:func:`_forward_with_outputs` until ``after`` raises :class:`_StopForward` (after the deepest
    of ``wanted``, which it appends to ``seen`` as each is computed).

    Raises:
        RuntimeError: a layer of ``wanted`` produced no output before the pass stopped.
    """
    try:
        _forward_with_outputs(model, tokens, wanted, outputs, after=after)
    except _StopForward as stop:
        stop.__traceback__ = None  # the stopped forward's frames (and their tensors) freed now, not at a later gc
    missing = [layer for layer in wanted if layer not in seen]
    if missing:
        raise RuntimeError(f"layers {missing} produced no output before the forward pass stopped")


def _forward_with_outputs(
    model: LayerwiseModel,
    tokens: torch.Tensor,
    layers: Iterable[int],
    outputs: dict[int, object],
    after: Callable[[int, object], None] | None = None,
) -> torch.Tensor:
    """``model(tokens)`` with every hook module of ``layers`` recording its output in ``outputs``
    (then calling ``after(layer, output)``, which may raise to end the pass); hooks removed on exit."""
    handles = []

    def make_hook(layer: int):
        def hook(module: nn.Module, args: tuple, output: object) -> None:
            outputs[layer] = output
            if after is not None:
                after(layer, output)

        return hook

    try:
        for layer in layers:
            handles.append(model.hook_module(layer).register_forward_hook(make_hook(layer)))
        return model(tokens)  # (B, L, C)
    finally:
        for handle in handles:
            handle.remove()


def module_outputs(
    model: LayerwiseModel, tokens: torch.Tensor, layers: Iterable[int] | None = None
) -> tuple[torch.Tensor, dict[int, object]]:
    """Logits and the output of the hook modules of ``layers`` (None: every layer, -1..n-1)
    exactly as each returned it (tensor or tuple, START prefix included), from ONE forward pass:
    what :func:`run_with_states` reads states from and :func:`start_at_layer` replays.

    Args:
        tokens: LongTensor [B, L].

    Returns:
        (logits [B, L, C], {layer: output}) for the layers that produced an output.
    """
    outputs: dict[int, object] = {}
    logits = _forward_with_outputs(model, tokens, model.layers if layers is None else layers, outputs)
    return logits, outputs


@contextmanager
def start_at_layer(model: LayerwiseModel, layer: int, outputs: Mapping[int, object]) -> Iterator[LayerwiseModel]:
    """Inside the block a forward pass computes only the blocks after ``layer`` and the head: the
    hook modules of layers -1..``layer`` are not run; ``layer``'s returns ``outputs[layer]`` (recorded by
    :func:`module_outputs` on the same tokens), as TransformerLens's ``start_at_layer`` starts a
    forward from a cached residual stream. Edits on ``layer`` (:func:`edit_layer`) still apply:
    forward hooks run on the returned output. An edit at layer ℓ cannot change what layers ≤ ℓ
    compute, so the logits are those of the full forward pass, bit for bit (the same modules on
    the same inputs), for a fraction of its cost: the blocks before the edit are the work saved.

    Only ``outputs[layer]`` is read (the stored input of the blocks after it; a measurement keeps
    no other layer's): the modules before it return it too, unread, since they feed only modules
    that are not run. The modules read none of their inputs meanwhile: ``outputs`` must come from
    the very tokens (and batch) of the forward pass inside the block.

    Raises:
        ValueError: ``layer`` outside -1..n_layers-1, or ``outputs`` without ``layer``.
    """
    model.hook_module(layer)  # validates the id
    if layer not in outputs:
        raise ValueError(f"start_at_layer({layer}) needs the recorded output of layer {layer}")
    kept = outputs[layer]
    saved: list[tuple[nn.Module, Callable[..., object] | None]] = []  # a module's own forward, if any
    try:
        for k in range(-1, layer + 1):
            module = model.hook_module(k)
            saved.append((module, module.__dict__.get("forward")))
            # the modules before ``layer`` feed only modules that are not run: any output of the
            # right shape does (the emb module's output is a tensor, a block's may be a tuple)
            early = hidden_state(kept) if k == -1 else kept
            module.forward = _replay(kept if k == layer else early, fresh=k == layer)
        yield model
    finally:
        for module, own in saved:
            if own is None:
                del module.forward
            else:
                module.forward = own


def _replay(output: object, fresh: bool) -> Callable[..., object]:
    """A forward that returns ``output`` whatever its inputs; ``fresh``: a copy of its hidden state
    each call (the output the later blocks compute from, whatever they do in place)."""
    if not fresh:
        return lambda *args, **kwargs: output
    return lambda *args, **kwargs: _replace_hidden(output, hidden_state(output).clone())


@contextmanager
def _autocast_off(device_type: str) -> Iterator[None]:
    """Autocast off for ``device_type`` inside the block; nothing at all where it is not on."""
    if not torch.is_autocast_enabled(device_type):
        yield
        return
    with torch.autocast(device_type=device_type, enabled=False):
        yield


@contextmanager
def edit_layers(model: LayerwiseModel, fns: Mapping[int, EditFn]) -> Iterator[LayerwiseModel]:
    """Replace several layers' outputs at once: layer ℓ's output h becomes ``fns[ℓ](h)``.

    Each ``fn`` receives the full state h [B, L, D] (after any edit on earlier layers) and
    must return a tensor of the same shape; it may return a modified clone (do not rely on
    in-place writes to h). The result is cast to h's dtype and device. ``fn`` runs with autocast
    off (a bfloat16 forward, ``science.precision``, edits in the edit's own float32 / float64
    arithmetic, not in bfloat16). Hooks are removed on exit, also when the body raises.

    Raises:
        ValueError: a layer id outside -1..n_layers-1, or (during the forward) an ``fn``
            result whose shape differs from h's.
    """
    items = [(layer, fns[layer]) for layer in _resolve_layers(model, fns.keys())]
    p = model.n_prefix
    handles = []

    def make_hook(layer: int, fn: EditFn):
        def hook(module: nn.Module, args: tuple, output: object) -> object:
            full = hidden_state(output)  # full: (B, P+L, D), P = the START prefix, never edited
            h = full[:, p:]  # h: (B, L, D)
            with _autocast_off(h.device.type):  # an edit computes in its own dtypes, not autocast's
                new = fn(h)
            if not isinstance(new, torch.Tensor) or new.shape != h.shape:
                got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
                raise ValueError(f"edit of layer {layer} must return a tensor of shape {tuple(h.shape)}, got {got}")
            new = new.to(dtype=h.dtype, device=h.device)
            return _replace_hidden(output, torch.cat([full[:, :p], new], dim=1) if p else new)

        return hook

    try:
        for layer, fn in items:
            handles.append(model.hook_module(layer).register_forward_hook(make_hook(layer, fn)))
        yield model
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def edit_layer(model: LayerwiseModel, layer: int, fn: EditFn) -> Iterator[LayerwiseModel]:
    """Replace layer ``layer``'s output h [B, L, D] by ``fn(h)`` inside the ``with`` block.

    ``layer`` = -1 edits the embedding output. See ``edit_layers`` for the contract of ``fn``.
    Example (activation patching at one position)::

        _, clean = run_with_states(model, clean_tokens, layers=[3])
        with edit_layer(model, 3, patch_positions(clean[3], [20])):
            patched_logits = model(corrupted_tokens)

    Raises:
        ValueError: ``layer`` outside -1..n_layers-1, or a wrongly shaped ``fn`` result.
    """
    with edit_layers(model, {layer: fn}) as m:
        yield m


def patch_positions(source: torch.Tensor, positions: Sequence[int] | slice | torch.Tensor) -> EditFn:
    """An edit fn writing ``source`` at ``positions`` (all sequences) and keeping the rest.

    Args:
        source: [B, L, D] states of the clean run (same batch and length as the edited run).
        positions: position indices, a slice, or a bool/long index tensor over L.

    Returns:
        fn(h [B, L, D]) → a clone of h with ``h[:, positions] = source[:, positions]``.
    """

    def fn(h: torch.Tensor) -> torch.Tensor:  # h: (B, L, D)
        if source.shape != h.shape:
            raise ValueError(f"patch source shape {tuple(source.shape)} != edited state shape {tuple(h.shape)}")
        out = h.clone()
        out[:, positions] = source[:, positions].to(device=h.device, dtype=h.dtype)
        return out  # (B, L, D)

    return fn
