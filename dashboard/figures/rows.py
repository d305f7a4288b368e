"""The architecture rows of the matrix figures (the reversal matrix, the decoupling summary):
a row is a family, or a pretrained model named by its path."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dashboard.figures.common import esc
from dashboard.theme import FAMILIES, family_label, family_names


def row_key(p: dict[str, Any]) -> str:
    """A matrix row: the family, or the pretrained model's name."""
    return p.get("pretrained") or p["family"]


def row_label(key: str) -> str:
    """A matrix row's label, escaped (a pretrained model's name is user text): a registered
    family's label ("GRU (stacked)", as the legends of the line figures say), else the model's
    folder or hub name."""
    return esc(family_label(key) if key in family_names() else key.rstrip("/").split("/")[-1])


def row_order(keys: Iterable[str]) -> list[str]:
    """The rows in order: the built-in families in their order, then the others sorted."""
    keys = list(dict.fromkeys(keys))
    fams = [k for k in FAMILIES if k in keys]
    return fams + sorted(k for k in keys if k not in FAMILIES)
