"""Seeds for each data stream of a run, so train / held-out / probe / patching data never overlap."""

from __future__ import annotations

import hashlib

PURPOSES = (
    "train",
    "heldout",
    "behaviour",
    "probe",
    "intervene_fit",
    "intervene_eval",
    "patch",
    "split",
    "random_removal",
)


def data_seed(run_seed: int, purpose: str, index: int = 0) -> int:
    """A stable 31-bit seed for (run seed, purpose, index); distinct purposes never collide in practice.

    Raises:
        ValueError: unknown ``purpose``.
    """
    if purpose not in PURPOSES:
        raise ValueError(f"unknown seed purpose {purpose!r}; expected one of {PURPOSES}")
    digest = hashlib.sha256(f"{run_seed}:{purpose}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
