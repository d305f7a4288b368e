"""Pretrained (or config-only) transformers backbones with a token head: any architecture.

``load_pretrained`` loads any transformers checkpoint — GPT-2, GPT-NeoX (Pythia), Llama, Qwen2,
Mistral, Mamba, Mamba-2, Falcon-Mamba, … — with ``AutoModel.from_pretrained`` from a local
folder or a hub name (``weights=False``: the same architecture from its config alone, randomly
initialised, i.e. trained from scratch) and puts a fresh ``Linear(d, n_classes)``
token-classification head on the backbone's final norm. The result is an
``models_store.any_model.AnyHFModel``: its blocks are the module list whose length is the
config's layer count, found in the loaded model (docs/SCIENCE.md#layers: emb, then one layer
per block); capture / edits / patching / checkpoints work unchanged, and a checkpoint rebuilds
from the stored transformers config without the hub. An architecture without such a block list
(or an encoder-decoder) is refused with one line naming its model type and what is missing, and
so is one that is not causal (a bidirectional encoder: ``models_store.causal``, one forward pass).

Task tokens → model vocabulary (documented choice): task token i is fed to the backbone as
vocabulary id ``token_offset + i`` (default offset 2). Pythia and the ``state-spaces/mamba-*-hf``
models share the GPT-NeoX-20B tokenizer, whose ids 0 and 1 are the special
``<|endoftext|>`` / ``<|padding|>`` tokens and whose ids 2, 3, 4, … are the single printable
ASCII characters ``!``, ``"``, ``#``, …; the task's tokens therefore land on distinct, trained
single-character embeddings. An explicit ``token_map`` (a list of distinct ids, one per task
token) overrides the rule. The mapping is stored as ``ModelConfig.token_map``.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, PreTrainedModel
from transformers.utils import logging as hf_logging

from layerscope_core.model_sources import (
    custom_code_problem,
    hub_offline,
    hub_reads_offline,
    hub_unreachable,
    is_folder,
    missing_folder_problem,
)
from models_store.any_model import (
    AnyHFModel,
    PretrainedLoadError,
    UnsupportedModel,
    backbone_from_config,
    check_architecture,
    family_of,
)
from models_store.base import LayerwiseModel
from models_store.causal import causal_problem
from models_store.model_config import ModelConfig

DEFAULT_TOKEN_OFFSET = 2


def _finite(value: object) -> object:
    """``value`` with ±inf floats replaced by ±``sys.float_info.max`` (JSON has no infinity).

    Mamba-2's ``time_step_limit`` defaults to (0, inf): a clamp at the largest float is the same clamp.
    """
    if isinstance(value, float) and math.isinf(value):
        return math.copysign(sys.float_info.max, value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def load_pretrained(
    name_or_path: str,
    n_classes: int,
    task_vocab_size: int,
    *,
    token_map: list[int] | None = None,
    token_offset: int = DEFAULT_TOKEN_OFFSET,
    local_files_only: bool | None = None,
    revision: str | None = None,
    seed: int | None = None,
    weights: bool = True,
) -> LayerwiseModel:
    """A transformers backbone (any architecture with a block list) with a new token head, in float32, on CPU.

    Args:
        name_or_path: a local folder written by ``save_pretrained`` or a hub name such as
            ``EleutherAI/pythia-160m`` or ``state-spaces/mamba-130m-hf``. A checkpoint of the
            ``*ForCausalLM`` class loads too (its LM head is dropped).
        n_classes: labels of the token-classification head.
        task_vocab_size: number of task token ids.
        token_map: explicit task id → model id list (length ``task_vocab_size``, distinct);
            default ``[token_offset, ..., token_offset + task_vocab_size - 1]``.
        token_offset: first model id of the default mapping (see the module docstring).
        local_files_only: never contact the hub. ``None`` → True when ``HF_HUB_OFFLINE`` or
            ``TRANSFORMERS_OFFLINE`` is set (then a missing model fails at once; otherwise
            transformers retries the hub for about 25 s before giving up offline).
        revision: hub revision (branch, tag or commit).
        seed: seed for the head's initialisation (global RNG when None; with ``weights=False``
            the backbone's too).
        weights: load the checkpoint's weights (default); False builds the architecture from
            its config alone with random weights (training from scratch).

    Returns:
        An ``AnyHFModel`` (train mode) whose ``config.pretrained`` is ``name_or_path`` and whose
        ``config.family`` is ``transformer``, ``mamba`` or ``mamba2`` (from its blocks).

    Raises:
        PretrainedLoadError (a ValueError): the model cannot be found or reached, its
            architecture is unsupported (one line: the model type and what is missing) or not
            causal (its output at a position changes with later tokens), its
            weights do not fit the architecture, or the token mapping does not fit its vocabulary.
    """
    name = str(name_or_path)
    role = "pretrained model" if weights else "model config"  # how errors name it
    if local_files_only is None:
        local_files_only = hub_reads_offline(name)
    hf_cfg = _read_config(name, role, local_files_only=local_files_only, revision=revision)
    token_map = _task_token_map(token_map, token_offset, task_vocab_size, int(hf_cfg.vocab_size), name)
    backbone, info = _backbone(name, hf_cfg, weights, seed, local_files_only=local_files_only, revision=revision)
    family = _checked_family(backbone, info, role, name, getattr(hf_cfg, "model_type", None))
    if why := causal_problem(backbone):  # before any training: a bidirectional encoder reads later tokens
        raise PretrainedLoadError(f"{role} {name!r}: {why}")
    cfg = ModelConfig(
        family=family,
        vocab_size=task_vocab_size,
        n_classes=n_classes,
        n_layers=int(hf_cfg.num_hidden_layers),
        d_model=int(hf_cfg.hidden_size),
        pretrained=name,
        hf_config=_stored_hf_config(backbone, role, name),
        token_map=token_map,
    )
    if seed is None:
        model = AnyHFModel(cfg, backbone)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AnyHFModel(cfg, backbone)
    cfg.n_params = model.n_params
    return model.train()


def _read_config(name: str, role: str, *, local_files_only: bool, revision: str | None) -> Any:
    """The transformers config of ``name`` (a local folder, or a hub name from the hub or its cache),
    checked to be an architecture with a block list. Raises ``PretrainedLoadError`` naming where
    it looked and why it failed."""
    if why := missing_folder_problem(name):
        raise PretrainedLoadError(f"{role} {name!r}: {why}")
    if why := custom_code_problem(name):  # before transformers reads it: nothing of it is run
        raise PretrainedLoadError(f"{role} {name!r}: {why}")
    local_dir = is_folder(name)
    where = "local folder" if local_dir else ("local cache (offline)" if local_files_only else "hub or local cache")
    try:
        hf_cfg = AutoConfig.from_pretrained(
            name, local_files_only=local_files_only, revision=revision, trust_remote_code=False
        )
    except Exception as e:  # noqa: BLE001 - transformers raises OSError / ValueError / hub errors here
        hint = (
            ""
            if local_dir
            else (
                " — it is not a local folder, and it is not in the local cache"
                + ("" if hub_offline() or (down := hub_unreachable()) is None else f" (the hub: {down})")
                if local_files_only
                else " — it is not a local folder, and the Hugging Face hub could not be reached or has no such model"
            )
        )
        raise PretrainedLoadError(f"could not load {role} {name!r} from the {where}{hint} ({_reason(e)})") from None
    if why := custom_code_problem(name, hf_cfg):  # a hub config: read, never run
        raise PretrainedLoadError(f"{role} {name!r}: {why}")
    try:
        check_architecture(hf_cfg)
    except UnsupportedModel as e:
        raise PretrainedLoadError(f"{role} {name!r}: {e}") from None
    return hf_cfg


def _task_token_map(
    token_map: list[int] | None, token_offset: int, task_vocab_size: int, model_vocab: int, name: str
) -> list[int]:
    """Task id → model id (default: ``token_offset + i``), checked: distinct, one per task token,
    inside the model's vocabulary of ``model_vocab`` ids."""
    if token_map is None:
        token_map = list(range(token_offset, token_offset + task_vocab_size))
    token_map = [int(t) for t in token_map]
    if len(token_map) != task_vocab_size or len(set(token_map)) != len(token_map):
        raise PretrainedLoadError(f"token_map must hold {task_vocab_size} distinct ids, got {len(token_map)}")
    if min(token_map) < 0 or max(token_map) >= model_vocab:
        raise PretrainedLoadError(
            f"token map ids {min(token_map)}..{max(token_map)} fall outside {name!r}'s vocabulary of {model_vocab}"
        )
    return token_map


