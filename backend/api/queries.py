"""Reads shared by the routes and the export: filtered runs and result rows as plain dicts."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from sqlalchemy import Select, String, cast, func, or_, select
from sqlalchemy.orm import Session

from layerscope_core.layers import depth, layer_name  # the one definition (docs/SCIENCE.md#layers)
from science.trained import DEFAULT_CRITERION
from store.jobs import QUEUED, RUNNING
from store.models import InterventionResult, Job, PatchingResult, ProbeResult, Run


class NotFound(LookupError):
    """An unknown id: the API answers 404 with this message."""


def trained_clause() -> Any:
    """SQL form of :func:`science.trained.is_trained` (docs/SCIENCE.md#trained): held-out accuracy
    stored and ≥ the run's criterion (0.99 when none is stored). A test checks the two agree."""
    criterion = func.coalesce(Run.early_stop_acc, DEFAULT_CRITERION)
    return Run.heldout_acc.is_not(None) & (Run.heldout_acc >= criterion - 1e-9)


# which random-init control runs a run listing holds (docs/SCIENCE.md#controls): GET /api/runs and
# `layerscope runs list --controls`
ControlsMode = Literal["exclude", "include", "only"]
SelectT = TypeVar("SelectT", bound=Select)  # a SELECT of any columns, given back with the filter applied


@dataclass
class RunFilter:
    task: Sequence[str] | None = None
    family: Sequence[str] | None = None
    seed: Sequence[int] | None = None
    suite: Sequence[str] | None = None
    pretrained: Sequence[str] | None = None
    run_id: Sequence[int] | None = None
    trained: bool | None = None  # True: trained runs only; False: untrained only; None: all
    # random-init controls (docs/SCIENCE.md#controls): "exclude" (what every aggregate and verdict
    # reads), "only", or "include"
    controls: ControlsMode = "exclude"
    search: str | None = None  # a case-insensitive substring of name, tags, notes, family, task or suite
    extra: dict[str, Any] = field(default_factory=dict)

    def apply(self, q: SelectT) -> SelectT:
        for col, values in (
            (Run.task, self.task),
            (Run.family, self.family),
            (Run.seed, self.seed),
            (Run.suite, self.suite),
            (Run.pretrained, self.pretrained),
            (Run.id, self.run_id),
        ):
            if values:
                q = q.where(col.in_(list(values)))
        if self.trained is not None:
            q = q.where(trained_clause() if self.trained else ~trained_clause())
        if self.controls == "exclude":
            q = q.where(Run.control.is_(None))
        elif self.controls == "only":
            q = q.where(Run.control.is_not(None))
        if self.search:
            q = q.where(search_clause(self.search))
        return q


def search_clause(text: str) -> Any:
    """Runs whose name, tags, notes, family, task or suite hold ``text`` (case-insensitive;
    ``%`` and ``_`` are literal)."""
    needle = text.lower()
    cols = (Run.name, Run.family, Run.task, Run.suite, Run.notes, cast(Run.tags, String))
    return or_(*(func.lower(func.coalesce(c, "")).contains(needle, autoescape=True) for c in cols))


RUN_LIST_COLUMNS = list(Run.__table__.columns)  # every field of a run but its loss curve (run_curves)


def run_row(row: Any) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in RUN_LIST_COLUMNS}


RUN_SORT_COLUMNS = ("id", "name", "family", "task", "seed", "n_params", "steps", "train_seconds", "created_at")


def run_order(sort: str | None) -> list[Any]:
    """``"seed"`` / ``"-seed"`` (descending) → ORDER BY terms; ties (and NULLs, last) by id.
    ``sort`` must name one of :data:`RUN_SORT_COLUMNS` (the route validates it)."""
    if not sort:
        return [Run.id]
    desc = sort.startswith("-")
    key = sort.lstrip("-")
    if key not in RUN_SORT_COLUMNS:
        raise ValueError(f"cannot sort runs by {key!r}")
    col = getattr(Run, key)
    term = (col.desc() if desc else col.asc()).nulls_last()
    return [term] if key == "id" else [term, Run.id.desc() if desc else Run.id]


