"""How many positions a model's learned absolute position table holds (GPT-2's ``wpe``, OPT's
``embed_positions``, our Transformer's ``learned_positions``): a longer sequence would index past it
("index out of range in self" deep inside the forward pass), so the worker checks the run's
longest sequence against it before training or measuring."""

from __future__ import annotations

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


def check_positions(model: nn.Module, lengths: dict[str, int], start_token: bool, who: str) -> None:
    """Raise ``ValueError`` when the longest of ``lengths`` (``{what: L}``, e.g. ``{"train_length":
    40, "eval_lengths": 100}``), plus the START token, is longer than ``model``'s learned position table.

    Raises:
        ValueError: e.g. ``pretrained model 'tiny-gpt2' has a learned position table of 32
            positions; this run's longest sequence (train_length 40 + the START token) needs 41:
            use a shorter train_length or a model with a longer table``.
    """
    limit = learned_position_limit(model)
    if limit is None or not lengths:
        return
    longest = max(lengths, key=lengths.__getitem__)
    needed = lengths[longest] + int(bool(start_token))
    if needed > limit:
        raise ValueError(
            f"{who} has a learned position table of {limit} positions; this run's longest sequence "
            f"({longest} {lengths[longest]}{' + the START token' if start_token else ''}) needs {needed}: "
            f"use a shorter {longest} or a model with a longer table"
        )
