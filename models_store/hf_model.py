"""``HFLayerwiseModel``: a transformers backbone with a token head, the ``LayerwiseModel`` of every
transformers-backed family (built-in ones in ``models_store.families``, any other architecture in
``models_store.any_model``); a module of its own so both import it without importing each other."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from models_store import fast_scan
from models_store.base import LayerwiseModel
from models_store.model_config import ModelConfig


class HFLayerwiseModel(LayerwiseModel):
    """A transformers backbone (GPT-NeoX, Mamba, Mamba-2) + a linear token head.

    ``forward`` runs the backbone (embedding → blocks → its final norm) without a cache and
    applies ``head``. For pretrained models a ``token_map`` buffer maps task ids to the
    backbone's vocabulary first.
    """

    token_map: torch.Tensor | None  # a buffer: task id → backbone vocabulary id (pretrained models)

    def __init__(self, config: ModelConfig, backbone: PreTrainedModel) -> None:
        super().__init__(config)
        self.backbone = backbone
        self.backbone.config.use_cache = False
        fast_scan.install(backbone)  # fast CPU Mamba/Mamba-2 mixers; a no-op for GPT-NeoX
        d = backbone.config.hidden_size
        self.head = nn.Linear(d, config.n_classes)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        tm = None if config.token_map is None else torch.tensor(config.token_map, dtype=torch.long)
        self.register_buffer("token_map", tm, persistent=False)

    def embedding_module(self) -> nn.Module:
        return self.backbone.get_input_embeddings()

    def block_modules(self) -> list[nn.Module]:
        layers = self.backbone.layers  # GPT-NeoX's, Mamba's and Mamba-2's blocks
        if not isinstance(layers, nn.ModuleList):
            raise TypeError(f"{type(self.backbone).__name__}.layers is not a ModuleList of blocks")
        return list(layers)

    def backbone_ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """Task token ids [B, L] → backbone vocabulary ids [B, L] (identity without a token map)."""
        return tokens if self.token_map is None else self.token_map[tokens]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: LongTensor [B, L] → logits [B, L, C] (real positions only)."""
        ids = self.backbone_ids(self.with_prefix(tokens))  # ids: (B, P+L), P = n_prefix
        h = self.backbone(input_ids=ids, use_cache=False).last_hidden_state  # h: (B, P+L, D), after final norm
        return self.head(h[:, self.n_prefix :])  # (B, L, C)

    def library_hidden_states(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """transformers' own ``output_hidden_states`` for ``tokens`` [B, L] (tests compare it).

        Not uniform across families (measured): GPT-NeoX gives (emb, block 0..n-2,
        final_norm(block n-1)); Mamba / Mamba-2 give (block 0..n-1, final_norm(block n-1)).
        """
        out = self.backbone(
            input_ids=self.backbone_ids(self.with_prefix(tokens)), use_cache=False, output_hidden_states=True
        )
        return tuple(h[:, self.n_prefix :] for h in out.hidden_states)
