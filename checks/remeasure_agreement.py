"""Measure a bundle's run again with today's code and hold the numbers to the tolerances between
measurement versions (docs/SCIENCE.md#measurement-versions).

    python checks/remeasure_agreement.py BUNDLE RUN_ID [--device cpu]

RUN_ID is the run's id in the bundle's runs table. The bundle is imported into a scratch SQLite
database with its own store (a temporary folder, removed at the end); the run's weights are
rebuilt within its recorded steps (docs/SCIENCE.md#rebuilding-weights) — or taken from the
bundle when it carries them — and measured with the settings of its preset, which must be the
settings its rows were made with. Printed: per table (probes, interventions, refits, patching)
the largest difference against the bundle's rows, where it is and the tolerance; then the
verdicts (each eval length's profile class, each edit row's kind — removed or not by its refit,
an INLP selective or not — and, between rows of one kind, its significance). A refit both sides
place at chance is compared by that class, not by its digits (docs/SCIENCE.md#row-kinds).
Exit status: 0 within every tolerance with every verdict unchanged, 1 outside, 2 when the run
cannot be measured again here (no such run, no preset makes it, other settings).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.figures.causal_controls import not_selective
from science.claims.necessity import edit_removed
from science.measurement_version import MEASUREMENT_VERSION, TOLERANCES
from science.methods import traits_meta
from science.profiles import profile_class

PROBE_KEY = ("eval_length", "layer")
EDIT_KEY = ("eval_length", "method", "layer")
PATCH_KEY = ("eval_length", "site", "layer", "position")
# Activation patching fits nothing: a patched forward pass differs between versions only by the
# capture's floating-point order, so its recovery (a fraction, 1.0 = full) is held to 0.01.
PATCH_RECOVERY_TOL = 0.01
SETTINGS_COLUMNS = ("eval_lengths", "patch_eval_length", "fit_length", "intervention_layers")


# INLP's reference rounds (Alg. 1 as written, science.inlp.inlp_directions_reference) measured
# beside today's: a rank INLP's fit chose is compared with the interval the two exact
# implementations span on the same rows (docs/SCIENCE.md#measurement-versions)
REFERENCE = "inlp_reference"


def _inlp_reference() -> Any:
    """``Inlp(from_scratch=True)`` as a method of its own (its round budget declared without the
    built-in's job field, which only a built-in may name)."""
    from layerscope_core.method_params import MethodParam
    from science.edit_methods import Inlp

    (budget,) = Inlp.params

    class InlpReference(Inlp):
        params = (MethodParam(budget.name, budget.type, budget.default, budget.help, ge=budget.ge, le=budget.le),)

    return InlpReference(from_scratch=True)


class CannotRemeasure(RuntimeError):
    """The run cannot be measured again here (exit status 2)."""


@dataclass
class Line:
    """One table's largest difference: ``value`` (in ``unit``) at ``where``, against ``tol``."""

    table: str
    rows: int
    value: float | None
    unit: str
    where: str
    tol: float
    missing: int = 0  # rows on one side only

    @property
    def ok(self) -> bool:
        return self.missing == 0 and (self.value is None or self.value <= self.tol + 1e-12)

    def text(self) -> str:
        largest = "no values" if self.value is None else f"{self.value:.4g} {self.unit} at {self.where}"
        missing = f"; {self.missing} row(s) on one side only" if self.missing else ""
        return (
            f"{self.table:<14} {self.rows:>5} rows  largest difference {largest} "
            f"(tolerance {self.tol:g} {self.unit}){missing}: {'within' if self.ok else 'OUTSIDE'}"
        )


def _keyed(rows: Sequence[dict[str, Any]], key: Sequence[str]) -> dict[tuple, dict[str, Any]]:
    return {tuple(r.get(k) if k != "site" else r.get(k) or "resid_post" for k in key): r for r in rows}


def _largest(
    table: str,
    old: Sequence[dict[str, Any]],
    new: Sequence[dict[str, Any]],
    key: Sequence[str],
    diff: Callable[[dict[str, Any], dict[str, Any]], float | None],
    unit: str,
    tol: float,
    ref: dict[tuple, dict[str, Any]] | None = None,
    field: str | None = None,
) -> Line:
    """The largest ``diff(old_row, new_row)`` over the rows both sides have (None: not comparable).
    Where ``ref`` (keyed like the rows) has a twin of the new row — the reference implementation's
    row of an INLP — the old row is compared with the interval the two span: 0 when its ``field``
    lies between them, else its difference from the nearer end."""
    a, b = _keyed(old, key), _keyed(new, key)
    best: tuple[float, tuple] | None = None
    for k in a.keys() & b.keys():
        d = diff(a[k], b[k])
        twin = (ref or {}).get(k)
        if d is not None and twin is not None and field is not None:
            d = _interval_distance(a[k], b[k], twin, field, diff, d)
        if d is not None and (best is None or d > best[0]):
            best = (d, k)
    where = ", ".join(f"{n}={v}" for n, v in zip(key, best[1], strict=True)) if best else ""
    return Line(table, len(a.keys() & b.keys()), best[0] if best else None, unit, where, tol, len(a.keys() ^ b.keys()))


def _interval_distance(
    x: dict[str, Any],
    y: dict[str, Any],
    twin: dict[str, Any],
    field: str,
    diff: Callable[[dict[str, Any], dict[str, Any]], float | None],
    d: float,
) -> float:
    """``x``'s distance from the interval ``y`` and ``twin`` span in ``field`` (``d`` = diff(x, y))."""
    u, v, w = x.get(field), y.get(field), twin.get(field)
    if u is None or v is None or w is None:
        return d
    if min(v, w) <= u <= max(v, w):
        return 0.0
    dt = diff(x, twin)
    return d if dt is None else min(d, dt)


def _pp(field: str) -> Callable[[dict[str, Any], dict[str, Any]], float | None]:
    """|old − new| of an accuracy field in percentage points; a None on one side only is infinite."""

    def diff(x: dict[str, Any], y: dict[str, Any]) -> float | None:
        u, v = x.get(field), y.get(field)
        if u is None and v is None:
            return None
        if u is None or v is None:
            return float("inf")
        return abs(float(u) - float(v)) * 100.0

    return diff


def _rank(x: dict[str, Any], y: dict[str, Any]) -> float | None:
    """A removed rank the fit chose (INLP's; ``EditMethod.rank_chosen_by_fit``): |old − new| / the
    larger (0 when both are 0); None for a method whose rank is a parameter."""
    chosen = traits_meta().get(str(x.get("method")), {}).get("rank_chosen_by_fit", False)
    if not chosen or x.get("rank_removed") is None and y.get("rank_removed") is None:
        return None
    u, v = x.get("rank_removed"), y.get("rank_removed")
    if u is None or v is None:
        return float("inf")
    return abs(u - v) / max(u, v) if max(u, v) else 0.0


def _refit(x: dict[str, Any], y: dict[str, Any]) -> float | None:
    """|old − new| refit accuracy in pp, or 0 when both refits are at chance (at or under their
    removal line, ``science.claims.necessity.edit_removed``: what claim 4 reads as removed),
    whose digits are a probe's fit to nothing left to read (docs/SCIENCE.md#row-kinds)."""
    if _removal(x) == _removal(y) == "removed":
        return 0.0
    return _pp("refit_acc")(x, y)


def _removal(row: dict[str, Any]) -> str | None:
    """An edit row's removal class as claim 4 reads it (``science.claims.necessity.edit_removed``):
    "removed" (refit ≤ the row's ``refit_line``, or majority + ``REFIT_TOL`` on a version 1 row),
    "not removed", or None without a refit."""
    if row.get("refit_acc") is None or (row.get("refit_majority") is None and row.get("refit_line") is None):
        return None
    return "removed" if edit_removed(row) else "not removed"


def _over(row: dict[str, Any]) -> str:
    """The refit's distance from its majority rate, ``+10.0 pp``, and from it its removal line's
    where the row stores one (empty without a refit)."""
    if row.get("refit_acc") is None or row.get("refit_majority") is None:
        return ""
    over = f"refit {100 * (float(row['refit_acc']) - float(row['refit_majority'])):+.1f} pp over majority"
    if row.get("refit_line") is None:
        return over
    return f"{over} (its removal line {100 * (float(row['refit_line']) - float(row['refit_majority'])):+.1f})"


def kind(row: dict[str, Any], width: int | None) -> tuple[str | None, bool]:
    """What kind of edit row it is for the readers of its verdicts: its removal class
    (:func:`_removal`) and whether /probe-vs-causal flags it "not selective" (a fitted rank over
    half the width ``width``, ``dashboard.figures.causal_controls.not_selective``)."""
    return _removal(row), not_selective(row, width, traits_meta())


def _kind_text(row: dict[str, Any], width: int | None) -> str:
    removal, broad = kind(row, width)
    rank = f"rank {row['rank_removed']}" + (f" of {width}" if width else "") if _rank_chosen(row) else ""
    parts = [removal or "no refit", _over(row), rank, "not selective" if broad else ""]
    return ", ".join(p for p in parts if p)


def edit_changes(
    old: Sequence[dict[str, Any]],
    new: Sequence[dict[str, Any]],
    reference: Sequence[dict[str, Any]] = (),
    width: int | None = None,
) -> list[str]:
    """The edit rows whose verdicts changed (docs/SCIENCE.md#row-kinds): a row's kind (removal
    class, selectivity) changed — a line of its own —, or, between rows of one kind, its
    significance. An INLP row is held to the two exact implementations (``reference`` keyed like
    the rows, as its rank and refit are): an old kind or verdict that either one gives is kept."""
    a, b, ref = _keyed(old, EDIT_KEY), _keyed(new, EDIT_KEY), _keyed(reference, EDIT_KEY)
    out: list[str] = []
    for k in sorted(a.keys() & b.keys(), key=lambda k: (str(k[1]), k[2], k[0])):
        x, y, twin = a[k], b[k], ref.get(k)
        where = f"{k[1]} at layer {k[2]}, L={k[0]}"
        sides = [y] if twin is None else [y, twin]
        if kind(x, width) not in [kind(z, width) for z in sides]:
            out.append(f"{where}: kind {_kind_text(x, width)} → {_kind_text(y, width)}")
        elif x.get("significant") not in [z.get("significant") for z in sides if kind(z, width) == kind(x, width)]:
            rank = f" (rank {x.get('rank_removed')} → {y.get('rank_removed')})" if _rank_chosen(x) else ""
            out.append(f"{where}: significant {x.get('significant')} → {y.get('significant')}{rank}")
    return out


def whole_width(
    old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]], width: int | None
) -> list[str]:
    """One line per layer where today's INLP and the reference rounds both removed the whole width
    (mean ablation) and the old row stopped short of it: the place to look for rounds that went
    on past chance (docs/SCIENCE.md#inlp-chance-line)."""
    if not width:
        return []
    a, b, ref = _keyed(old, EDIT_KEY), _keyed(new, EDIT_KEY), _keyed(reference, EDIT_KEY)
    found = sorted(
        {
            (k[1], k[2], a[k].get("rank_removed"))
            for k in a.keys() & b.keys() & ref.keys()
            if b[k].get("rank_removed") == ref[k].get("rank_removed") == width
            and (a[k].get("rank_removed") or 0) < width
        },
        key=str,
    )
    return [
        f"({method} at layer {layer}: today's rounds and the reference both removed the whole width ({width} of "
        f"{width}, mean ablation) where the bundle's stopped at rank {rank}: see docs/SCIENCE.md#inlp-chance-line)"
        for method, layer, rank in found
    ]


