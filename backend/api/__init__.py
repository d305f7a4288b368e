"""The HTTP API under ``/api`` (docs/DESIGN.md "HTTP API"); ``create_app`` is the factory."""

from backend.api.main import create_app

__all__ = ["create_app"]
