"""Recurrent state a block carries along time: read it at every step, inject it, resume a run.

Activation patching at the ``state`` site (docs/SCIENCE.md#activation-patching) needs what the
library classes do not offer uniformly: the state a layer carries from position t to t+1 at
every t, and a run of the rest of the sequence starting from a given state. This module
computes the recurrent blocks itself, from the blocks' own parameters, on any device with plain
PyTorch (no ``mamba_ssm``):

- ``lstm``: state ``{"h": [B, D], "c": [B, D]}`` of the block's ``nn.LSTM``.
- ``gru``: state ``{"h": [B, D]}``.
- ``mamba``: ``{"ssm": [B, E, N], "conv": [B, k-1, E]}``: the selective-scan state and the
  Conv1D window (the last k-1 conv inputs), E = expand·d_model.
- ``mamba2``: the same with E = heads·head_dim and the window over the conv's
  E + 2N channels (x, B, C).

Why not transformers' cache: measured with transformers 5.24, Mamba (v1)'s pure-PyTorch path
ignores a carried ``ssm_state`` when the continuation is one multi-token call. Here the scan is
``models_store.fast_scan.selective_scan_states`` (a sequential scan with an initial state,
tested against the plain reference). The transformer has no recurrent state: ``stateful``
returns None for it.

Positions are *internal* steps: with a START token (``model.n_prefix`` = 1) real position t
is internal step t + n_prefix. Callers convert.

Shapes: tokens [B, L]; block inputs / outputs [B, T, D] with T = n_prefix + L.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from layerscope_core.registry import get_family
from models_store.base import LayerwiseModel, ResidualStackModel
from models_store.fast_scan import selective_scan_states

State = dict[str, torch.Tensor]


def window_conv(
    xc: torch.Tensor, window: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """Causal depthwise conv of xc [B, T, C] continuing after ``window`` [B, k-1, C] (the k-1
    conv inputs before xc; None = zeros, i.e. the sequence start). weight [C, 1, k] → [B, T, C]."""
    w = weight[:, 0, :]  # (C, k)
    k = w.shape[1]
    if window is None:
        window = xc.new_zeros(xc.shape[0], k - 1, xc.shape[2])
    xp = torch.cat([window.to(xc.dtype), xc], dim=1)  # (B, k-1+T, C)
    T = xc.shape[1]
    out = xp[:, k - 1 :] * w[:, k - 1]
    for j in range(k - 1):
        out = out + xp[:, j : j + T] * w[:, j]  # tap j reads position t - (k-1-j)
    return out if bias is None else out + bias


def window_at(xc: torch.Tensor, t: int, k: int) -> torch.Tensor:
    """The Conv1D window after step t: conv inputs t-k+2..t of xc [B, T, C] (zeros before 0) → [B, k-1, C]."""
    xp = F.pad(xc, (0, 0, k - 1, 0))
    return xp[:, t + 1 : t + k]


class Block:
    """One residual block computed step-wise. ``run(x, state0, keep)`` → (output [B, T, D],
    per-step states or None); ``state_at(states, t)`` → the state after internal step t."""

    parts: tuple[str, ...] = ()

    def run(self, x: torch.Tensor, state0: State | None, keep: bool) -> tuple[torch.Tensor, State | None]:
        raise NotImplementedError

    def state_at(self, states: State, t: int) -> State:
        return {k: v[:, t] for k, v in states.items()}


class _RNNBlock(Block):
    def __init__(self, block: nn.Module) -> None:
        self.block = block
        self.is_gru = isinstance(block.rnn, nn.GRU)
        self.parts = ("h",) if self.is_gru else ("h", "c")

    def run(self, x, state0, keep):
        rnn = self.block.rnn
        u = self.block.norm(x)  # (B, T, D)
        if self.is_gru:
            y, _ = rnn(u, None if state0 is None else state0["h"][None].contiguous())
            return self._out(x, y), ({"h": y} if keep else None)  # a GRU's output at t is its state h_t
        hc = None if state0 is None else (state0["h"][None].contiguous(), state0["c"][None].contiguous())
        if not keep:
            y, _ = rnn(u, hc)
            return self._out(x, y), None
        ys, cs = [], []  # nn.LSTM returns c only at the end: step it to read c at every t
        for t in range(u.shape[1]):
            y_t, hc = rnn(u[:, t : t + 1], hc)
            ys.append(y_t)
            cs.append(hc[1][0])
        y = torch.cat(ys, dim=1)  # (B, T, D)
        return self._out(x, y), {"h": y, "c": torch.stack(cs, dim=1)}

    def _out(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y if getattr(self.block, "residual", True) else y  # the stacked variants have no residual


class _MambaBlock(Block):
    """transformers' ``MambaBlock``: x + mixer(norm(x)), the mixer written out with state."""

    parts = ("ssm", "conv")

    def __init__(self, block: nn.Module) -> None:
        mixer: Any = block.mixer  # transformers' MambaMixer / Mamba2Mixer, its parts read by name
        self.block, self.mixer = block, mixer
        self.k = mixer.conv1d.weight.shape[-1]

    def run(self, x, state0, keep):
        m = self.mixer
        residual = x.float() if getattr(self.block, "residual_in_fp32", False) else x
        hs = self.block.norm(x.to(self.block.norm.weight.dtype))
        xc, z = m.in_proj(hs).chunk(2, dim=-1)  # (B, T, E) each
        u = m.act(window_conv(xc, None if state0 is None else state0["conv"], m.conv1d.weight, m.conv1d.bias))
        R, N = m.time_step_rank, m.ssm_state_size
        ts, Bm, Cm = torch.split(m.x_proj(u), [R, N, N], dim=-1)
        if hasattr(m, "b_layernorm"):  # Falcon-Mamba: weightless RMS norms on dt, B and C
            ts, Bm, Cm = m.dt_layernorm(ts), m.b_layernorm(Bm), m.c_layernorm(Cm)
        dt = F.softplus(m.dt_proj(ts))  # (B, T, E)
        A = -torch.exp(m.A_log.float()).to(dt.dtype)  # (E, N)
        y, hs_all = selective_scan_states(u, dt, A, Bm, Cm, None if state0 is None else state0["ssm"], keep)
        y = (y + u * m.D) * m.act(z)  # the library gates with its activation (SiLU)
        out = residual + m.out_proj(y.to(hs.dtype))
        return out.to(x.dtype), ({"ssm": hs_all, "conv": xc} if keep else None)

    def state_at(self, states, t):
        return {"ssm": states["ssm"][:, t], "conv": window_at(states["conv"], t, self.k)}


