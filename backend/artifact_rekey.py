"""Re-key kept weights written before their bytes were deterministic (``layerscope db rekey-artifacts``).

Until the artifact format was fixed, safetensors wrote an artifact's metadata in hash-map order
(the same tensors got another id on each write) and an edit carried its eval length (one fit,
applied at five lengths, made five files). A suite measured then keeps those files, and every
bundle exported from it carries them. This writes each artifact again as
``worker.learned.keep_weights`` writes it now, points its ``result_weights`` rows at the new id
(one transaction), then removes the old files that no row names any more. The tensors are the
same values: only the header changes, so no number changes. The store is taken to be this
results DB's own (``LAYERSCOPE_HOME``'s), as every command takes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from models_store.artifacts import ArtifactStore, encode, id_of
from store.models import ResultWeights
from worker.learned import artifact_metadata


@dataclass
class RekeyReport:
    rows: int = 0  # result_weights rows read
    rows_rekeyed: int = 0  # rows that name another artifact after (would, with dry_run)
    files_before: int = 0  # distinct artifacts the rows named before
    files_after: int = 0  # ... and after
    removed: list[str] = field(default_factory=list)  # old files deleted (no row names them)
    bytes_removed: int = 0
    missing: list[str] = field(default_factory=list)  # named by a row, not in this store: rows left as they are


def rekey_artifacts(session: Session, store: ArtifactStore, *, dry_run: bool = False) -> RekeyReport:
    """Re-key every ``result_weights`` row's artifact to the bytes ``keep_weights`` writes today
    (``dry_run``: count only; nothing is written or deleted). A file a row names but this store
    lacks (a bundle imported without it) is listed in ``missing`` and its rows are left as they are.

    Raises:
        ValueError: a stored artifact whose bytes do not hash to its id (damaged); nothing changed.
    """
    report = RekeyReport()
    rows = session.scalars(select(ResultWeights).order_by(ResultWeights.id)).all()
    report.rows = len(rows)
    old_ids = {w.artifact_id for w in rows}
    report.files_before = len(old_ids)
    loaded: dict[str, dict | None] = {}
    new_ids: dict[int, str] = {}  # row id -> its artifact id after
    for w in rows:
        if w.artifact_id not in loaded:
            try:
                loaded[w.artifact_id] = store.load(w.artifact_id)
            except FileNotFoundError:
                loaded[w.artifact_id] = None
                report.missing.append(w.artifact_id)
        tensors = loaded[w.artifact_id]
        if tensors is None:
            new_ids[w.id] = w.artifact_id
            continue
        meta = artifact_metadata(w.kind, w.method, w.layer, w.eval_length)
        # save writes the file (once) before a row names it; a dry run only hashes the bytes
        new_ids[w.id] = id_of(encode(tensors, meta)) if dry_run else store.save(tensors, meta)
        if new_ids[w.id] != w.artifact_id:
            report.rows_rekeyed += 1
            if not dry_run:
                w.artifact_id = new_ids[w.id]
    report.files_after = len(set(new_ids.values()))
    if dry_run:
        session.rollback()
        return report
    session.commit()
    named = set(new_ids.values())
    # after the commit: a crash in between leaves a spare file, never a row without its file
    for aid in sorted(old_ids - named):
        path = store.path(aid)
        size = path.stat().st_size if path.is_file() else 0
        if store.delete(aid):
            report.removed.append(aid)
            report.bytes_removed += size
    return report