def _recovery(x: dict[str, Any], y: dict[str, Any]) -> float | None:
    u, v = x.get("recovery"), y.get("recovery")
    if u is None and v is None:
        return None
    return float("inf") if u is None or v is None else abs(float(u) - float(v))


def _classes(probes: Sequence[dict[str, Any]]) -> dict[int, str]:
    """Eval length → the profile class of the run's probe curve (science.profiles)."""
    curves: dict[int, dict[int, float]] = defaultdict(dict)
    bases: dict[int, list[float]] = defaultdict(list)
    for p in probes:
        curves[p["eval_length"]][p["layer"]] = p["accuracy"]
        bases[p["eval_length"]].append(p["majority_baseline"])
    return {L: profile_class(c, statistics.fmean(bases[L])) for L, c in sorted(curves.items())}


def compare(
    old: dict[str, list[dict[str, Any]]],
    new: dict[str, list[dict[str, Any]]],
    reference: Sequence[dict[str, Any]] = (),
    width: int | None = None,
) -> tuple[list[Line], list[str]]:
    """(one :class:`Line` per table, the verdicts that changed) between the bundle's rows ``old``
    and today's ``new`` (``probe_results``, ``intervention_results``, ``patching_results``).
    ``reference``: intervention rows of INLP's reference rounds on the same rows (method named
    as today's), against which an INLP rank, its refit and its verdicts are read as an interval.
    ``width``: the run's d_model (an INLP over half of it is "not selective"; None: never)."""
    tol = TOLERANCES
    ref = _keyed(reference, EDIT_KEY)
    probes_old, probes_new = old["probe_results"], new["probe_results"]
    edits_old, edits_new = old["intervention_results"], new["intervention_results"]
    refits_old = [r for r in edits_old if r.get("refit_acc") is not None]
    refits_new = [r for r in edits_new if r.get("refit_acc") is not None]
    lines = [
        _largest("probes", probes_old, probes_new, PROBE_KEY, _pp("accuracy"), "pp", tol["probe_accuracy_pp"]),
        _largest(
            "probe controls",
            probes_old,
            probes_new,
            PROBE_KEY,
            _pp("control_accuracy"),
            "pp",
            tol["probe_accuracy_pp"],
        ),
        _largest(
            "interventions",
            edits_old,
            edits_new,
            EDIT_KEY,
            _rank,
            "of the rank",
            tol["inlp_rank_rel"],
            ref,
            "rank_removed",
        ),
        _largest(
            "refits",
            refits_old,
            refits_new,
            EDIT_KEY,
            _refit,
            "pp",
            tol["refit_accuracy_pp"],
            ref,
            "refit_acc",
        ),
        _largest(
            "patching",
            old["patching_results"],
            new["patching_results"],
            PATCH_KEY,
            _recovery,
            "recovery",
            PATCH_RECOVERY_TOL,
        ),
    ]
    classes_new = _classes(probes_new)
    changed = [
        f"profile class at L={L}: {c} → {classes_new.get(L)}"
        for L, c in _classes(probes_old).items()
        if classes_new.get(L) != c
    ]
    changed += edit_changes(edits_old, edits_new, reference, width)
    return lines, changed