class _Mamba2Block(_MambaBlock):
    """transformers' ``Mamba2Block`` (one group): x + mixer(norm(x)) with state."""

    def run(self, x, state0, keep):
        m = self.mixer
        if m.n_groups != 1:
            raise NotImplementedError("state patching of Mamba-2 supports n_groups == 1")
        residual = x.float() if getattr(self.block, "residual_in_fp32", False) else x
        hs = self.block.norm(x.to(self.block.norm.weight.dtype))
        E, H, P, N = m.intermediate_size, m.num_heads, m.head_dim, m.ssm_state_size
        proj = m.in_proj(hs)
        d_mlp = (proj.shape[-1] - 2 * E - 2 * N - H) // 2
        if d_mlp:
            raise NotImplementedError("state patching of Mamba-2 needs in_proj without the extra MLP part")
        z, xBC, dt = proj.split([E, m.conv_dim, H], dim=-1)
        u = m.act(window_conv(xBC, None if state0 is None else state0["conv"], m.conv1d.weight, m.conv1d.bias))
        xs, Bm, Cm = u.split([E, N, N], dim=-1)
        dt = F.softplus(dt + m.dt_bias)  # (B, T, H)
        lo, hi = m.time_step_limit
        if lo > 0.0 or hi != float("inf"):
            dt = dt.clamp(lo, hi)
        A = (-torch.exp(m.A_log.float())).to(dt.dtype)[:, None].expand(H, N).repeat_interleave(P, dim=0)  # (E, N)
        y, hs_all = selective_scan_states(
            xs, dt.repeat_interleave(P, dim=-1), A, Bm, Cm, None if state0 is None else state0["ssm"], keep
        )
        y = y + xs * m.D.repeat_interleave(P)
        out = residual + m.out_proj(m.norm(y, z).to(hs.dtype))  # the library's gated RMSNorm
        return out.to(x.dtype), ({"ssm": hs_all, "conv": xBC} if keep else None)


@dataclass
class Trace:
    """One full run: ``inputs[ℓ]`` is the input of block ℓ [B, T, D] (``inputs[n]`` the head's
    input, i.e. the last block's output), ``states[ℓ]`` block ℓ's per-step states, ``last``
    the logits at the last position [B, C]."""

    inputs: list[torch.Tensor]
    states: list[State]
    last: torch.Tensor