def list_runs(
    session: Session, flt: RunFilter, limit: int | None, offset: int = 0, sort: str | None = None
) -> tuple[list[dict], int]:
    total = session.execute(flt.apply(select(func.count()).select_from(Run))).scalar_one()
    q = flt.apply(select(*RUN_LIST_COLUMNS)).order_by(*run_order(sort)).offset(offset)
    if limit is not None:
        q = q.limit(limit)
    return [run_row(r) for r in session.execute(q)], int(total)


def get_run(session: Session, run_id: int) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def queued_suites(session: Session, pending_only: bool = False) -> set[str]:
    """Suites submitted (a suite job, or train jobs naming one), whether or not a run is stored yet;
    ``pending_only``: those of jobs still queued or running."""
    names = set()
    q = select(Job.kind, Job.params).where(Job.kind.in_(("suite", "train")))
    if pending_only:
        q = q.where(Job.state.in_((QUEUED, RUNNING)))
    for kind, params in session.execute(q):
        params = params or {}
        name = params.get("suite") if kind == "train" else (params.get("name") or params.get("preset"))
        if name:
            names.add(str(name))
    return names


def require_known_names(
    *,
    task: Sequence[str] | None = None,
    family: Sequence[str] | None = None,
    session: Session | None = None,
) -> None:
    """Raise ``ValueError`` naming the allowed values when a task or family filter names none: a
    typo must not read as "no results". Allowed tasks: every task a run may name here (built-in,
    plugin and the settings' file tasks, as ``GET /api/runs`` allows) and, with ``session``, every
    task of a stored run (a file task that came in a bundle).

    Raises:
        ValueError: e.g. ``task 'dyk' unknown; one of parity, s3, dyck, code_depth``.
    """
    import worker  # noqa: F401  (makes the settings' file tasks known)
    from layerscope_core.registry import family_names
    from science.tasks import task_names

    tasks = list(task_names())
    if task and session is not None and any(t not in tasks for t in task):
        tasks += sorted(t for t in session.execute(select(Run.task).distinct()).scalars() if t not in tasks)
    for what, values, allowed in (("task", task, tasks), ("family", family, family_names())):
        bad = [v for v in values or [] if v not in allowed]
        if bad:
            raise ValueError(f"{what} {', '.join(map(repr, bad))} unknown; one of {', '.join(allowed)}")


def require_suites(session: Session, suites: Sequence[str] | None) -> None:
    """Raise :class:`NotFound` (naming the suites here) when a named suite has no stored run and was
    never queued: a typo must not read as "no data", and a verdict over no runs would read like an
    answer about a study. A queued suite without a run yet (the demo's live suite) is known. The
    jobs are read only when a name is not among the runs' suites (the pages poll these routes)."""
    if not suites:
        return
    stored = {n for n in session.execute(select(Run.suite).where(Run.suite.in_(list(suites))).distinct()).scalars()}
    missing = [name for name in suites if name not in stored]
    if not missing:
        return
    queued = queued_suites(session)
    missing = [name for name in missing if name not in queued]
    if missing:
        here = {n for n in session.execute(select(Run.suite).distinct()).scalars() if n} | queued
        raise NotFound(
            f"suite {', '.join(map(repr, missing))} not found; suites here: "
            f"{', '.join(map(repr, sorted(here))) or 'none'}"
        )


def run_n_layers(session: Session, run_id: int) -> int:
    n = session.execute(select(Run.n_layers).where(Run.id == run_id)).scalar()
    if n is None:
        raise NotFound(f"run {run_id} not found")
    return int(n)


