"""A results bundle opened as a database of its own: a temporary SQLite file, migrated to the
newest schema and filled by :func:`backend.bundle_import.import_bundle`.

Used by ``layerscope.results.open("study.layerscope.zip")`` and ``layerscope serve
study.layerscope.zip``: a bundle can be read without creating or touching a results database.
The temporary folder is removed when :meth:`BundleDatabase.close` runs (or at exit).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from backend.bundle import BundleError
from backend.bundle_import import import_bundle
from store.migrate import init_db
from store.session import make_engine, make_sessionmaker


@dataclass
class BundleDatabase:
    """A bundle loaded into a throwaway SQLite file (``url``)."""

    path: Path
    url: str
    suite: str | None
    folder: Path
    engine: Engine
    factory: sessionmaker[Session]
    summary: dict = field(default_factory=dict)

    def close(self) -> None:
        self.engine.dispose()
        shutil.rmtree(self.folder, ignore_errors=True)


def open_bundle(path: str | Path) -> BundleDatabase:
    """Load the bundle at ``path`` into a new temporary SQLite database.

    Raises:
        BundleError: ``path`` is not a file, not a layerscope bundle, or of a newer format.
    """
    path = Path(path)
    if path.is_dir():
        raise BundleError(
            f"{path}: a folder, not a results bundle (a .layerscope.zip file) or a database URL (sqlite:///FILE)"
        )
    if not path.is_file():
        raise BundleError(f"{path}: no such file")
    folder = Path(tempfile.mkdtemp(prefix="layerscope-bundle-"))
    try:
        url = f"sqlite:///{folder / 'bundle.db'}"
        init_db(url)
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        with factory() as s:
            summary = import_bundle(s, path, source=path.name)  # no store_dir: weights stay in the zip
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    db = BundleDatabase(
        path=path, url=url, suite=summary["suite"], folder=folder, engine=engine, factory=factory, summary=summary
    )
    atexit.register(db.close)
    return db
