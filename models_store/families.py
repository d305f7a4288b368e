"""The five built-in model families behind ``LayerwiseModel``, and ``build_model``.

``build_model`` calls the family's ``build`` hook from its ``FamilySpec``
(``layerscope_core.registry``); the per-family builders and transformers configs are below.

- ``transformer``: ``transformers.GPTNeoXModel`` (the Pythia architecture: rotary positions on
  ``rotary_pct`` of each head, parallel attention + MLP residual, 4·d MLP, causal attention).
- ``mamba``: ``transformers.MambaModel``. transformers picks each kernel when its module is
  imported: with ``mamba_ssm`` + ``causal_conv1d`` importable (CUDA machines) the mixer calls
  their kernels, otherwise its pure-PyTorch path (sequential scan on CPU). Nothing here forces
  either: we only pass ``use_cache=False``. ``models_store.fast_scan`` may patch the CPU scan.
- ``mamba2``: ``transformers.Mamba2Model`` (head dim 16, state 16, one group, chunk size from
  ``ModelConfig.mamba2_chunk_size``).
- ``lstm`` / ``gru``: one single-layer ``nn.LSTM`` / ``nn.GRU`` per block (``num_layers=4``
  would hide the inner layers' outputs), pre-norm residual:
  ``h_ℓ = h_{ℓ-1} + RNN_ℓ(LayerNorm_ℓ(h_{ℓ-1}))``, ``h_{-1}`` = token embedding.
- ``lstm_stack`` / ``gru_stack``: the plain stack that ``nn.LSTM(num_layers=n)`` computes, one
  module per layer so every layer's output is a hook point: ``h_ℓ = RNN_ℓ(h_{ℓ-1})``, no
  residual stream and no norm between layers (docs/SCIENCE.md#stacked-rnns).
- ``transformer`` with ``ModelConfig.learned_positions`` > 0: a learned absolute position table
  added to the token embedding (:class:`TokenAndPosition`), rotary kept.

Every family ends in the same head: final norm (the backbone's own ``final_layer_norm`` /
``norm_f`` for transformers models, a ``LayerNorm`` for the RNNs) then ``Linear(d, n_classes)``.

Attribute paths (for hooks and patches): ``model.backbone.get_input_embeddings()`` and
``model.backbone.layers[i]`` (blocks) for the transformers families;
``model.backbone.layers[i].mixer`` is the ``MambaMixer`` / ``Mamba2Mixer`` and
``...mixer.conv1d`` its depthwise causal conv; ``model.embed`` / ``model.blocks[i]`` for the RNNs.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    GPTNeoXConfig,
    GPTNeoXModel,
    Mamba2Config,
    Mamba2Model,
    MambaConfig,
    MambaModel,
    PreTrainedConfig,
    PreTrainedModel,
)

from layerscope_core.registry import get_family
from models_store.base import LayerwiseModel, ResidualStackModel
from models_store.hf_model import HFLayerwiseModel
from models_store.model_config import ModelConfig

# transformers-backed family → (config class, backbone class, model_type): rebuilding a
# pretrained checkpoint from its stored config dict needs the classes
HF_CLASSES: dict[str, tuple[type[PreTrainedConfig], type[PreTrainedModel], str]] = {
    "transformer": (GPTNeoXConfig, GPTNeoXModel, "gpt_neox"),
    "mamba": (MambaConfig, MambaModel, "mamba"),
    "mamba2": (Mamba2Config, Mamba2Model, "mamba2"),
}


class TokenAndPosition(nn.Module):
    """Token embedding + a learned absolute position table (GPT-2's ``wte + wpe``), used as a
    GPT-NeoX backbone's input embedding so the ``emb`` hook sees their sum.

    ``forward(ids [B, T]) -> [B, T, D]``; position t (0-based, the START token included) reads
    row t of ``position``. ``weight`` is the token table (what transformers reads off an input
    embedding).

    Raises:
        ValueError: T larger than the table (the message names both).
    """

    def __init__(self, token: nn.Embedding, n_positions: int) -> None:
        super().__init__()
        self.token = token
        self.position = nn.Embedding(n_positions, token.embedding_dim)
        nn.init.normal_(self.position.weight, std=0.02)  # GPT-2's initialisation of wpe

    @property
    def weight(self) -> torch.Tensor:
        return self.token.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n_pos = ids.shape[-1]
        if n_pos > self.position.num_embeddings:
            raise ValueError(
                f"sequence of {n_pos} positions is longer than the learned position table "
                f"({self.position.num_embeddings}); set ModelConfig.learned_positions higher"
            )
        pos = torch.arange(n_pos, device=ids.device)
        return self.token(ids) + self.position(pos)  # (B, T, D)


class RecurrentBlock(nn.Module):
    """One recurrent block with a single-layer ``rnn_cls`` (``nn.LSTM`` / ``nn.GRU``):
    ``x + RNN(LayerNorm(x))`` (``residual=True``), or the plain stacked layer ``RNN(x)``
    (``residual=False``: no norm, no residual, as ``nn.LSTM(num_layers=n)`` stacks)."""

    def __init__(self, rnn_cls: type[nn.LSTM] | type[nn.GRU], d_model: int, residual: bool = True) -> None:
        super().__init__()
        self.residual = residual
        self.norm = nn.LayerNorm(d_model) if residual else nn.Identity()
        self.rnn = rnn_cls(d_model, d_model, num_layers=1, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, L, D] → [B, L, D]."""
        y, _ = self.rnn(self.norm(x))  # y: (B, L, D)
        return x + y if self.residual else y  # (B, L, D)


class RecurrentModel(ResidualStackModel):
    """Embedding → n ``RecurrentBlock``s → LayerNorm → Linear (families ``lstm``, ``gru``; with
    ``residual=False`` the stacked ``lstm_stack``, ``gru_stack``).

    Weights use PyTorch's default initialisation.
    """

    def __init__(self, config: ModelConfig, rnn_cls: type[nn.LSTM] | type[nn.GRU], residual: bool = True) -> None:
        super().__init__(config, lambda d: RecurrentBlock(rnn_cls, d, residual))


def hf_config_for(cfg: ModelConfig) -> PreTrainedConfig:
    """The transformers config of a scratch (or, from ``cfg.hf_config``, pretrained) backbone.

    Raises:
        ValueError: ``cfg.family`` is not a transformers family, or ``cfg.hf_config`` is of
            another architecture.
    """
    make = get_family(cfg.family).hook("hf_config")
    if make is None or cfg.family not in HF_CLASSES:
        raise ValueError(f"family {cfg.family!r} has no transformers backbone")
    config_cls, _, model_type = HF_CLASSES[cfg.family]
    if cfg.hf_config is not None:
        got = cfg.hf_config.get("model_type")
        if got != model_type:
            raise ValueError(f"hf_config is a {got!r} config, family {cfg.family!r} needs {model_type!r}")
        return config_cls.from_dict(cfg.hf_config)
    return make(cfg)


def _common(cfg: ModelConfig) -> dict:
    """The config fields every scratch transformers backbone shares."""
    return dict(
        vocab_size=cfg.input_vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        use_cache=False,
        tie_word_embeddings=False,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
    )


# --- per-family transformers configs (FamilySpec.hf_config) ----------------------------------
def gpt_neox_config(cfg: ModelConfig) -> GPTNeoXConfig:
    """Pythia-style GPT-NeoX: 4·d MLP, parallel residual, rotary on ``rotary_pct`` of each head."""
    return GPTNeoXConfig(
        **_common(cfg),
        num_attention_heads=cfg.n_heads,
        intermediate_size=4 * cfg.width,
        hidden_act="gelu",
        rope_parameters={"rope_theta": 10_000, "partial_rotary_factor": cfg.rotary_pct, "rope_type": "default"},
        max_position_embeddings=cfg.max_position_embeddings,
        use_parallel_residual=True,
        attention_bias=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )


def mamba_config(cfg: ModelConfig) -> MambaConfig:
    """Mamba (v1): state ``d_state``, inner width ``expand·d``, conv kernel ``d_conv``."""
    return MambaConfig(
        **_common(cfg),
        state_size=cfg.d_state,
        expand=cfg.expand,
        conv_kernel=cfg.d_conv,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank="auto",
    )


def mamba2_config(cfg: ModelConfig) -> Mamba2Config:
    """Mamba-2: heads of ``mamba2_head_dim`` over the inner width ``expand·d``, one group."""
    E = cfg.expand * cfg.width
    return Mamba2Config(
        **_common(cfg),
        state_size=cfg.d_state,
        expand=cfg.expand,
        conv_kernel=cfg.d_conv,
        head_dim=cfg.mamba2_head_dim,
        num_heads=E // cfg.mamba2_head_dim,
        n_groups=1,
        chunk_size=cfg.mamba2_chunk_size,
        use_bias=False,
        use_conv_bias=True,
    )


# --- per-family builders (FamilySpec.build) ----------------------------------------------------
def _hf_model(cfg: ModelConfig) -> HFLayerwiseModel:
    if cfg.pretrained is not None:  # any transformers architecture, rebuilt from its stored config
        from models_store.any_model import build_from_hf_config

        return build_from_hf_config(cfg)
    _, backbone_cls, _ = HF_CLASSES[cfg.family]
    backbone = backbone_cls(hf_config_for(cfg))
    if cfg.learned_positions:
        embedding = backbone.get_input_embeddings()
        if not isinstance(embedding, nn.Embedding):
            raise TypeError(f"{cfg.family}: learned positions need an nn.Embedding, got {type(embedding).__name__}")
        backbone.set_input_embeddings(TokenAndPosition(embedding, cfg.learned_positions))
    return HFLayerwiseModel(cfg, backbone)


build_transformer = build_mamba = build_mamba2 = _hf_model


def build_lstm(cfg: ModelConfig) -> RecurrentModel:
    return RecurrentModel(cfg, nn.LSTM)


def build_gru(cfg: ModelConfig) -> RecurrentModel:
    return RecurrentModel(cfg, nn.GRU)


def build_lstm_stack(cfg: ModelConfig) -> RecurrentModel:
    return RecurrentModel(cfg, nn.LSTM, residual=False)


def build_gru_stack(cfg: ModelConfig) -> RecurrentModel:
    return RecurrentModel(cfg, nn.GRU, residual=False)


def build_model(cfg: ModelConfig, seed: int | None = None) -> LayerwiseModel:
    """A freshly initialised model of ``cfg``, on the CPU, in train mode (``nn.Module``'s default).

    For a pretrained config (``cfg.pretrained`` set) this builds the architecture from
    ``cfg.hf_config`` with random weights; the checkpoint store then loads the weights. To get
    the pretrained weights themselves use ``models_store.pretrained.load_pretrained``.

    Args:
        cfg: the model configuration; ``cfg.n_params`` is set to the built model's count.
        seed: if given, initialise under ``torch.manual_seed(seed)`` without touching the
            global RNG state; otherwise use the global RNG.

    Raises:
        ValueError: an invalid config (see ``ModelConfig``).
    """
    if seed is None:
        model = _build(cfg)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = _build(cfg)
    cfg.n_params = model.n_params
    return model


def _build(cfg: ModelConfig) -> LayerwiseModel:
    build = get_family(cfg.family).hook("build")
    if build is None:
        raise ValueError(f"family {cfg.family!r} has no build hook")
    return build(cfg)
