"""What probes and edits learned, kept: probe weights and removed directions as
safetensors artifacts (``models_store.artifacts``) beside the checkpoints, one
``result_weights`` row per probe / intervention result naming its artifact.

    >>> from worker.learned import learned
    >>> rows = learned(run_id, env, kind="probe")      # [{"layer", "eval_length", "tensors": {...}}, ...]
    >>> rows[0]["tensors"]["directions"].shape          # [C, D]: class directions in raw space
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from models_store.artifacts import ArtifactStore, edit_tensors, probe_tensors
from store.models import ResultWeights
from worker import persist

if TYPE_CHECKING:
    from worker.env import WorkerEnv

WEIGHTS_KEY = ("kind", "method", "layer", "eval_length")


def artifact_metadata(kind: str, method: str, layer: int, eval_length: int) -> dict[str, Any]:
    """The metadata an artifact of a ``result_weights`` row is written with. An edit is fitted
    once and applied at every eval length: one artifact for all its rows (its length in the file
    would make five copies of the same tensors); a probe is fitted per length."""
    meta = {"kind": kind, "method": method, "layer": layer}
    return meta if kind != "probe" else {**meta, "eval_length": eval_length}


def keep_weights(env: WorkerEnv, session: Session, run_id: int, records: Iterable[Any], kind: str) -> int:
    """Write the artifacts of ``records`` (probe records carrying ``.probe``, intervention records
    carrying ``.edit``) and replace their ``result_weights`` rows; returns the rows written.
    Records without a fitted object (Conv1D removal, imported rows) are skipped."""
    store = ArtifactStore(env.store_dir)
    rows = []
    for r in records:
        obj = getattr(r, "probe" if kind == "probe" else "edit", None)
        if obj is None:
            continue
        tensors = probe_tensors(obj) if kind == "probe" else edit_tensors(obj)
        method = "" if kind == "probe" else r.method
        key = {"kind": kind, "method": method, "layer": r.layer, "eval_length": r.eval_length}
        rows.append(
            {
                **key,
                "config_hash": r.config_hash,
                "artifact_id": store.save(tensors, artifact_metadata(**key)),
            }
        )
    if rows:
        persist.replace_result_weights(session, run_id, rows)
    return len(rows)


def learned(run_id: int, env: WorkerEnv, kind: str | None = None, *, tensors: bool = True) -> list[dict[str, Any]]:
    """The run's kept weights: rows ``{kind, method, layer, eval_length, artifact_id, config_hash}``
    (``kind``: ``probe`` / ``edit`` / None = both), with ``tensors`` loaded unless ``tensors=False``
    (see ``models_store.artifacts`` for the tensor names and shapes).

    Raises:
        FileNotFoundError: an artifact named by a row is not in this store (imported without it).
    """
    store = ArtifactStore(env.store_dir)
    with env.session_factory() as s:
        q = select(ResultWeights).where(ResultWeights.run_id == run_id)
        if kind is not None:
            q = q.where(ResultWeights.kind == kind)
        found = s.scalars(
            q.order_by(ResultWeights.kind, ResultWeights.method, ResultWeights.eval_length, ResultWeights.layer)
        ).all()
        out = [{c: getattr(w, c) for c in (*WEIGHTS_KEY, "artifact_id", "config_hash")} for w in found]
    if tensors:
        for row in out:
            row["tensors"] = store.load(row["artifact_id"])
    return out
