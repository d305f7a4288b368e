"""Idempotent result writes: a re-run job replaces its rows, never doubles them.

``save_run`` upserts a run by ``config_hash``; ``get_or_create_settings`` writes a
``measure_settings`` row once per settings hash; the ``replace_*_results`` functions take the
science's typed records (``science.records``) or plain dicts, convert them to rows, point them
at their settings row (``settings_id=``), stamp a row that states no ``measurement_version``
with the current one (``science.measurement_version``) and delete-then-insert keyed by each table's unique
key, in one transaction. By default each call
commits (one call = one transaction); pass ``commit=False`` to compose several writes into the
caller's transaction (then the caller commits or rolls back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, insert, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from science.measurement_version import MEASUREMENT_VERSION
from science.records import MeasureSettingsRecord, as_row, behaviour_json
from store.models import (
    Base,
    InterventionResult,
    MeasureSettings,
    PatchingResult,
    ProbeResult,
    ResultWeights,
    Run,
    RunCurve,
    row_columns,
    utcnow,
)
from store.session import rows_matched

_DELETE_CHUNK = 400

# The unique key of each result table, besides run_id (see store/models.py).
PROBE_KEY = ("eval_length", "layer")
INTERVENTION_KEY = ("eval_length", "method", "layer")
PATCHING_KEY = ("eval_length", "site", "layer", "position")


def _columns(model: type[Base]) -> set[str]:
    return {c.key for c in row_columns(model)}


def _check_fields(model: type[Base], fields: dict[str, Any], what: str) -> None:
    unknown = set(fields) - _columns(model) - {"id"}
    if unknown:
        raise ValueError(f"{what}: unknown field(s) {sorted(unknown)} for table {model.__tablename__}")


def _finish(session: Session, commit: bool) -> None:
    if commit:
        session.commit()
    else:
        session.flush()


def save_run(session: Session, *, commit: bool = True, **fields: Any) -> int:
    """Insert a run, or update the run with the same ``config_hash`` (its ``created_at`` then
    becomes now: the row holds a model trained again); return its id. A ``loss_curve`` given
    replaces the run's row in ``run_curves``; none given leaves it as it is."""
    if not fields.get("config_hash"):
        raise ValueError("save_run: config_hash is required (runs are keyed by it)")
    fields.pop("id", None)
    if fields.get("behaviour") is not None:  # {"40": BehaviourRecord | dict} → plain JSON
        fields["behaviour"] = behaviour_json(fields["behaviour"])
    _check_fields(Run, fields, "save_run")
    curve = fields.pop("loss_curve", None)
    dialect = session.get_bind().dialect.name
    try:
        if dialect in ("sqlite", "postgresql"):
            ins = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(Run).values(**fields)
            changed: dict[str, Any] = {k: ins.excluded[k] for k in fields if k not in ("config_hash", "created_at")}
            changed["created_at"] = fields.get("created_at") or utcnow()  # a retrained run is a new model: stored now
            stmt = ins.on_conflict_do_update(index_elements=["config_hash"], set_=changed).returning(Run.id)
            run_id = session.execute(stmt).scalar_one()
        else:  # pragma: no cover - other dialects: select-then-write
            found = session.execute(select(Run.id).where(Run.config_hash == fields["config_hash"])).scalar()
            if found is None:
                run_id = session.execute(insert(Run).values(**fields).returning(Run.id)).scalar_one()
            else:
                run_id = found
                session.execute(update(Run).where(Run.id == run_id).values({"created_at": utcnow(), **fields}))
        if curve is not None:
            session.execute(delete(RunCurve).where(RunCurve.run_id == run_id))
            session.execute(insert(RunCurve).values(run_id=run_id, loss_curve=curve))
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise
    session.expire_all()  # ORM objects loaded before the Core upsert must not show stale values
    return int(run_id)


def drop_results(session: Session, run_id: int, *, commit: bool = True) -> int:
    """Delete every probe, intervention and patching row of ``run_id``; return how many went.

    Called with the upsert of a retrained run (same config hash, new weights): rows measured on
    the model it replaces must not stay attached to the new one, where a measurement stopped
    half-way would otherwise leave old and new results side by side."""
    try:
        n = sum(
            rows_matched(session.execute(delete(model).where(model.run_id == run_id)))
            for model in (ProbeResult, InterventionResult, PatchingResult)
        )
        session.execute(delete(ResultWeights).where(ResultWeights.run_id == run_id))  # what they learned, too
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise
    return n


def get_or_create_settings(session: Session, record: MeasureSettingsRecord, *, commit: bool = True) -> int:
    """The id of the ``measure_settings`` row with ``record.config_hash``, inserted if new
    (concurrent writers: insert-or-ignore on the unique hash, then read it back)."""
    fields = {k: v for k, v in record.to_row().items()}
    dialect = session.get_bind().dialect.name
    try:
        if dialect in ("sqlite", "postgresql"):
            ins = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(MeasureSettings).values(**fields)
            session.execute(ins.on_conflict_do_nothing(index_elements=["config_hash"]))
        elif (
            session.execute(
                select(MeasureSettings.id).where(  # pragma: no cover - other dialects
                    MeasureSettings.config_hash == record.config_hash
                )
            ).scalar()
            is None
        ):
            session.execute(insert(MeasureSettings).values(**fields))
        settings_id = session.execute(
            select(MeasureSettings.id).where(MeasureSettings.config_hash == record.config_hash)
        ).scalar_one()
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise
    return int(settings_id)


