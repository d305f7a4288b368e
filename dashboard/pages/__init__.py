"""The dashboard's pages. Each module exposes ``PAGE``: a ``PageDef`` with its path, its
layout function (state from the URL, or a saved view's state as the base) and its callbacks."""

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


def _pages() -> list[PageDef]:
    from dashboard.pages import claims, curves, jobs, patching, probe_causal, reversal, runs, views

    return [runs.PAGE, curves.PAGE, reversal.PAGE, probe_causal.PAGE, patching.PAGE, claims.PAGE, jobs.PAGE,
            views.PAGE]


class _Lazy(list):
    def __init__(self):
        super().__init__()
        self._loaded = False

    def _load(self):
        if not self._loaded:
            self.extend(_pages())
            self._loaded = True

    def __iter__(self):
        self._load()
        return super().__iter__()

    def __len__(self):
        self._load()
        return super().__len__()


PAGES: list[PageDef] = _Lazy()
