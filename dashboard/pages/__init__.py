"""The dashboard's pages. Each module exposes ``PAGE``: a ``PageDef`` with its path, its
layout function (state from the URL, or a saved view's state as the base) and its callbacks.
The list of them lives in ``dashboard.all_pages`` (so no page imports the package that imports it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PageDef:
    key: str
    path: str
    title: str
    layout: Callable[..., Any]  # (search, base, embed, api, path_for) -> component
    register: Callable[..., None]  # (app, api, path_for) -> None
