"""layerscope's backend: FastAPI app, DB schema and migrations, queue submission, auth, CLI."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("layerscope")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+source"
