"""Server-side aggregation of stored results across seeds (mean + 95% t-interval).

Curves: probe accuracy per (task, family, pretrained, n_layers, eval_length, layer) over the
matching runs (one per seed). Profiles: the profile metrics per run (``science.profiles``)
then mean and t-interval over seeds. Claims: ``science.claims`` on the stored rows.
Only the columns needed are read (never ``per_position``), so 1M result rows stay fast.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.api.queries import RunFilter, depth, layer_name, rows_of_runs, trained_clause
from science.claims import DECOUPLING_METHODS  # the first one present counts
from science.stats import bounds_for, t_interval
from store.models import InterventionResult, PatchingResult, ProbeResult, Run, RunCurve

GroupKey = tuple[str | None, str, str, str | None, int, int]  # suite, task, family, pretrained, n_layers, eval_length


class MixedSuites(ValueError):
    """The runs a claims request reads belong to more than one suite: the API answers 422 naming
    ``suite`` and the suites present (docs/SCIENCE.md#suites). Runs of different suites are never
    pooled into one statistic."""

    def __init__(self, suites: Sequence[str | None]) -> None:
        self.suites = sorted({s or "" for s in suites})
        names = ", ".join(repr(s) for s in self.suites)
        super().__init__(
            f"the matching runs belong to {len(self.suites)} suites ({names}); runs of different "
            "suites are never pooled: choose one with ?suite=NAME"
        )


def _suite_key(suite: str | None) -> str:
    return suite or ""


def _f(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)


# what every aggregate reads of a run: columns of ix_runs_read only (store.models.RUNS_READ_COLUMNS)
RUN_FIELDS = (
    Run.id,
    Run.task,
    Run.family,
    Run.pretrained,
    Run.seed,
    Run.n_layers,
    trained_clause().label("trained"),
    Run.suite,
    Run.control,
)


def read_runs(session: Session, flt: RunFilter) -> dict[int, Any]:
    """id → the :data:`RUN_FIELDS` of each run ``flt`` selects, from ``runs`` alone. Joined to the
    result rows instead, SQLite would read each run's record for its trained fields, which lie past
    its loss curve (megabytes); alone, the query reads the index ``ix_runs_read``."""
    return {r.id: r for r in session.execute(flt.apply(select(*RUN_FIELDS)))}


def probe_table(session: Session, flt: RunFilter, eval_length: Sequence[int] | None) -> list[tuple]:
    """(run_id, task, family, pretrained, seed, n_layers, layer, eval_length, accuracy, majority,
    trained, selectivity, suite, control)."""
    runs = read_runs(session, flt)
    q = select(
        ProbeResult.run_id,
        ProbeResult.layer,
        ProbeResult.eval_length,
        ProbeResult.accuracy,
        ProbeResult.majority_baseline,
        ProbeResult.selectivity,
    )
    if eval_length:
        q = q.where(ProbeResult.eval_length.in_(list(eval_length)))
    out = []
    for rid, layer, length, acc, maj, sel in rows_of_runs(session, q, ProbeResult.run_id, list(runs)):
        r = runs[rid]
        out.append(
            (
                rid,
                r.task,
                r.family,
                r.pretrained,
                r.seed,
                r.n_layers,
                layer,
                length,
                acc,
                maj,
                r.trained,
                sel,
                r.suite,
                r.control,
            )
        )
    return out


def curves(session: Session, flt: RunFilter, eval_length: Sequence[int] | None = None) -> list[dict[str, Any]]:
    groups: dict[tuple, list[tuple[int, int, float, float, bool, float | None]]] = defaultdict(list)
    for run_id, task, family, pretrained, seed, n_layers, layer, L, acc, maj, ok, sel, suite, ctl in probe_table(
        session, flt, eval_length
    ):  # one point per suite (and controls apart): never pooled
        groups[(suite, task, family, pretrained, n_layers, L, layer, ctl)].append(
            (run_id, seed, acc, maj, bool(ok), sel)
        )
    out = []
    for key in sorted(groups, key=lambda k: (k[1], k[2], k[3] or "", k[4], k[5], _suite_key(k[0]), k[7] or "", k[6])):
        suite, task, family, pretrained, n_layers, L, layer, ctl = key
        members = sorted(groups[key], key=lambda m: (m[1], m[0]))
        mean, lo, hi = t_interval([m[2] for m in members], bounds=bounds_for("accuracy"))
        majs = [m[3] for m in members if m[3] is not None]
        out.append(
            dict(
                suite=suite,
                task=task,
                family=family,
                pretrained=pretrained,
                eval_length=L,
                layer=layer,
                layer_name=layer_name(layer),
                depth=depth(layer, n_layers),
                n_layers=n_layers,
                mean=_f(mean),
                lo=_f(lo),
                hi=_f(hi),
                n=len(members),
                seeds=[m[1] for m in members],
                majority_baseline=_f(sum(majs) / len(majs)) if majs else None,
                run_ids=[m[0] for m in members],
                untrained_run_ids=[m[0] for m in members if not m[4]],
                selectivity=_f(sum(sels) / len(sels))
                if (sels := [v for v in (_f(m[5]) for m in members) if v is not None])
                else None,
                control=ctl,
            )
        )
    return out


def control_curves(
    session: Session, flt: RunFilter, eval_length: Sequence[int] | None
) -> dict[tuple, dict[int, float]]:
    """(suite, task, family, n_layers, eval_length, seed) → the random-init control's probe curve,
    for the controls of the runs ``flt`` selects (its ``trained`` filter does not apply: a control
    is never trained)."""
    from dataclasses import replace

    out: dict[tuple, dict[int, float]] = defaultdict(dict)
    for row in probe_table(session, replace(flt, controls="only", trained=None, run_id=None), eval_length):
        run_id, task, family, _p, seed, n_layers, layer, L, acc, _maj, _ok, _sel, suite, _ctl = row
        out[(suite, task, family, n_layers, L, seed)][layer] = acc
    return out


# ----------------------------------------------------------------------------- profiles


def _damage_rows(
    session: Session, run_ids: Sequence[int], eval_length: Sequence[int] | None
) -> dict[tuple[int, int], list[dict]]:
    """(run_id, eval_length) → intervention rows (layer, method, delta_pp) of the decoupling methods."""
    out: dict[tuple[int, int], list[dict]] = defaultdict(list)
    if not run_ids:
        return out
    ids = sorted(set(run_ids))
    for i in range(0, len(ids), 5000):
        q = select(
            InterventionResult.run_id,
            InterventionResult.eval_length,
            InterventionResult.method,
            InterventionResult.layer,
            InterventionResult.delta_pp,
        ).where(
            InterventionResult.run_id.in_(ids[i : i + 5000]),
            InterventionResult.method.in_(DECOUPLING_METHODS),
            InterventionResult.layer >= -1,
        )
        if eval_length:
            q = q.where(InterventionResult.eval_length.in_(list(eval_length)))
        for rid, L, method, layer, delta in session.execute(q):
            out[(rid, L)].append({"method": method, "layer": layer, "delta_pp": delta})
    return out


def profiles(session: Session, flt: RunFilter, eval_length: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Per (task, family, pretrained, n_layers, eval_length): ``science.profiles.summarise_profiles``
    over the seeds, plus each seed's most-damaging layer and decoupling distance."""
    from science import profiles as P

    curves: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
    bases: dict[tuple[int, int], list[float]] = defaultdict(list)
    meta: dict[int, tuple] = {}
    trained: dict[int, bool] = {}
    for run_id, task, family, pretrained, seed, n_layers, layer, L, acc, maj, ok, _sel, suite, _c in probe_table(
        session, flt, eval_length
    ):
        trained[run_id] = bool(ok)
        curves[(run_id, L)][layer] = acc
        if maj is not None:
            bases[(run_id, L)].append(maj)
        meta[run_id] = (suite, task, family, pretrained, n_layers, seed)
    damage = _damage_rows(session, list(meta), eval_length)
    controls = control_curves(session, flt, eval_length)
    groups: dict[GroupKey, list[tuple[int, int]]] = defaultdict(list)
    for (run_id, L), c in curves.items():
        suite, task, family, pretrained, n_layers, seed = meta[run_id]
        if sorted(c) != list(range(-1, n_layers)) or any(v is None or not math.isfinite(v) for v in c.values()):
            continue  # a gapped curve (a partly written run): no profile for it yet
        groups[(suite, task, family, pretrained, n_layers, L)].append((seed, run_id))  # a cell per suite
    out = []
    for key in sorted(groups, key=lambda k: (k[1], k[2], k[3] or "", k[4], k[5], _suite_key(k[0]))):
        suite, task, family, pretrained, n_layers, L = key
        members = sorted(groups[key])
        cs = [curves[(rid, L)] for _, rid in members]
        bl = [(sum(bases[(rid, L)]) / len(bases[(rid, L)])) if bases[(rid, L)] else None for _, rid in members]
        summary = P.summarise_profiles(cs, bl, seeds=[seed for seed, _ in members])
        # intervals already clipped to each metric's range (science.profiles.summarise_profiles)
        metrics = {k: {kk: _f(vv) if kk != "n" else vv for kk, vv in v.items()} for k, v in summary["metrics"].items()}
        dists, damaging = [], []
        for row, (_seed, rid), c in zip(summary["per_seed"], members, cs, strict=True):
            row["run_id"] = rid
            row["trained"] = trained[rid]
            rows = damage.get((rid, L), [])
            method = next((m for m in DECOUPLING_METHODS if any(r["method"] == m for r in rows)), None)
            d = P.decoupling(c, [r for r in rows if r["method"] == method], method=method) if method else None
            row["decoupling_method"] = method
            row["damaging_layer"] = d["damaging_layer"] if d else None
            row["decoupling_distance"] = d["distance"] if d else None
            if d and d["damaging_layer"] is not None:
                damaging.append(d["damaging_layer"])
                dists.append(d["distance"])
            for k, v in list(row.items()):
                row[k] = _f(v) if isinstance(v, float) else v
        for name, vals in (("damaging_layer", damaging), ("decoupling_distance", dists)):
            mean, lo, hi = t_interval(vals) if vals else (None, None, None)
            metrics[name] = {"mean": _f(mean), "lo": _f(lo), "hi": _f(hi), "n": len(vals)}
        out.append(
            dict(
                suite=suite,
                task=task,
                family=family,
                pretrained=pretrained,
                eval_length=L,
                n_layers=n_layers,
                n=summary["n"],
                seeds=[seed for seed, _ in members],
                profile_class=summary["profile_class"],
                class_counts=summary["class_votes"],
                metrics=metrics,
                per_seed=summary["per_seed"],
                untrained_run_ids=[rid for _, rid in members if not trained[rid]],
                stability=summary["stability"],
                against_control=_against_control(
                    cs,
                    [controls.get((suite, task, family, n_layers, L, seed)) for seed, _ in members],
                    [seed for seed, _ in members],
                ),
            )
        )
    return out


def _against_control(
    curves: list[dict[int, float]], ctrls: list[dict[int, float] | None], seeds: list[int]
) -> dict[str, Any] | None:
    """``science.profiles.summarise_against_controls`` when every seed has its control (JSON-safe), else None."""
    from science import profiles as P

    known = [c for c in ctrls if c is not None]
    if not curves or len(known) != len(ctrls) or any(sorted(c) != sorted(k) for c, k in zip(known, curves)):
        return None
    s = P.summarise_against_controls(curves, known, seeds=seeds)
    s["control_curve"] = {str(k): _f(v) for k, v in s["control_curve"].items()}
    s["metrics"] = {k: {kk: _f(vv) if kk != "n" else vv for kk, vv in v.items()} for k, v in s["metrics"].items()}
    s["per_seed"] = [{k: _f(v) if isinstance(v, float) else v for k, v in row.items()} for row in s["per_seed"]]
    return s


def profiles_tidy(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (task, family, pretrained, eval_length, floor, metric): the export's tidy form;
    ``floor`` "majority" (against the majority rate) or "control" (against the random-init
    controls, where stored)."""
    rows = []
    for p in items:
        views = [("majority", p["profile_class"], p["metrics"])]
        if p.get("against_control"):
            views.append(("control", p["against_control"]["profile_class"], p["against_control"]["metrics"]))
        for floor, cls, metrics in views:
            for name, m in metrics.items():
                rows.append(
                    dict(
                        suite=p.get("suite"),
                        task=p["task"],
                        family=p["family"],
                        pretrained=p["pretrained"],
                        eval_length=p["eval_length"],
                        n_layers=p["n_layers"],
                        profile_class=cls,
                        seeds=p["seeds"],
                        untrained_run_ids=p.get("untrained_run_ids") or [],
                        floor=floor,
                        metric=name,
                        mean=m["mean"],
                        lo=m["lo"],
                        hi=m["hi"],
                        n=m["n"],
                    )
                )
    return rows


# ----------------------------------------------------------------------------- claims


# a run's fields as the claims read them (science.claims.evaluate_claims), in this order
CLAIM_RUN_KEYS = (
    "id",
    "task",
    "family",
    "seed",
    "n_layers",
    "pretrained",
    "behaviour",
    "heldout_acc",
    "early_stop_acc",
    "stop_reason",
    "best_heldout_acc",
    "steps",
    "train_config",
)
RUN_BEFORE_CURVE = ("behaviour", "steps", "train_config")  # not in ix_runs_read: read from the rows


def claims(session: Session, flt: RunFilter) -> list[dict[str, Any]]:
    """``science.claims.evaluate_claims`` on the stored runs (with their trained fields), probes and
    interventions at its evaluation length, and the ``state``-site patching rows, in words
    (``backend.claims_text.present_claims``: title, detail, views)."""
    from backend.claims_text import present_claims
    from science import claims as C
    from science.plateau import stop_slope

    L = C.EVAL_LENGTH
    # the runs from ix_runs_read (as read_runs), then the fields the index does not hold
    light = [Run.id, Run.task, Run.family, Run.seed, Run.n_layers, Run.pretrained, Run.heldout_acc]
    light += [Run.early_stop_acc, Run.stop_reason, Run.best_heldout_acc, Run.suite]
    rows = [dict(r._mapping) for r in session.execute(flt.apply(select(*light)))]
    if len({_suite_key(r["suite"]) for r in rows}) > 1:
        raise MixedSuites([r["suite"] for r in rows])
    before = select(Run.id, Run.behaviour, Run.steps, Run.train_config)
    stored = {row.id: row._mapping for row in rows_of_runs(session, before, Run.id, [r["id"] for r in rows])}
    runs = [{k: (stored[r["id"]] if k in RUN_BEFORE_CURVE else r)[k] for k in CLAIM_RUN_KEYS} for r in rows]
    # the stage a stopped run ended at ("not learned … at the L 12 curriculum stage") and its slope at
    # the stop with its budget share (docs/SCIENCE.md#plateau); the loss curves of those runs only (a
    # whole study's curves are megabytes: run_curves, read here only)
    stopped = [r["id"] for r in runs if r["stop_reason"] in ("plateau", "budget")]
    if stopped:
        stopped_ids = set(stopped)
        curves: dict[int, Any] = dict(
            session.execute(select(RunCurve.run_id, RunCurve.loss_curve).where(RunCurve.run_id.in_(stopped))).all()
        )
        for r in runs:
            if r["id"] in stopped_ids:  # a run without a stored curve reads as an empty one
                curve = curves.get(r["id"], [])
                r["stop_length"] = C.stop_length({"loss_curve": curve})
                r["stop_slope"] = stop_slope({**r, "loss_curve": curve})
    probes = [
        dict(run_id=rid, layer=layer, eval_length=el, accuracy=acc, majority_baseline=maj)
        for rid, _t, _f_, _p, _s, _n, layer, el, acc, maj, _ok, _sel, _su, _c in probe_table(session, flt, [L])
    ]
    controls = [
        dict(task=task, family=fam, seed=seed, n_layers=n, curve=curve)
        for (_su, task, fam, n, _L, seed), curve in control_curves(session, flt, [L]).items()
    ]
    iv_cols = [
        InterventionResult.run_id,
        InterventionResult.method,
        InterventionResult.layer,
        InterventionResult.eval_length,
        InterventionResult.delta_pp,
        InterventionResult.drop_rel_chance,
        InterventionResult.refit_acc,
        InterventionResult.refit_majority,
        InterventionResult.refit_line,
        InterventionResult.p_value,
        InterventionResult.p_holm,
        InterventionResult.significant,
        InterventionResult.rank_removed,
        InterventionResult.random_delta_pp,
    ]
    ids = [r["id"] for r in runs]
    iv = select(*iv_cols).where(InterventionResult.eval_length == L)
    interventions = [dict(r._mapping) for r in rows_of_runs(session, iv, InterventionResult.run_id, ids)]
    pcols = [
        PatchingResult.run_id,
        PatchingResult.site,
        PatchingResult.layer,
        PatchingResult.position,
        PatchingResult.eval_length,
        PatchingResult.recovery,
    ]
    pq = select(*pcols).where(PatchingResult.site == C.STATE_SITE)
    patching = [dict(r._mapping) for r in rows_of_runs(session, pq, PatchingResult.run_id, ids)]
    return present_claims(C.evaluate_claims(runs, probes, interventions, patching, controls=controls))


# ----------------------------------------------------------------------------- caching


class ResultCache:
    """Aggregates memoised per (what, filters) and a fingerprint of the result tables.

    Result writes only ever insert new rows (a re-run deletes then inserts: new ids), so the
    largest ids plus the run count change whenever anything an aggregate reads changes. The
    fingerprint costs four index look-ups; the aggregate over 1M rows costs seconds.

    One computation per key at a time: a request for a key being computed (the dashboard's
    callbacks and a start-up warm-up ask for the same aggregates at once) waits for that result
    instead of computing it again; if that computation fails, the next waiter computes."""

    def __init__(self, size: int = 64) -> None:
        from collections import OrderedDict
        from threading import Lock

        self.size = size
        self._data: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = Lock()
        self._running: dict[tuple, Any] = {}  # key → threading.Event set when its computation ends
        self.hits = self.misses = 0

    @staticmethod
    def fingerprint(session: Session) -> tuple:
        from sqlalchemy import func

        q = select(
            select(func.max(ProbeResult.id)).scalar_subquery(),
            select(func.max(InterventionResult.id)).scalar_subquery(),
            select(func.max(PatchingResult.id)).scalar_subquery(),
            select(func.max(Run.id)).scalar_subquery(),
            select(func.count(Run.id)).scalar_subquery(),
            # a run trained again (same id, new weights, its old result rows deleted) is stored anew
            select(func.max(Run.created_at)).scalar_subquery(),
        )
        return tuple(session.execute(q).one())

    def get(self, session: Session, key: tuple, compute: Any) -> Any:
        from threading import Event

        full = (key, self.fingerprint(session))
        while True:
            with self._lock:
                if full in self._data:
                    self._data.move_to_end(full)
                    self.hits += 1
                    return self._data[full]
                running = self._running.get(full)
                if running is None:
                    done = self._running[full] = Event()
                    break
            running.wait()  # then read its result (or compute, had it failed)
        try:
            value = compute()
            with self._lock:
                self.misses += 1
                self._data[full] = value
                while len(self._data) > self.size:
                    self._data.popitem(last=False)
            return value
        finally:
            with self._lock:
                del self._running[full]
            done.set()