Rows = Iterable[Mapping[str, Any]]  # science records (dict-compatible) or plain dicts
# the tables whose rows belong to a run (run_id), replaced per run
ResultTable = type[ProbeResult] | type[InterventionResult] | type[PatchingResult] | type[ResultWeights]


def _replace(
    session: Session,
    model: ResultTable,
    key: Sequence[str],
    run_id: int,
    rows: Rows,
    commit: bool,
    settings_id: int | None = None,
) -> int:
    what = f"replace {model.__tablename__}"
    prepared: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    for row in rows:
        row = as_row(row)
        if settings_id is not None and row.get("settings_id") is None:
            row["settings_id"] = settings_id
        if model is not ResultWeights and row.get("measurement_version") is None:
            row["measurement_version"] = MEASUREMENT_VERSION  # made now: the current code's version
        row.pop("id", None)
        row.pop("layer_name", None)  # served, not stored
        row.pop("depth", None)
        if row.setdefault("run_id", run_id) != run_id:
            raise ValueError(f"{what}: row for run {row['run_id']} passed with run_id={run_id}")
        _check_fields(model, row, what)
        missing = [k for k in key if row.get(k) is None]
        if missing:
            raise ValueError(f"{what}: row lacks key field(s) {missing}")
        k = tuple(row[c] for c in key)
        if k in seen:
            raise ValueError(f"{what}: duplicate key {dict(zip(key, k, strict=True))} in rows")
        seen.add(k)
        prepared.append(row)
    try:
        cols = [getattr(model, c) for c in key]
        keys = sorted(seen)
        for i in range(0, len(keys), _DELETE_CHUNK):
            chunk = keys[i : i + _DELETE_CHUNK]
            session.execute(
                delete(model).where(model.run_id == run_id, tuple_(*cols).in_(chunk)),
                execution_options={"synchronize_session": False},
            )
        if prepared:
            session.execute(insert(model), prepared)
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise
    return len(prepared)


def replace_probe_results(
    session: Session, run_id: int, rows: Rows, *, commit: bool = True, settings_id: int | None = None
) -> int:
    """Replace the run's probe rows that share (eval_length, layer) with ``rows``; return the count.
    ``settings_id``: the ``measure_settings`` row they were made with (set where a row has none)."""
    return _replace(session, ProbeResult, PROBE_KEY, run_id, rows, commit, settings_id)


def replace_intervention_results(
    session: Session, run_id: int, rows: Rows, *, commit: bool = True, settings_id: int | None = None
) -> int:
    """Replace the run's intervention rows that share (eval_length, method, layer) with ``rows``."""
    return _replace(session, InterventionResult, INTERVENTION_KEY, run_id, rows, commit, settings_id)


def replace_result_weights(session: Session, run_id: int, rows: Rows, *, commit: bool = True) -> int:
    """Replace the run's ``result_weights`` rows that share (kind, method, layer, eval_length)."""
    return _replace(session, ResultWeights, ("kind", "method", "layer", "eval_length"), run_id, rows, commit)


def replace_patching_results(
    session: Session, run_id: int, rows: Rows, *, commit: bool = True, settings_id: int | None = None
) -> int:
    """Replace the run's patching rows that share (eval_length, site, layer, position) with ``rows``
    (a row without ``site`` is a ``resid_post`` row, the only site before schema 0002)."""
    rows = [{"site": "resid_post", **as_row(r)} if r.get("site") is None else r for r in rows]
    return _replace(session, PatchingResult, PATCHING_KEY, run_id, rows, commit, settings_id)


# ``runs.status`` of a run trained again (rebuilt, or ``--force``) whose rows of the model it
# replaces were deleted with it, while its job's measurements are not stored again: written in
# the transaction that drops the rows, back to ``trained`` (or ``complete``) once they are. An
# export refuses such a run (docs/SCIENCE.md#rebuilding-weights): not all of its results are there.
REMEASURING = "remeasuring"


def set_run_status(session: Session, run_id: int, status: str, *, commit: bool = True) -> None:
    """Set ``runs.status`` (``trained`` → ``complete`` once every measurement is stored)."""
    try:
        res = session.execute(update(Run).where(Run.id == run_id).values(status=status))
        if rows_matched(res) != 1:
            raise LookupError(f"run {run_id} not found")
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise


def end_remeasuring(session: Session, run_id: int, *, commit: bool = True) -> bool:
    """A run still :data:`REMEASURING` after its job's measurements are stored is ``trained``
    again (a complete one was set ``complete`` with its last write); True when it was."""
    try:
        res = session.execute(update(Run).where(Run.id == run_id, Run.status == REMEASURING).values(status="trained"))
        _finish(session, commit)
    except BaseException:
        session.rollback()
        raise
    return bool(rows_matched(res))
