"""Where a job reads and writes (``WorkerEnv``): a module of its own so that the pipeline and the
measuring steps it calls both name it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from models_store.checkpoints import CheckpointStore


@dataclass
class WorkerEnv:
    """Where a job reads and writes: the results DB, the model store, the torch device."""

    session_factory: sessionmaker[Session]
    store_dir: Path
    device: str = "cpu"

    def __post_init__(self) -> None:
        from science.tasks import use_task_store

        use_task_store(Path(self.store_dir) / "tasks")  # the file tasks this env's store holds

    @property
    def store(self) -> CheckpointStore:
        return CheckpointStore(self.store_dir)
