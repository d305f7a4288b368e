"""layerscope's backend, the top layer: the FastAPI app (``backend/api/``: routes, schemas, auth), the
served app mounting the dashboard (``app.py``), the CLI, bundles and reports. The DB schema and its
migrations live in ``store/``, the job queue in ``worker/``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("layerscope")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+source"
