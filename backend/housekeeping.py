"""Keeping runs tidy: tags and notes on runs and suites, deleting runs (with their result rows and
checkpoints) and suites. Shared by the API (``PATCH``/``DELETE /api/runs/{id}``, ``/api/suites``)
and the CLI (``layerscope runs …``, ``layerscope suite delete``).

A deletion is one transaction: the runs' rows go (their probe, intervention and patching rows by
the foreign keys' ``ON DELETE CASCADE``; jobs keep their row with ``run_id`` NULL), and their
checkpoint folders are moved aside first and removed only after the commit, put back if it fails.
A checkpoint another remaining run still names is kept.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from layerscope_core.suite_names import suite_name_problem
from layerscope_core.text import printable, text_problem
from store.models import InterventionResult, Job, PatchingResult, ProbeResult, Run, RunCurve, SuiteNote

MAX_TAGS = 32
MAX_TAG_LENGTH = 50
MAX_NOTES_LENGTH = 10_000


class NotFoundError(LookupError):
    """An unknown run id or suite name."""


class SuiteNameError(ValueError):
    """A suite looked up by a name that breaks the suite-name rule (``layerscope_core.suite_names``)
    and that no stored suite has: no suite could ever be found under it."""


def unknown_suite(name: str, found: str = "not found") -> NotFoundError | SuiteNameError:
    """The error for a suite that holds no run: a :class:`SuiteNameError` saying why when the name
    breaks the rule, else a :class:`NotFoundError` (``found``: what follows the name)."""
    why = suite_name_problem(name)
    if why:
        return SuiteNameError(f"suite {printable(name)!r}: the name {why}")
    return NotFoundError(f"suite {name!r} {found}")


def clean_tags(tags: Sequence[str]) -> list[str]:
    """Tags stripped, empty ones dropped, duplicates removed (first kept), order kept.

    Raises:
        ValueError: more than :data:`MAX_TAGS` tags, or one longer than :data:`MAX_TAG_LENGTH`."""
    out: list[str] = []
    for t in tags:
        t = str(t).strip()
        if len(t) > MAX_TAG_LENGTH:
            raise ValueError(f"tag {t[:20]!r}…: longer than {MAX_TAG_LENGTH} characters")
        if t and t not in out:
            out.append(t)
    if len(out) > MAX_TAGS:
        raise ValueError(f"{len(out)} tags: at most {MAX_TAGS}")
    return out


def _check_text(field: str, value: str) -> None:
    """The API's text rule for the CLI too (the API's schema already refuses these with a 422)."""
    problem = text_problem(value)
    if problem:
        raise ValueError(f"{field} '{printable(value)[:60]}': {problem[1]}")


def _check_annotation(tags: Sequence[str] | None, add: Sequence[str], notes: str | None) -> None:
    """The tags being set or added and the notes, before anything changes (stored tags are not
    checked again: they stay removable)."""
    for t in [*(tags or ()), *add]:
        _check_text("tag", str(t))
    if notes is not None:
        if len(notes) > MAX_NOTES_LENGTH:
            raise ValueError(f"notes: longer than {MAX_NOTES_LENGTH} characters")
        _check_text("notes", notes)


def annotate_run(
    session: Session,
    run_id: int,
    *,
    tags: Sequence[str] | None = None,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
    notes: str | None = None,
) -> Run:
    """Set a run's ``tags`` (replace, when given), add / remove tags, set its ``notes`` (when
    given; "" clears them); commits. Raises :class:`NotFoundError` and ``ValueError``."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFoundError(f"run {run_id} not found")
    _check_annotation(tags, add, notes)
    current = list(tags) if tags is not None else list(run.tags or [])
    current = [t for t in clean_tags([*current, *add]) if t not in {r.strip() for r in remove}]
    run.tags = current or None
    if notes is not None:
        run.notes = notes or None
    session.commit()
    return run


def suite_exists(session: Session, name: str) -> bool:
    return session.execute(select(Run.id).where(Run.suite == name).limit(1)).first() is not None


def annotate_suite(
    session: Session,
    name: str,
    *,
    tags: Sequence[str] | None = None,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
    notes: str | None = None,
) -> SuiteNote:
    """As :func:`annotate_run`, for a suite (one that holds a run). Commits."""
    if not suite_exists(session, name):
        raise unknown_suite(name)
    _check_annotation(tags, add, notes)
    row = session.get(SuiteNote, name) or SuiteNote(name=name)
    current = list(tags) if tags is not None else list(row.tags or [])
    row.tags = [t for t in clean_tags([*current, *add]) if t not in {r.strip() for r in remove}] or None
    if notes is not None:
        row.notes = notes or None
    session.add(row)
    session.commit()
    return row


def suite_run_ids(session: Session, name: str) -> list[int]:
    ids = list(session.execute(select(Run.id).where(Run.suite == name).order_by(Run.id)).scalars())
    if not ids:
        raise unknown_suite(name)
    return ids