class StatefulModel:
    """A ``LayerwiseModel`` of a recurrent family run block by block with readable states.

    ``trace(tokens)`` runs the whole sequence keeping every block's input and per-step state;
    ``resume(trace, layer, t0, x, state0)`` re-runs blocks ``layer..n-1`` on internal steps
    ``t0..T-1`` only (nothing before t0 is computed again) from block ``layer``'s input ``x``
    [B, T-t0, D] and its state ``state0`` (the states of later blocks at t0-1 are read from
    ``trace``), and returns the last-position logits [B, C].
    """

    def __init__(self, blocks: list[Block], embed, head, n_prefix: int = 0, parts: tuple[str, ...] = ()) -> None:
        """Args: ``blocks``; ``embed(tokens [B, L]) → [B, T, D]`` (prefix included); ``head(h [B, D])
        → logits [B, C]``; ``n_prefix`` internal steps before real position 0; the state ``parts``."""
        self.blocks, self.embed, self.head, self.n_prefix, self.parts = blocks, embed, head, n_prefix, parts

    @classmethod
    def from_model(cls, model: LayerwiseModel) -> StatefulModel:
        """The step-wise twin of ``model`` (same parameters), from its family's ``stateful`` hook.

        Raises:
            ValueError: a family without a recurrent state (the transformer), or an unknown family.
        """
        make = get_family(model.config.family).hook("stateful")
        if make is None:
            raise ValueError(f"family {model.config.family!r} has no recurrent state")
        return make(model)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def state_at(self, trace: Trace, layer: int, t: int) -> State | None:
        """Block ``layer``'s state after internal step t (None for t < 0: the start state)."""
        return None if t < 0 else self.blocks[layer].state_at(trace.states[layer], t)

    def state_after(self, trace: Trace, layer: int, t: int) -> State:
        """Block ``layer``'s state after internal step t ≥ 0.

        Raises:
            ValueError: t < 0 (before the first step there is only the start state).
        """
        if t < 0:
            raise ValueError(f"no state after step {t}: steps start at 0")
        return self.blocks[layer].state_at(trace.states[layer], t)

    @torch.no_grad()
    def trace(self, tokens: torch.Tensor) -> Trace:
        x = self.embed(tokens)
        inputs, states = [x], []
        for block in self.blocks:
            x, st = block.run(x, None, keep=True)
            if st is None:
                raise RuntimeError(f"{type(block).__name__}.run(keep=True) kept no states")
            inputs.append(x)
            states.append(st)
        return Trace(inputs, states, self.head(x[:, -1]))

    def injected(
        self, clean: Trace, corrupted: Trace, layer: int, t: int, parts: tuple[str, ...] | None = None
    ) -> State:
        """Block ``layer``'s corrupted state after internal step t with ``parts`` (None = all)
        taken from the clean run."""
        src, dst = self.state_after(clean, layer, t), self.state_after(corrupted, layer, t)
        return {k: (src[k] if parts is None or k in parts else v) for k, v in dst.items()}

    @torch.no_grad()
    def with_state(
        self, clean: Trace, corrupted: Trace, layer: int, t: int, parts: tuple[str, ...] | None = None
    ) -> torch.Tensor:
        """Last-position logits [B, C] of the corrupted run with block ``layer``'s state after
        internal step t (< T-1) replaced by the clean one (``parts``: only those; None = all)."""
        state = self.injected(clean, corrupted, layer, t, parts)
        return self.resume(corrupted, layer, t + 1, corrupted.inputs[layer][:, t + 1 :], state)

    @torch.no_grad()
    def resume(self, trace: Trace, layer: int, t0: int, x: torch.Tensor, state0: State | None) -> torch.Tensor:
        for j in range(layer, self.n_layers):
            s0 = state0 if j == layer else self.state_at(trace, j, t0 - 1)
            x, _ = self.blocks[j].run(x, s0, keep=False)
        return self.head(x[:, -1])


def stateful(model: LayerwiseModel) -> StatefulModel | None:
    """``StatefulModel(model)`` for a family with a ``stateful`` hook; None otherwise (the transformer)."""
    return StatefulModel.from_model(model) if get_family(model.config.family).stateful is not None else None


# --- per-family step-wise twins (FamilySpec.stateful) ------------------------------------------
def rnn_stateful(model: LayerwiseModel) -> StatefulModel:
    """lstm / gru / lstm_stack / gru_stack (``models_store.families.RecurrentModel``): state {"h", "c"} / {"h"}."""
    if not isinstance(model, ResidualStackModel):
        raise TypeError(f"a recurrent family's model is a ResidualStackModel, got {type(model).__name__}")
    blocks: list[Block] = [_RNNBlock(b) for b in model.block_modules()]

    def embed(tokens: torch.Tensor) -> torch.Tensor:
        return model.embed(model.with_prefix(tokens))

    def head(h: torch.Tensor) -> torch.Tensor:
        return model.head(model.norm_f(h))

    return StatefulModel(blocks, embed, head, model.n_prefix, blocks[0].parts if blocks else ())


def _ssm_stateful(model: LayerwiseModel, block_cls: type[_MambaBlock]) -> StatefulModel:
    from models_store.hf_model import HFLayerwiseModel  # transformers, imported for the Mamba families only

    if not isinstance(model, HFLayerwiseModel):
        raise TypeError(f"a Mamba family's model is an HFLayerwiseModel, got {type(model).__name__}")
    blocks: list[Block] = [block_cls(b) for b in model.block_modules()]

    def embed(tokens: torch.Tensor) -> torch.Tensor:
        return model.backbone.get_input_embeddings()(model.backbone_ids(model.with_prefix(tokens)))

    norm_f: Any = model.backbone.norm_f  # the Mamba backbones' final norm

    def head(h: torch.Tensor) -> torch.Tensor:
        return model.head(norm_f(h))

    return StatefulModel(blocks, embed, head, model.n_prefix, block_cls.parts)


def mamba_stateful(model: LayerwiseModel) -> StatefulModel:
    """mamba: state {"ssm": [B, E, N], "conv": [B, k-1, E]}."""
    return _ssm_stateful(model, _MambaBlock)


def mamba2_stateful(model: LayerwiseModel) -> StatefulModel:
    """mamba2: the same over Mamba-2's heads and its conv's E + 2N channels."""
    return _ssm_stateful(model, _Mamba2Block)