def _result_rows(
    session: Session,
    model: Any,
    run_id: int,
    n_layers: int,
    order: list,
    eval_length: Sequence[int] | None,
    method: Sequence[str] | None = None,
    where: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    cols = [c for c in model.__table__.columns if c.key != "id"]
    q = select(*cols).where(model.run_id == run_id, *where)
    if eval_length:
        q = q.where(model.eval_length.in_(list(eval_length)))
    if method:
        q = q.where(model.method.in_(list(method)))
    out = []
    for r in session.execute(q.order_by(*order)):
        d = {c.key: getattr(r, c.key) for c in cols}
        d["layer_name"] = layer_name(d["layer"])
        d["depth"] = depth(d["layer"], n_layers)
        out.append(d)
    return out


def probe_rows(session: Session, run_id: int, eval_length: Sequence[int] | None = None) -> list[dict[str, Any]]:
    n = run_n_layers(session, run_id)
    return _result_rows(session, ProbeResult, run_id, n, [ProbeResult.eval_length, ProbeResult.layer], eval_length)


def intervention_rows(
    session: Session, run_id: int, eval_length: Sequence[int] | None = None, method: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    n = run_n_layers(session, run_id)
    order = [InterventionResult.eval_length, InterventionResult.method, InterventionResult.layer]
    return _result_rows(session, InterventionResult, run_id, n, order, eval_length, method)


def patching_rows(
    session: Session, run_id: int, eval_length: Sequence[int] | None = None, site: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """A run's patching rows (optionally of some eval lengths / sites), by length, site, layer, position."""
    n = run_n_layers(session, run_id)
    order = [PatchingResult.eval_length, PatchingResult.site, PatchingResult.layer, PatchingResult.position]
    where = [PatchingResult.site.in_(list(site))] if site else []
    return _result_rows(session, PatchingResult, run_id, n, order, eval_length, where=where)


CHUNK = 5000  # run ids per IN (…): far below every database's limit on bound parameters


def rows_of_runs(session: Session, q: Select, run_id: Any, ids: Sequence[int]) -> list[Any]:
    """The rows of ``q`` whose ``run_id`` column is one of ``ids``, asked :data:`CHUNK` ids at a
    time in ascending order (an ``ORDER BY`` of ``q`` that starts with ``run_id`` holds across)."""
    ids = sorted(ids)
    return [row for i in range(0, len(ids), CHUNK) for row in session.execute(q.where(run_id.in_(ids[i : i + CHUNK])))]


RUN_CONTEXT = [Run.task, Run.family, Run.seed, Run.suite, Run.pretrained, Run.n_layers, Run.name.label("run_name")]


def results_across_runs(
    session: Session,
    model: Any,
    flt: RunFilter,
    eval_length: Sequence[int] | None = None,
    method: Sequence[str] | None = None,
    columns: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Result rows of every run matching ``flt``, each with its run's task/family/seed/... (tidy)."""
    cols = [c for c in model.__table__.columns if c.key != "id" and (columns is None or c.key in columns)]
    # the runs alone (ix_runs_read on SQLite: a join would read each run's row past its loss curve)
    context = select(Run.id, *RUN_CONTEXT)
    runs = {r.id: r._mapping for r in session.execute(flt.apply(context))}
    q = select(*cols, model.run_id.label("_run"))
    if eval_length:
        q = q.where(model.eval_length.in_(list(eval_length)))
    if method and hasattr(model, "method"):
        q = q.where(model.method.in_(list(method)))
    q = q.order_by(model.run_id, model.eval_length, model.layer)
    out = []
    taken = {c.key for c in cols}  # a run's field named as a result column's (seed) is "<name>_1", as a join names it
    named = [(k, f"{k}_1" if k in taken else k) for k in list(context.selected_columns.keys())[1:]]
    for r in rows_of_runs(session, q, model.run_id, list(runs)):
        d = dict(r._mapping)
        run = runs[d.pop("_run")]
        d.update((as_, run[k]) for k, as_ in named)
        d["layer_name"] = layer_name(d["layer"])
        d["depth"] = depth(d["layer"], d["n_layers"])
        out.append(d)
    return out
