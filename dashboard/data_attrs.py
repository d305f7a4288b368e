"""``data-*`` attributes of a Dash component, as keyword arguments."""

from __future__ import annotations

from typing import Any


def data_attrs(**values: str) -> dict[str, Any]:
    """``data_attrs(max_bytes="5")`` → ``{"data-max-bytes": "5"}``, to pass with ``**``: the names
    are no Python identifiers, and a component takes them among its other keywords (typed ``Any``,
    so that the type checker matches them against no named property)."""
    return {f"data-{name.replace('_', '-')}": value for name, value in values.items()}
