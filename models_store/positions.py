"""How many positions a model's learned absolute position table holds (GPT-2's ``wpe``, OPT's
``embed_positions``, our Transformer's ``learned_positions``): a longer sequence would index past it
("index out of range in self" deep inside the forward pass), so the worker checks the run's
longest sequence against it before training or measuring. The API answers the same question at
submit from a run's stored config (:func:`stored_position_limit`): the same model, built on the meta
device, read by the same function."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# names of learned absolute position tables in transformers' models and ours (models_store.families)
POSITION_TABLE_NAMES = ("wpe", "embed_positions", "position_embeddings", "position")


def learned_position_limit(model: nn.Module) -> int | None:
    """The rows of the shortest learned absolute position table in ``model`` (an ``nn.Embedding``
    whose attribute name is one of :data:`POSITION_TABLE_NAMES`), or None when it has none (rotary
    and recurrent models: no table to index past). OPT's table holds 2 rows of offset, so its limit
    reads 2 positions more than the model takes: the check is lenient there, never wrong the other way."""
    sizes = [
        m.num_embeddings
        for name, m in model.named_modules()
        if isinstance(m, nn.Embedding) and name.rsplit(".", 1)[-1] in POSITION_TABLE_NAMES
    ]
    return min(sizes) if sizes else None


FILE_ROWS = "the task file's longest row"  # how ``lengths`` names a file task's length (worker.position_checks)


def position_problem(limit: int | None, lengths: dict[str, int], start_token: bool, who: str) -> str | None:
    """Why the longest of ``lengths`` (``{what: L}``, e.g. ``{"train_length": 40, "eval_lengths":
    100}``), plus the START token, does not fit a learned position table of ``limit`` positions
    (None: no table), or None."""
    if limit is None or not lengths:
        return None
    longest = max(lengths, key=lengths.__getitem__)
    needed = lengths[longest] + int(bool(start_token))
    if needed <= limit:
        return None
    shorter = (
        f"crop the task file's rows to {limit - int(bool(start_token))} tokens"
        if longest == FILE_ROWS  # a file task's length is its rows', not a setting
        else f"use a shorter {longest}"
    )
    return (
        f"{who} has a learned position table of {limit} positions; this run's longest sequence "
        f"({longest} {lengths[longest]}{' + the START token' if start_token else ''}) needs {needed}: "
        f"{shorter} or a model with a longer table"
    )


def check_positions(model: nn.Module, lengths: dict[str, int], start_token: bool, who: str) -> None:
    """Raise ``ValueError`` when the longest of ``lengths``, plus the START token, is longer than
    ``model``'s learned position table (:func:`position_problem`).

    Raises:
        ValueError: e.g. ``pretrained model 'tiny-gpt2' has a learned position table of 32
            positions; this run's longest sequence (train_length 40 + the START token) needs 41:
            use a shorter train_length or a model with a longer table``.
    """
    if why := position_problem(learned_position_limit(model), lengths, start_token, who):
        raise ValueError(why)


def config_position_limit(source: str, role: str) -> int | None:
    """:func:`learned_position_limit` of the model a transformers config describes (``source``: a
    local folder, or a hub name in this machine's cache), built on the meta device (no weights).
    None where it has no table or the config is not readable here (the worker checks the model
    it builds)."""
    from models_store.any_model import meta_backbone, read_config

    try:
        return learned_position_limit(meta_backbone(read_config(source, role, local_files_only=True)))
    except (ValueError, OSError):
        return None


def stored_position_limit(model_config: dict[str, Any]) -> int | None:
    """:func:`learned_position_limit` of the model a run's stored config describes (``runs.model_config``,
    ``ModelConfig.to_dict()``; a pretrained run's transformers config in its ``hf_config``), built on
    the meta device: no memory, no weights, a few milliseconds for a paper-sized model. None where
    there is no table, and where the config builds no model here (a plugin family not registered on
    this machine, a config from another version): the worker then checks the built model itself.

    A rotary table (``max_position_embeddings`` of a rotary model) is not a limit: rotary angles
    are computed for any position."""
    from models_store.any_model import backbone_from_config, hf_config_from_dict
    from models_store.families import build_model
    from models_store.model_config import ModelConfig

    try:
        cfg = ModelConfig.from_dict(dict(model_config))
        with torch.device("meta"):
            # a pretrained run's table is in its transformers backbone (the wrapper around it runs
            # a forward pass when built, which the meta device cannot)
            hf = cfg.hf_config  # a pretrained config always has one (ModelConfig checks it)
            model = (
                backbone_from_config(hf_config_from_dict(hf)) if cfg.pretrained and hf is not None else build_model(cfg)
            )
    except (ValueError, TypeError, KeyError):
        return None
    return learned_position_limit(model)