def edit_drops(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> Line:
    """The largest change of an edit's drop (``delta_pp``): shown beside the tolerances, held to its
    verdict (significance) rather than to a number of its own."""
    return _largest("edit drops", old, new, EDIT_KEY, lambda x, y: abs(x["delta_pp"] - y["delta_pp"]), "pp", 100.0)


def _settings_problem(bundle: dict[str, Any] | None, now: dict[str, Any] | None) -> str | None:
    """Why the rows of settings ``now`` do not compare with the bundle's ``bundle`` (None: they do).
    A measure parameter added since (one side only) is not a difference."""
    if bundle is None or now is None:
        return None if bundle is now else "one side has no recorded measure settings"
    diffs = [k for k in SETTINGS_COLUMNS if bundle.get(k) != now.get(k)]
    p, q = bundle.get("params") or {}, now.get("params") or {}
    diffs += [f"params.{k}" for k in sorted(p.keys() & q.keys()) if p[k] != q[k]]
    return f"measured here with other settings ({', '.join(diffs)})" if diffs else None


def remeasure(
    bundle: Path, run_id: int, *, device: str = "cpu", work: Path, reference_rounds: bool = True
) -> dict[str, Any]:
    """Import ``bundle`` into a scratch database under ``work``, rebuild (or load) run ``run_id``'s
    weights and measure it. Returns ``{run_old, run_new, old, new, settings_problem, versions}``.

    Raises:
        CannotRemeasure: no run ``run_id`` in the bundle, no preset makes it, or it was measured
            with settings this code's preset does not give.
    """
    from sqlalchemy import select

    from backend.bundle import table_row
    from backend.bundle_scratch import NoSuchRun, scratch_run
    from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult, Run
    from worker import persist
    from worker.pipeline import run_suite

    try:
        scratch = scratch_run(bundle, run_id, work, device=device)
    except NoSuchRun as exc:
        raise CannotRemeasure(str(exc)) from None
    env, tables, run_old, params, new_id = scratch.env, scratch.tables, scratch.row, scratch.params, scratch.run_id
    names = ("probe_results", "intervention_results", "patching_results")
    old = {t: [r for r in tables[t] if r.get("run_id") == run_id] for t in names}
    settings_old = {r["id"]: r for r in tables.get("measure_settings", [])}
    with env.session_factory() as s:
        run = s.get(Run, new_id)
        if run.checkpoint_id and (env.store_dir / run.checkpoint_id).is_dir():  # weights came with the bundle
            persist.drop_results(s, run.id, commit=False)
            persist.set_run_status(s, run.id, "trained")
            params = params.model_copy(update={"rebuild_weights": False})
    run_suite(params, env)
    with env.session_factory() as s:
        run_new = table_row(s.get(Run, new_id))
        new = {
            m.__tablename__: [table_row(r) for r in s.execute(select(m).where(m.run_id == new_id)).scalars()]
            for m in (ProbeResult, InterventionResult, PatchingResult)
        }
        # keyed as a row's settings_id is read below (None: a row without settings)
        settings_new: dict[int | None, dict[str, Any]] = {
            r.id: table_row(r) for r in s.execute(select(MeasureSettings)).scalars()
        }
    reference: list[dict[str, Any]] = []
    again: list[dict[str, Any]] = []
    if reference_rounds and any(_rank_chosen(r) for r in old["intervention_results"]):
        reference, again = _reference_rows(env, new_id, new["intervention_results"], settings_new)
    problems = {
        _settings_problem(settings_old.get(a.get("settings_id")), settings_new.get(b.get("settings_id")))
        for t in names
        for a, b in zip(old[t][:1], new[t][:1], strict=False)
    }
    return {
        "run_old": run_old,
        "run_new": run_new,
        "old": old,
        "new": new,
        "settings_problem": "; ".join(sorted(p for p in problems if p)) or None,
        "versions": sorted({r.get("measurement_version", 1) for t in names for r in old[t]}),
        "reference": reference,
        "again": again,
    }


def _rank_chosen(row: dict[str, Any]) -> bool:
    """A row of a method whose fit chooses its rank (INLP: ``EditMethod.rank_chosen_by_fit``)."""
    return bool(traits_meta().get(str(row.get("method")), {}).get("rank_chosen_by_fit", False))


def _reference_rows(
    env: Any, run_id: int, edits: Sequence[dict[str, Any]], settings: dict[int | None, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """INLP measured once more on run ``run_id`` of the scratch database with the settings of
    today's INLP rows ``edits``, by today's rounds and by the reference rounds together (one
    intervene job: the same fit sets, probes and seeds). Returns (the reference's rows, named
    ``inlp`` as today's are; today's rows of this pass, which must equal ``edits``'s)."""
    from layerscope_core.registry import register_method, unregister_method
    from worker.job_params import InterveneParams, MeasureParams
    from worker.pipeline import intervene

    rows = [r for r in edits if r.get("method") == "inlp"]
    if not rows:
        return [], []
    measured = MeasureParams.model_validate(settings[rows[0].get("settings_id")]["params"])
    budget = measured.inlp_max_rounds
    register_method(REFERENCE, _inlp_reference())
    try:
        job = InterveneParams(
            run_id=run_id,
            methods=["inlp", REFERENCE],
            layers=sorted({r["layer"] for r in rows}),
            eval_lengths=sorted({r["eval_length"] for r in rows}),
            inlp_max_rounds=budget,
            method_params={REFERENCE: {"max_rounds": budget}} if budget is not None else {},
            conv1d=False,
            n_probe_sequences=measured.n_probe_sequences,
            n_permutations=measured.n_permutations,
        )
        intervene(job, env)
        from sqlalchemy import select

        from backend.bundle import table_row
        from store.models import InterventionResult

        with env.session_factory() as s:
            got = [
                table_row(r)
                for r in s.execute(select(InterventionResult).where(InterventionResult.run_id == run_id)).scalars()
            ]
    finally:
        unregister_method(REFERENCE)
    reference = [{**r, "method": "inlp"} for r in got if r["method"] == REFERENCE]
    return reference, [r for r in got if r["method"] == "inlp"]


def report(result: dict[str, Any]) -> tuple[list[str], bool]:
    """The printed lines and whether everything is within the tolerances."""
    ro, rn = result["run_old"], result["run_new"]
    head = (
        f"run {ro['id']} {ro['name']} ({ro['family']}, {ro['task']}, seed {ro['seed']}): bundle measurement "
        f"version {', '.join(map(str, result['versions'])) or '-'}, measured again with version "
        f"{MEASUREMENT_VERSION}; training {ro['steps']} steps, held-out acc {ro.get('heldout_acc')} in the "
        f"bundle, {rn['steps']} steps, {rn.get('heldout_acc')} here"
    )
    reference = result.get("reference") or []
    lines, changed = compare(result["old"], result["new"], reference, ro.get("d_model"))
    out = [head, *(x.text() for x in lines)]
    if reference:
        out.append(_reference_text(result["new"]["intervention_results"], reference, result.get("again") or []))
        edits = result["old"]["intervention_results"], result["new"]["intervention_results"]
        out += whole_width(*edits, reference, ro.get("d_model"))
    drops = edit_drops(result["old"]["intervention_results"], result["new"]["intervention_results"])
    out.append(
        f"(edit drops: largest change {drops.value:.4g} pp at {drops.where}; held to their verdicts)"
        if drops.value is not None
        else "(edit drops: none to compare)"
    )
    out.append("verdicts and classes: " + ("all unchanged" if not changed else "CHANGED: " + "; ".join(changed)))
    ok = all(x.ok for x in lines) and not changed
    out.append("agreement: within the tolerances" if ok else "agreement: OUTSIDE the tolerances")
    return out, ok


def _reference_text(
    edits: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]], again: Sequence[dict[str, Any]]
) -> str:
    """How far today's INLP and the reference rounds stop apart on the same rows (the interval an
    old INLP rank and refit are read against), and whether today's rows came out the same again."""
    today, ref = _keyed([r for r in edits if r.get("method") == "inlp"], EDIT_KEY), _keyed(reference, EDIT_KEY)
    spread = [(_rank(today[k], ref[k]) or 0.0, k) for k in today.keys() & ref.keys()]
    values = ("rank_removed", "refit_acc", "delta_pp")
    first = _keyed(edits, EDIT_KEY)
    same = all(
        k in first and all(r.get(f) == first[k].get(f) for f in values) for k, r in _keyed(again, EDIT_KEY).items()
    )
    widest = max(spread, key=lambda t: t[0]) if spread else (0.0, ())
    return (
        f"(INLP reference rounds on the same rows: {len(spread)} rows; today's and the reference stop at ranks up to "
        f"{widest[0]:.3g} apart (at {widest[1]}); an old INLP rank or refit inside the interval they span counts as "
        f"0; today's INLP rows measured again {'identical' if same else 'DIFFERENT: settings of the two passes differ'})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("run_id", type=int, help="the run's id in the bundle's runs table")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    ap.add_argument(
        "--rows", type=Path, help="also write both sides' rows (and the INLP reference rows) to this JSON file"
    )
    args = ap.parse_args(argv)
    from backend.bundle import BundleError

    with tempfile.TemporaryDirectory(prefix="layerscope-remeasure-") as tmp:
        try:
            result = remeasure(args.bundle, args.run_id, device=args.device, work=Path(tmp))
        except (CannotRemeasure, BundleError) as exc:
            print(f"remeasure_agreement: {exc}", file=sys.stderr)
            return 2
    if result["settings_problem"]:
        print(f"remeasure_agreement: run {args.run_id}: {result['settings_problem']}", file=sys.stderr)
        return 2
    if args.rows is not None:
        keep = {k: result[k] for k in ("old", "new", "reference", "again")}
        args.rows.write_text(json.dumps(keep, default=str, indent=1))
    lines, ok = report(result)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