def _backbone(
    name: str, hf_cfg: Any, weights: bool, seed: int | None, *, local_files_only: bool, revision: str | None
) -> tuple[PreTrainedModel, dict[str, Any]]:
    """(the backbone, transformers' loading info): the checkpoint's weights in float32, or with
    ``weights=False`` the architecture of ``hf_cfg`` randomly initialised (under ``seed`` when given)."""
    if not weights:
        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            return backbone_from_config(hf_cfg), {}
    # transformers' load report lists a causal LM's head as UNEXPECTED in the base model: that is
    # this load's intent (the head is replaced), and what matters, missing or mismatched keys, is
    # checked from the loading info (_checked_family) and said in our words, so its report is hushed
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoModel.from_pretrained(
            name,
            config=hf_cfg,
            local_files_only=local_files_only,
            revision=revision,
            dtype=torch.float32,
            output_loading_info=True,
            trust_remote_code=False,
        )
    except Exception as e:  # noqa: BLE001 - any loader failure, named in the message
        raise PretrainedLoadError(f"could not load the weights of pretrained model {name!r} ({_reason(e)})") from None
    finally:
        hf_logging.set_verbosity(level)


def _checked_family(
    backbone: PreTrainedModel, info: dict[str, Any], role: str, name: str, model_type: str | None
) -> str:
    """The family the backbone's blocks make; raises when it has none, or when the checkpoint's
    weights did not fill the architecture (missing or mismatched keys)."""
    try:
        family = family_of(backbone)
    except UnsupportedModel as e:
        raise PretrainedLoadError(f"{role} {name!r}: {e}") from None
    missing = sorted(info.get("missing_keys", []))
    mismatched = sorted(str(k) for k in info.get("mismatched_keys", []))
    if missing or mismatched:
        raise PretrainedLoadError(
            f"pretrained model {name!r}: weights do not fit the {model_type} architecture "
            f"(missing {missing[:5]}, mismatched {mismatched[:5]})"
        )
    return family


def _stored_hf_config(backbone: PreTrainedModel, role: str, name: str) -> dict[str, Any]:
    """The backbone's transformers config as stored in ``ModelConfig.hf_config``: no cache, float32,
    plain JSON (±inf → ±max float; a JSON round trip, so a checkpoint's config reads back equal)."""
    hf_dict = backbone.config.to_dict()
    hf_dict["use_cache"] = False
    hf_dict["dtype"] = "float32"
    try:  # JSON round trip: the config stored in a checkpoint reads back equal (int dict keys → str)
        return json.loads(json.dumps(_finite(hf_dict), allow_nan=False))
    except ValueError as e:
        raise PretrainedLoadError(f"{role} {name!r}: its config is not plain JSON ({e})") from None
