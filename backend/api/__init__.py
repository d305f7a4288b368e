"""The HTTP API under ``/api`` (docs/DESIGN.md "HTTP API"); ``create_app`` is the factory.

``create_app`` is imported lazily so the read-side modules (``queries``, ``across_seeds``) serve
the CLI and the results bundle without pulling in the web stack.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from backend.api.main import create_app

        return create_app
    raise AttributeError(f"module 'backend.api' has no attribute {name!r}")