def deletion_counts(session: Session, run_ids: Sequence[int]) -> dict[str, int]:
    """What deleting these runs removes: runs and result rows per table."""
    out = {"runs": len(run_ids)}
    for model in (ProbeResult, InterventionResult, PatchingResult):
        out[model.__tablename__] = int(
            session.execute(select(func.count()).select_from(model).where(model.run_id.in_(list(run_ids)))).scalar_one()
        )
    return out


def delete_runs(
    session: Session, run_ids: Sequence[int], store_dir: Path | None, suite: str | None = None
) -> dict[str, Any]:
    """Delete runs, their result rows and their checkpoint folders under ``store_dir`` in one
    transaction (see the module's docstring); with ``suite``, its notes row too.

    Returns ``deleted`` (rows per table, as :func:`deletion_counts`) and ``checkpoints`` (removed).

    Raises:
        NotFoundError: an id names no run.
    """
    run_ids = sorted(set(run_ids))
    found = dict(session.execute(select(Run.id, Run.checkpoint_id).where(Run.id.in_(run_ids))).all())
    missing = [i for i in run_ids if i not in found]
    if missing:
        raise NotFoundError(f"run {', '.join(map(str, missing))} not found")
    counts = deletion_counts(session, run_ids)
    ckpts = {c for c in found.values() if c}
    still_used = (
        set(
            session.execute(
                select(Run.checkpoint_id).where(Run.checkpoint_id.in_(ckpts), Run.id.not_in(run_ids))
            ).scalars()
        )
        if ckpts
        else set()
    )
    moved: list[tuple[Path, Path]] = []
    try:
        for ckpt in sorted(ckpts - still_used):
            folder = Path(store_dir) / ckpt if store_dir is not None else None
            if folder is not None and folder.is_dir():
                aside = folder.with_name(f".deleting-{ckpt}-{uuid.uuid4().hex[:8]}")
                folder.rename(aside)
                moved.append((folder, aside))
        for model in (ProbeResult, InterventionResult, PatchingResult, RunCurve):  # explicit: FKs may be off on SQLite
            session.execute(delete(model).where(model.run_id.in_(run_ids)))
        session.execute(update(Job).where(Job.run_id.in_(run_ids)).values(run_id=None))
        session.execute(delete(Run).where(Run.id.in_(run_ids)))
        if suite is not None:
            session.execute(delete(SuiteNote).where(SuiteNote.name == suite))
        session.commit()
    except BaseException:
        session.rollback()
        for folder, aside in moved:
            aside.rename(folder)
        raise
    for _, aside in moved:
        shutil.rmtree(aside, ignore_errors=True)
    return {"deleted": counts, "checkpoints": len(moved)}


def move_runs(
    session: Session,
    suite: str,
    to: str,
    *,
    families: Sequence[str] = (),
    tasks: Sequence[str] = (),
    seeds: Sequence[int] = (),
) -> list[Run]:
    """Move a suite's runs (those of the given families, tasks and seeds; every one when none is
    given), their random-init controls among them, to the suite ``to``, with their result rows
    (keyed by run id, so they follow). One UPDATE, committed; returns the moved runs.

    Why: a suite holds one run per seed in each cell (docs/SCIENCE.md#suites). When a preset's
    cell is revised before new runs (a longer step budget, docs/SCIENCE.md#budgets), the cell's
    superseded runs leave the suite for a suite of their own — kept, exportable, still
    comparable — and the suite resumed under the revised preset trains the cell afresh.

    Raises:
        NotFoundError / SuiteNameError: ``suite`` holds no run (:func:`unknown_suite`).
        ValueError: ``to`` breaks the suite-name rule or equals ``suite``; no run matches the
            filters; ``to`` already holds a run of the same cell and seed (family, task, model,
            depth, control): one run per seed.
    """
    if not suite_exists(session, suite):
        raise unknown_suite(suite)
    why = suite_name_problem(to)
    if why:
        raise ValueError(f"--to {printable(to)!r}: the name {why}")
    if to == suite:
        raise ValueError(f"--to {to!r}: the runs are in that suite already")
    q = select(Run).where(Run.suite == suite)
    if families:
        q = q.where(Run.family.in_(list(families)))
    if tasks:
        q = q.where(Run.task.in_(list(tasks)))
    if seeds:
        q = q.where(Run.seed.in_(list(seeds)))
    runs = list(session.execute(q.order_by(Run.id)).scalars())
    if not runs:
        raise ValueError(f"suite {suite!r} has no run of the given families, tasks and seeds")

    def key(r: Run) -> tuple:
        return (r.family, r.task, r.seed, r.pretrained, r.n_layers, r.control)

    there = {key(r): r.id for r in session.execute(select(Run).where(Run.suite == to)).scalars()}
    clash = [r for r in runs if key(r) in there]
    if clash:
        names = ", ".join(f"{r.id} ({r.name})" for r in clash[:5]) + (" …" if len(clash) > 5 else "")
        raise ValueError(
            f"--to {to!r}: that suite already holds a run of the same cell and seed as run {names} "
            "(a suite holds one run per seed)"
        )
    session.execute(update(Run).where(Run.id.in_([r.id for r in runs])).values(suite=to))
    session.commit()
    for r in runs:
        session.refresh(r)
    return runs
