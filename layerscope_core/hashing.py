"""The config hash stored with every run and job."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def config_hash(obj: Any) -> str:
    """SHA-256 (hex) of ``obj``'s canonical JSON (sorted keys, no spaces; non-JSON values as ``str``)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
