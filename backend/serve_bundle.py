"""``layerscope serve BUNDLE.zip``: the API and dashboard over a results bundle, read-only, with
no results database, queue or model store created where the user keeps theirs: the bundle is read
into a temporary SQLite database (backend/bundle_db.py), removed when the server stops — also on
SIGINT and SIGTERM (``backend/cli/serve.py``: SIGTERM is read as Ctrl-C, then
:func:`remove_temporary`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from backend.bundle_db import open_bundle
from backend.read_only import ReadOnlyApi
from store.settings import Settings, get_settings


def bundle_app(
    path: Path, *, host: str | None = None, port: int | None = None, dashboard: bool = True
) -> tuple[Settings, Any]:
    """(settings, ASGI app) serving ``path`` read-only.

    Raises:
        backend.bundle.BundleError: not a bundle (or no such file).
    """
    from backend.app import create_app
    from worker.queue import JobQueue

    db = open_bundle(path)
    base = get_settings()
    updates: dict[str, Any] = {
        "home": db.folder,
        "db_url": db.url,
        "queue_url": f"sqlite:///{db.folder / 'queue.db'}",
        "store_dir": db.folder / "store",
    }
    updates.update({k: v for k, v in (("host", host), ("port", port)) if v is not None})
    settings = base.model_copy(update=updates)
    app = create_app(
        settings, db.factory, queue=JobQueue.from_settings(settings), background=False, dashboard=dashboard
    )
    app.state.read_only = f"serving the bundle {path.name} read-only"
    return settings, ReadOnlyApi(app, why=f"read-only: this server shows the bundle {path.name}")


def remove_temporary(settings: Settings) -> None:
    """Remove the temporary folder of a served bundle (its database, queue and store): the
    ``home`` :func:`bundle_app` set, a folder it made (``layerscope-bundle-*``)."""
    shutil.rmtree(settings.home, ignore_errors=True)
