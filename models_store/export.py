"""A trained model as a transformers folder that ``AutoModel.from_pretrained`` loads, so
nnsight / TransformerLens users can take it further.

``export_transformers(model, out_dir, extra)`` writes the backbone with ``save_pretrained``
(``config.json`` + ``model.safetensors``: the embedding, the blocks and the final norm), and
beside it what transformers has no slot for: ``layerscope_head.safetensors`` (the token head,
``weight`` [C, D] and ``bias`` [C], applied to ``last_hidden_state``) and ``layerscope.json``
(family, task, class names, ``token_map``: task token i → vocabulary id, ``start_token``: with
it, every input starts with id ``vocab_size`` of the task, as in training). Families that are not
a transformers architecture (LSTM, GRU) cannot be exported this way (ValueError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from models_store.base import LayerwiseModel
from models_store.fast_scan import install, installed, uninstall

HEAD_FILE = "layerscope_head.safetensors"
META_FILE = "layerscope.json"


def export_transformers(model: LayerwiseModel, out_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model``'s backbone as a transformers folder (see the module docstring).

    Raises:
        ValueError: the model has no transformers backbone, or ``out_dir`` exists and is not empty.
    """
    backbone = getattr(model, "backbone", None)
    if backbone is None or not hasattr(backbone, "save_pretrained"):
        raise ValueError(
            f"a {model.config.family} model has no transformers backbone: only transformers "
            "architectures (transformer, mamba, mamba2, pretrained models) export to a folder AutoModel loads"
        )
    head = model.head  # an HFLayerwiseModel's token head
    if not isinstance(head, nn.Linear):
        raise ValueError(f"a {model.config.family} model's head is no linear layer to export as {HEAD_FILE}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    fast = installed(backbone)
    if fast:  # write the library's own classes (the fast CPU mixers are ours)
        uninstall(backbone)
    try:
        backbone.save_pretrained(out)
    finally:
        if fast:
            install(backbone)
    save_file(
        {"weight": head.weight.detach().cpu().contiguous(), "bias": head.bias.detach().cpu().contiguous()},
        str(out / HEAD_FILE),
    )
    cfg = model.config
    meta = {
        "family": cfg.family,
        "pretrained": cfg.pretrained,
        "vocab_size": cfg.vocab_size,
        "n_classes": cfg.n_classes,
        "token_map": cfg.token_map,
        "start_token": bool(cfg.start_token),
        "n_layers": model.n_layers,
        "d_model": model.d_model,
        **(extra or {}),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1, default=str))
    return out


@torch.no_grad()
def head_logits(out_dir: str | Path, last_hidden_state: torch.Tensor) -> torch.Tensor:
    """The exported token head on an ``AutoModel`` output: [B, T, D] → logits [B, T, C]."""
    from safetensors.torch import load_file

    head = load_file(str(Path(out_dir) / HEAD_FILE))
    return last_hidden_state @ head["weight"].T + head["bias"]
