"""The one interface every model family implements.

docs/SCIENCE.md#layers: **layer ℓ** is the residual stream after block ℓ (ℓ = 0..n-1) and ``emb`` (layer
-1) the embedding output. A ``LayerwiseModel`` names the modules whose *outputs* are exactly
those states (``embedding_module()``, ``block_modules()``), so capture and edits are forward
hooks on them (``models_store.capture``) and never depend on a library's ``hidden_states``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from layerscope_core.layers import layer_name  # the one definition (docs/SCIENCE.md#layers)
from models_store.model_config import ModelConfig


class LayerwiseModel(nn.Module):
    """A token-tagging sequence model with named residual-stream hook points.

    Subclasses set ``self.config`` (a ``ModelConfig``) and implement ``forward``,
    ``embedding_module`` and ``block_modules``. The head (final norm + linear) sits on top of
    the last block; its output is not a layer.
    """

    config: ModelConfig

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config

    # --- sizes -------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Number of blocks (layers 0..n_layers-1)."""
        return len(self.block_modules())

    @property
    def d_model(self) -> int:
        """Residual-stream width D."""
        return int(self.config.width)

    @property
    def n_params(self) -> int:
        """Actual number of parameters (every tensor in ``parameters()``)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def layers(self) -> list[int]:
        """Layer ids ``[-1, 0, ..., n_layers-1]`` (-1 = emb)."""
        return list(range(-1, self.n_layers))

    @property
    def layer_names(self) -> list[str]:
        """``["emb", "0", ..., str(n_layers-1)]``."""
        return [layer_name(layer) for layer in self.layers]

    @property
    def n_prefix(self) -> int:
        """Positions prepended inside ``forward`` (the START token): hook outputs are
        [B, n_prefix + L, D]; ``models_store.capture`` strips them, so callers see real positions."""
        return int(getattr(self.config, "start_token", False))

    def with_prefix(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, L] → [B, n_prefix + L], the START id (``config.vocab_size``) in front."""
        if not self.n_prefix:
            return tokens
        start = torch.full((tokens.shape[0], 1), self.config.vocab_size, dtype=tokens.dtype, device=tokens.device)
        return torch.cat([start, tokens], dim=1)

    # --- hook points -------------------------------------------------------------------
    def embedding_module(self) -> nn.Module:
        """The module whose output is the ``emb`` state [B, L, D]."""
        raise NotImplementedError

    def block_modules(self) -> list[nn.Module]:
        """The n blocks; block ℓ's output is layer ℓ's residual stream [B, L, D]."""
        raise NotImplementedError

    def hook_module(self, layer: int) -> nn.Module:
        """The module whose output is layer ``layer`` (-1 = emb).

        Raises:
            ValueError: ``layer`` outside -1..n_layers-1.
        """
        if isinstance(layer, bool) or not isinstance(layer, int) or not -1 <= layer < self.n_layers:
            raise ValueError(f"layer must be an int in -1..{self.n_layers - 1}, got {layer!r}")
        return self.embedding_module() if layer == -1 else self.block_modules()[layer]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: LongTensor [B, L] of task token ids → logits [B, L, n_classes]."""
        raise NotImplementedError


class ResidualStackModel(LayerwiseModel):
    """Embedding → n residual blocks → LayerNorm → Linear head: the skeleton of our own
    (non-library) families, which supply only the block (``make_block(d_model) → nn.Module``
    mapping [B, L, D] → [B, L, D], residual inside the block).

    Module names (``embed``, ``blocks``, ``norm_f``, ``head``) are the checkpoint's state-dict keys.
    """

    def __init__(self, config: ModelConfig, make_block: Callable[[int], nn.Module]) -> None:
        super().__init__(config)
        d = config.width
        self.embed = nn.Embedding(config.input_vocab_size, d)
        self.blocks = nn.ModuleList([make_block(d) for _ in range(config.n_layers)])
        self.norm_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.n_classes)

    def embedding_module(self) -> nn.Module:
        return self.embed

    def block_modules(self) -> list[nn.Module]:
        return list(self.blocks)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: LongTensor [B, L] → logits [B, L, C] (real positions only)."""
        h = self.embed(self.with_prefix(tokens))  # h: (B, P+L, D), P = n_prefix
        for block in self.blocks:
            h = block(h)  # h: (B, P+L, D)
        return self.head(self.norm_f(h[:, self.n_prefix :]))  # (B, L, C)
