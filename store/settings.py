"""Settings from environment variables / `.env` (pydantic-settings).

Web-free on purpose: the worker imports this module too.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_HOME = Path.home() / ".layerscope"


class Settings(BaseSettings):
    """One URL each for the results DB, the queue and the model store.

    Environment variables use the prefix ``LAYERSCOPE_`` (``LAYERSCOPE_DB_URL`` ...).
    """

    model_config = SettingsConfigDict(env_prefix="LAYERSCOPE_", env_file=".env", extra="ignore")

    home: Path = Field(DEFAULT_HOME, description="Folder for the embedded default's files.")
    db_url: str | None = Field(None, description="SQLAlchemy URL; default sqlite:///<home>/layerscope.db")
    queue_url: str | None = Field(
        None, description="Huey storage: redis://... or sqlite:///path; default sqlite in <home>"
    )
    queue_name: str = Field("layerscope", description="Huey queue name (one Redis sorted set / SQLite queue)")
    store_dir: Path | None = Field(None, description="Model store folder; default <home>/store")
    host: str = "127.0.0.1"
    port: int = 8050
    api_url: str | None = Field(None, description="Base URL the dashboard uses to reach the API")
    # Auth: tokens are required for writes when the server listens beyond loopback.
    require_token_for_reads: bool = False
    dashboard_token: str | None = Field(
        None,
        description="Token the dashboard sends to the API (needed for its job launches in lab mode). "
        "Every dashboard visitor writes through it: set it only where every visitor may write.",
    )
    cors_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(1_000_000, description="Larger request bodies are a 413 on every path")
    limit_concurrency: int = Field(
        4,
        ge=1,
        description="Heavy requests (exports, aggregates, bundles) served at "
        "once; more answer 503 with Retry-After (serve --limit-concurrency)",
    )
    task_file_max_memory_mib: int = Field(
        1024,
        ge=1,
        description="The most memory (MiB) validating a task file may hold (task add, POST /api/tasks): a file "
        "whose metadata or rows would need more is refused before it is read in full",
    )
    # Who may frame the dashboard (embed mode, ``?embed=1``): a CSP frame-ancestors value.
    frame_ancestors: str = "*"
    # Jobs
    heartbeat_seconds: float = 5.0
    stale_after_seconds: float = 60.0
    max_attempts: int = 3
    retry_backoff_seconds: float = Field(
        10.0,
        ge=0,
        description="A job that met a full disk is taken again after this many seconds, doubled for each "
        "attempt it has used (while attempts remain)",
    )
    device: str = "auto"
    worker_poll_seconds: float = Field(0.2, description="Idle poll interval of a worker on SQLite queues")
    reap_every_seconds: float = Field(10.0, description="How often the API and workers run the reaper")
    log_tail_lines: int = Field(200, description="Lines of a job's log kept in the jobs table")
    max_job_memory_gib: float = Field(
        16.0,
        gt=0,
        description="A job whose estimated peak memory (worker.memory: training activations and "
        "AdamW state, every layer's captured states) is over this many GiB is refused at submit",
    )
    # Bundles are read as hostile input (backend/bundle_guard.py): the zip's central directory is
    # checked against these before anything is read or written.
    bundle_max_members: int = Field(200_000, ge=1, description="Most members a bundle zip may hold")
    bundle_max_member_bytes: int = Field(
        8 * 2**30, ge=1, description="Largest uncompressed size of one bundle member (a checkpoint), bytes"
    )
    bundle_max_total_bytes: int = Field(
        64 * 2**30, ge=1, description="Largest uncompressed size of all of a bundle's members together, bytes"
    )
    bundle_max_json_bytes: int = Field(
        512 * 2**20,
        ge=1,
        description="Largest uncompressed size of a bundle's JSON member (manifest, a table, a note): "
        "parsed whole, so it bounds the memory an import takes",
    )
    bundle_max_ratio: float = Field(
        200.0,
        gt=1,
        description="Largest uncompressed/compressed size ratio of a bundle member over 1 MiB (a zip bomb's is ~1000)",
    )
    # 6 GiB: the pretrained preset's largest piece, Pythia-410M's twice-doubled fit set (6,556
    # sequences × 40 × 1024 floats) with its fit's copies beside one eval layer, needs 4.5 GiB
    measure_memory_gb: float = Field(
        6.0,
        ge=0,
        allow_inf_nan=False,  # "inf" is not "unbounded" (that is 0): refused here, not a traceback later
        description="GiB of states a measurement holds at once beyond the model's weights "
        "(LAYERSCOPE_MEASURE_MEMORY_GB; 0 = unbounded): layers are captured in groups that fit, the rest "
        "computed again; a measurement whose one layer or largest edit fit cannot fit is refused before it starts",
    )
    # read where the products are made (models_store.cpu_matmul, whose CHOICES are these; a test holds
    # the two equal): declared here so that a bad value is refused at start-up, not in a measurement
    cpu_matmul: Literal["auto", "onednn", "blas"] = Field(
        "auto",
        description="How a measurement's float32 forward passes multiply their large linear layers on a CPU "
        "(LAYERSCOPE_CPU_MATMUL): onednn, blas (torch's BLAS, MKL), or auto: oneDNN on an AMD CPU with "
        "AVX-512, where MKL runs at about half the core's rate",
    )
    # Start-up: a SQLite file is checked with PRAGMA quick_check (a corrupt one is refused)
    check_integrity: bool = Field(True, description="Run PRAGMA quick_check on a SQLite DB at start-up")
    integrity_check_seconds: float = Field(
        10.0,
        description="Stop the start-up check after this long (a large file is then served unchecked, with a warning)",
    )

    @property
    def resolved_db_url(self) -> str:
        return self.db_url or f"sqlite:///{self.home / 'layerscope.db'}"

    @property
    def resolved_queue_url(self) -> str:
        return self.queue_url or f"sqlite:///{self.home / 'queue.db'}"

    @property
    def resolved_store_dir(self) -> Path:
        return self.store_dir or (self.home / "store")

    @property
    def listens_beyond_loopback(self) -> bool:
        """True when ``host`` is not a loopback address: then every write needs a token."""
        return self.host.strip("[]").lower() not in ("127.0.0.1", "localhost", "::1")

    @property
    def resolved_api_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return self.api_url or f"http://{host}:{self.port}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
