"""Any transformers model as a ``LayerwiseModel``: layers found from the loaded model itself.

``AnyHFModel`` wraps the base model transformers' ``AutoModel`` builds for a config (GPT-2,
GPT-NeoX, Llama, Qwen2, Mistral, Mamba, Mamba-2, Falcon-Mamba, …) and finds its hook points by
looking at the module tree, not at a table per ``model_type``:

- blocks: the ``nn.ModuleList`` whose length is the config's layer count
  (``num_hidden_layers``; GPT-2's ``n_layer`` maps onto it), the shallowest one if several;
- ``emb`` (layer -1): the input of block 0. When the input embedding's output is not that
  input (checked with one 2-token forward at construction: GPT-2 adds learned positions first)
  it is the output of ``emb_tap``, an identity module called by a forward pre-hook on block 0,
  so hooks see the embedding *after* what the architecture adds; otherwise the embedding module;
- the family (``transformer`` / ``mamba`` / ``mamba2``) from what a block holds: a Mamba-2 mixer
  (``A_log`` and ``dt_bias``), a Mamba mixer (``A_log`` and ``x_proj``), or attention.

Architectures without those parts are refused with one line naming the model type and what is
missing (``UnsupportedModel``, a ``ValueError``). A checkpoint rebuilds from the stored config
dict (``build_from_hf_config``) without the hub.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, PreTrainedConfig, PreTrainedModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from layerscope_core.model_sources import (
    custom_code_problem,
    hub_reads_offline,
    is_folder,
    missing_folder_problem,
)
from models_store.hf_model import HFLayerwiseModel
from models_store.model_config import ModelConfig


class PretrainedLoadError(ValueError):
    """A pretrained model could not be loaded (not found, unreachable, or unsupported)."""


ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")


class UnsupportedModel(ValueError):
    """A transformers architecture layerscope cannot measure (the message names what is missing)."""


def layer_count(hf_cfg: PreTrainedConfig) -> int:
    """The config's number of blocks (``num_hidden_layers``).

    Raises:
        UnsupportedModel: the config has no positive integer layer count.
    """
    n = getattr(hf_cfg, "num_hidden_layers", None)
    if n is None:
        raise UnsupportedModel(
            f"model type {hf_cfg.model_type!r} is not supported: its config has no "
            "num_hidden_layers (the number of blocks)"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PretrainedLoadError(f"num_hidden_layers must be a whole number ≥ 1 (the number of blocks), got {n!r}")
    return n


def find_blocks(backbone: nn.Module, n_layers: int, model_type: str = "?") -> tuple[str, nn.ModuleList]:
    """The block list of ``backbone``: (attribute path, ``nn.ModuleList`` of ``n_layers`` modules).

    The shallowest ``ModuleList`` of exactly ``n_layers`` modules wins (``layers``, ``h``, …).

    Raises:
        UnsupportedModel: no such list, or two at the same depth (the blocks are ambiguous).
    """
    found = [
        (name, m)
        for name, m in backbone.named_modules()
        if isinstance(m, nn.ModuleList) and len(m) == n_layers and name
    ]
    if not found:
        raise UnsupportedModel(
            f"model type {model_type!r} is not supported: no block list of "
            f"num_hidden_layers={n_layers} modules in {type(backbone).__name__}"
        )
    depth = min(name.count(".") for name, _ in found)
    top = [(name, m) for name, m in found if name.count(".") == depth]
    if len(top) > 1:
        raise UnsupportedModel(
            f"model type {model_type!r} is not supported: its block list is ambiguous "
            f"({', '.join(n for n, _ in top)} all hold {n_layers} modules)"
        )
    return top[0]


def block_family(blocks: nn.ModuleList, model_type: str = "?") -> str:
    """``transformer``, ``mamba`` or ``mamba2`` from the blocks' parts (all blocks must agree).

    Raises:
        UnsupportedModel: a block with neither attention nor a Mamba mixer, or mixed block kinds.
    """
    kinds = set()
    for block in blocks:
        mixer = getattr(block, "mixer", None)
        if mixer is not None and hasattr(mixer, "A_log") and hasattr(mixer, "dt_bias"):
            kinds.add("mamba2")
        elif mixer is not None and hasattr(mixer, "A_log") and hasattr(mixer, "x_proj"):
            kinds.add("mamba")
        elif any(hasattr(block, a) for a in ATTENTION_NAMES):
            kinds.add("transformer")
        else:
            raise UnsupportedModel(
                f"model type {model_type!r} is not supported: block {type(block).__name__} "
                f"has neither attention ({'/'.join(ATTENTION_NAMES)}) nor a Mamba mixer"
            )
    if len(kinds) != 1:
        raise UnsupportedModel(
            f"model type {model_type!r} is not supported: its blocks mix {sorted(kinds)} "
            "(hybrid stacks have no single family)"
        )
    return kinds.pop()


def check_architecture(hf_cfg: PreTrainedConfig) -> None:
    """Refuse what cannot be a stack of residual blocks before any weights are read.

    Raises:
        UnsupportedModel: an encoder-decoder, a config without a layer count, or a model type
            transformers' ``AutoModel`` does not know.
    """
    model_type = getattr(hf_cfg, "model_type", None)
    if getattr(hf_cfg, "is_encoder_decoder", False):
        raise UnsupportedModel(
            f"model type {model_type!r} is not supported: it is an encoder-decoder; a single stack of blocks is missing"
        )
    layer_count(hf_cfg)
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    if type(hf_cfg) not in MODEL_MAPPING:
        raise UnsupportedModel(
            f"model type {model_type!r} is not supported: transformers' AutoModel has no base model class for it"
        )


class AnyHFModel(HFLayerwiseModel):
    """A transformers base model + a linear token head, hook points found from its modules.

    Attributes:
        blocks_path: attribute path of the block list inside ``backbone`` (``"layers"``, ``"h"``).
        emb_tap: identity whose output is the ``emb`` state [B, L, D] (block 0's input), used
            when ``tapped`` (the embedding module's own output is not block 0's input).

    Raises:
        UnsupportedModel: see ``find_blocks`` / ``block_family``, or no input embedding.
    """

    def __init__(self, config: ModelConfig, backbone: PreTrainedModel) -> None:
        model_type = backbone.config.model_type
        if not isinstance(backbone.get_input_embeddings(), nn.Module):
            raise UnsupportedModel(f"model type {model_type!r} is not supported: it has no input embedding")
        self.blocks_path, blocks = find_blocks(backbone, layer_count(backbone.config), model_type)
        super().__init__(config, backbone)
        self._blocks = [blocks]  # a list, so the ModuleList is not registered twice
        self.emb_tap = nn.Identity()
        self.tapped = not self._embedding_feeds_block0()
        if self.tapped:
            blocks[0].register_forward_pre_hook(self._tap_block0_input, with_kwargs=True)

    @torch.no_grad()
    def _embedding_feeds_block0(self) -> bool:
        """Whether the input embedding's output is block 0's input unchanged (one 2-token forward
        in eval mode); False when the architecture adds something first (GPT-2's positions)."""
        seen: dict[str, Any] = {}  # the outputs the hooks see, checked below
        emb, block0 = self.backbone.get_input_embeddings(), self._blocks[0][0]
        weight = emb.weight
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"the input embedding {type(emb).__name__} has no weight tensor")
        if weight.is_meta:  # built for its shapes only (models_store.binding): no forward runs there,
            return False  # and the tap it leads to adds no parameter

        def grab_input(module: nn.Module, args: tuple, kwargs: dict) -> None:
            seen["block0"] = args[0] if args else kwargs.get("hidden_states")

        h1 = emb.register_forward_hook(lambda m, a, out: seen.__setitem__("emb", out))
        h2 = block0.register_forward_pre_hook(grab_input, with_kwargs=True)
        was_training = self.backbone.training
        try:
            self.backbone.eval()
            self.backbone(input_ids=torch.zeros(1, 2, dtype=torch.long, device=weight.device), use_cache=False)
        finally:
            h1.remove()
            h2.remove()
            self.backbone.train(was_training)
        a, b = seen.get("emb"), seen.get("block0")
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)

    def _tap_block0_input(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Route block 0's hidden-state input ([B, T, D]) through ``emb_tap`` (positional or keyword)."""
        if args:
            return (self.emb_tap(args[0]), *args[1:]), kwargs
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": self.emb_tap(kwargs["hidden_states"])}
        raise UnsupportedModel(
            f"model type {self.backbone.config.model_type!r}: block 0 was called without a hidden-state input"
        )

    def embedding_module(self) -> nn.Module:
        return self.emb_tap if self.tapped else self.backbone.get_input_embeddings()

    def block_modules(self) -> list[nn.Module]:
        return list(self._blocks[0])


def hf_config_from_dict(d: dict[str, Any]) -> PreTrainedConfig:
    """The transformers config of a stored dict (``model_type`` picks the class).

    Raises:
        UnsupportedModel: ``model_type`` missing or unknown to transformers.
    """
    model_type = d.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise UnsupportedModel(f"model type {model_type!r} is not supported: transformers has no config class for it")
    return CONFIG_MAPPING[model_type].from_dict(_infinite(d))


def _infinite(value: Any) -> Any:
    """Undo ``models_store.pretrained``'s JSON encoding of infinity (±``sys.float_info.max``)."""
    if isinstance(value, float) and abs(value) == sys.float_info.max:
        return math.copysign(math.inf, value)
    if isinstance(value, dict):
        return {k: _infinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_infinite(v) for v in value]
    return value


def backbone_from_config(hf_cfg: PreTrainedConfig) -> PreTrainedModel:
    """A randomly initialised float32 base model of ``hf_cfg`` (``AutoModel.from_config``).

    Raises:
        UnsupportedModel: see ``check_architecture``.
    """
    check_architecture(hf_cfg)
    return AutoModel.from_config(hf_cfg, dtype=torch.float32, trust_remote_code=False)


def build_from_hf_config(cfg: ModelConfig) -> AnyHFModel:
    """The model of a pretrained-based ``cfg`` rebuilt from ``cfg.hf_config`` (random weights;
    the checkpoint store loads the stored ones). No hub access.

    Raises:
        UnsupportedModel: the stored config's architecture (see ``check_architecture``).
    """
    if cfg.hf_config is None:  # ModelConfig requires it of a pretrained model
        raise ValueError(f"{cfg.pretrained}: the model config holds no transformers config (hf_config)")
    return AnyHFModel(cfg, backbone_from_config(hf_config_from_dict(cfg.hf_config)))


def family_of(backbone: PreTrainedModel) -> str:
    """The layerscope family of a loaded base model (``block_family`` of its block list)."""
    model_type = backbone.config.model_type
    _, blocks = find_blocks(backbone, layer_count(backbone.config), model_type)
    return block_family(blocks, model_type)


def read_config(name_or_path: str, role: str = "pretrained model", local_files_only: bool | None = None) -> Any:
    """The transformers config of a hub name or local folder, checked by :func:`check_architecture`.
    ``role`` names it in errors (``"pretrained model"``, ``"from_config"``); ``local_files_only``:
    never contact the hub (None: when ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` is set).

    Raises:
        PretrainedLoadError: the config cannot be read (a path with no folder there: "no such
            local folder", ``layerscope_core.model_sources``); UnsupportedModel: its architecture is
            unsupported. Both name ``role`` and the model.
    """
    from transformers import AutoConfig

    if why := missing_folder_problem(name_or_path) or custom_code_problem(name_or_path):  # a path: not looked up
        raise PretrainedLoadError(f"{role} {name_or_path!r}: {why}")
    folder = Path(name_or_path).expanduser()
    if is_folder(name_or_path) and not (folder / "config.json").is_file():  # transformers would say "no model_type key"
        raise PretrainedLoadError(f"{role} {name_or_path!r}: the folder holds no config.json")
    try:
        offline = hub_reads_offline(name_or_path) if local_files_only is None else local_files_only
        hf_cfg = AutoConfig.from_pretrained(name_or_path, local_files_only=offline, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - transformers raises OSError / ValueError / hub errors here
        why = " ".join(str(e).split())  # every line of it (a field's reason is on the next one), as one
        raise PretrainedLoadError(
            f"could not read the config of {role} {name_or_path!r} ({type(e).__name__}: "
            f"{why[:400] + ('…' if len(why) > 400 else '')})"
        ) from None
    if why := custom_code_problem(name_or_path, hf_cfg):  # a hub config: read, never run
        raise PretrainedLoadError(f"{role} {name_or_path!r}: {why}")
    try:
        check_architecture(hf_cfg)
    except (UnsupportedModel, PretrainedLoadError) as e:
        raise type(e)(f"{role} {name_or_path!r}: {e}") from None
    return hf_cfg


def meta_backbone(hf_cfg: PreTrainedConfig) -> PreTrainedModel:
    """The base model of ``hf_cfg`` on the ``meta`` device: its modules and parameter shapes, no
    weights read or allocated."""
    with torch.device("meta"):
        return AutoModel.from_config(hf_cfg, trust_remote_code=False)


def pretrained_family(name_or_path: str, role: str = "pretrained model", local_files_only: bool | None = None) -> str:
    """The family of a hub name or local folder from its config alone (:func:`read_config`, the
    blocks of :func:`meta_backbone`), checked to be causal on a one-block random copy
    (``models_store.causal.config_causal_problem``; no weights read).

    Raises:
        ValueError: the config cannot be read (``PretrainedLoadError``), or the architecture is
            unsupported or not causal (``UnsupportedModel``); each names ``role`` and the model.
    """
    from models_store.causal import config_causal_problem

    hf_cfg = read_config(name_or_path, role, local_files_only)
    try:
        backbone = meta_backbone(hf_cfg)
    except Exception as e:  # noqa: BLE001 - whatever a config value makes transformers' modules raise
        reason = " ".join(str(e).split())
        raise PretrainedLoadError(
            f"{role} {name_or_path!r}: its config builds no model ({type(e).__name__}: {reason[:300]}); "
            "check its sizes (hidden_size, num_attention_heads, intermediate_size, vocab_size, …)"
        ) from None
    family = family_of(backbone)
    why = config_causal_problem(hf_cfg)
    if why:
        raise UnsupportedModel(f"{role} {name_or_path!r}: {why}")
    return family
